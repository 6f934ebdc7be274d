package web

import (
	"context"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/events"
)

// RenderLive renders ev's live fragment as the hub does (once, for every viewer),
// without its cache: for the benchmarks (web_test).
func (s *Server) RenderLive(ctx context.Context, ev events.Event) ([]byte, error) {
	return handlers.Live{Deps: s.deps}.Render(ctx, ev)
}
