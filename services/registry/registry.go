// Package registry owns the MCP servers Toolwarden knows and the tools discovered on them
// (docs/architecture.md): registrations with their encrypted secrets, connection status and health
// history, discovery upserts with definition pinning (docs/architecture.md, State machines), and configuration as code.
package registry

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// Topics on which the registry announces changes (docs/architecture.md, Events and the websocket).
const (
	// ServersTopic carries server.changed, server.deleted, server.status and discovery.* events.
	ServersTopic = "servers"
	// ToolsTopic carries tools.changed events (a discovery added, changed or removed tools).
	ToolsTopic = "tools"
)

// Errors callers can test for.
var (
	ErrNotFound = fault.NotFound("server")
)

// Options tunes a Service; nil means defaults.
type Options struct {
	Logger *slog.Logger
	// Local is this process's buses reading pool: the service begins its transactions
	// on it, so its events are delivered to them before its methods return (see
	// events.Local). nil: they arrive with the NOTIFY.
	Local *events.Local
	// Egress refuses server URLs the egress policy denies (nil: only the cloud
	// metadata endpoints).
	Egress *egress.Policy
}

// Service is the registry. It is safe for concurrent use.
type Service struct {
	pool  *pgxpool.Pool
	begin db.TxBeginner // pool, or its Local
	keys  *secrets.Keyring
	log   *slog.Logger
	// egress is checked against every HTTP server's URL at registration.
	egress *egress.Policy
}

// New returns a registry over pool; keys encrypt and decrypt server secrets.
func New(pool *pgxpool.Pool, keys *secrets.Keyring, opts *Options) *Service {
	if opts == nil {
		opts = &Options{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{pool: pool, begin: opts.Local.Beginner(pool), keys: keys, log: log, egress: opts.Egress}
}
