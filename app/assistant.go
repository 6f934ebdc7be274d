package app

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/assistant"
)

// assistant builds the plain-language assistant; with a language model configured for
// the planner (--llm-url), it may ask the model what a sentence means.
func (a *App) assistant(pool *pgxpool.Pool, cfg Config) *assistant.Service {
	s := assistant.New(pool, a.Auth, a.Registry, a.Tools, a.MCP, a.Router, cfg.Logger)
	s.Watch(a.Bus)
	planner := cfg.Planner
	if planner == nil {
		planner = cfg.Executions.Planner // how tests configure it
	}
	if m, ok := planner.(assistant.Model); ok {
		s.SetModel(m)
	}
	return s
}
