// Package configcode is configuration as code for everything an administrator sets
// (issue #22, seed 004 scenario 4): servers (services/registry's format, unchanged),
// categories, every tool's state, risk override, timeout, rate limit, category, tags,
// parameter configuration (secrets as references, never values), per-user permissions,
// compensation and test cases, and the run-time settings — exported as one YAML file
// and imported back as a reviewed plan.
//
// The package composes the services that own those tables: it reads the current state
// with its own queries (export and planning only read), and every change goes through
// the owner's transactional function (registry.ApplyImportTx, tools.UpdateTx,
// tools.SetEnabledTx, ...), so an import validates, versions, audits and announces each
// change exactly as the pages do. See docs/configuration.md.
package configcode

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Discoverer lists and stores the tools of a registered server now (mcpclient.Manager's
// DiscoverOnce). An import that registers a server discovers it before it applies the
// settings of that server's tools.
type Discoverer interface {
	DiscoverOnce(ctx context.Context, id, trigger string, actor audit.Actor) (registry.DiscoveryResult, error)
}

// Service exports and imports the whole configuration. It is safe for concurrent use.
type Service struct {
	pool     *pgxpool.Pool
	begin    db.TxBeginner
	reg      *registry.Service
	tools    *tools.Service
	discover Discoverer
	log      *slog.Logger
}

// Options tune the service; nil means defaults.
type Options struct {
	// Discoverer discovers servers an import registers; nil: their tools' settings are
	// reported as not applied (import the file again once the servers are discovered).
	Discoverer Discoverer
	Local      *events.Local
	Logger     *slog.Logger
}

// New returns the service over the owners of the configuration.
func New(pool *pgxpool.Pool, reg *registry.Service, ts *tools.Service, opts *Options) *Service {
	if opts == nil {
		opts = &Options{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Service{pool: pool, begin: opts.Local.Beginner(pool), reg: reg, tools: ts, discover: opts.Discoverer, log: log}
}
