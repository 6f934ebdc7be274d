package db

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AppRole is the role the application's connections have (docs/security.md): not a
// superuser, not the tables' owner, and without UPDATE, DELETE or TRUNCATE on the
// append-only tables. Migration 000028 grants its privileges; the embedded cluster
// creates it with LOGIN, an external database's administrator creates it (or a login
// role that is a member of it).
const AppRole = "toolwarden_app"

// Config says which PostgreSQL to use.
type Config struct {
	// URL of an external PostgreSQL, for the application's connections; empty means the
	// embedded cluster under DataDir/pg (connected to as AppRole).
	URL string
	// MigrateURL is the external PostgreSQL as the tables' owner, for migrations; empty:
	// URL (one role for both, as before roles were split).
	MigrateURL string
	// Owner makes the pool connect as the owner too (the migrate command).
	Owner   bool
	DataDir string
	// Migrate applies pending migrations after connecting, saying so to Cluster.Logger
	// (when set) before each; the context ending stops them between two.
	Migrate bool
	Cluster *ClusterOptions
}

// DB is an open database: the pool, and the embedded cluster when one is in use.
type DB struct {
	Pool *pgxpool.Pool
	URL  string // the pool's
	// OwnerURL connects as the tables' owner: migrations run on it.
	OwnerURL string
	Cluster  *Cluster // nil with an external database
}

// Open connects to the configured database, starting (or attaching to) the embedded
// cluster when no URL is given, and migrates it when asked. Close undoes all of it.
func Open(ctx context.Context, cfg Config) (_ *DB, err error) {
	d := &DB{URL: cfg.URL, OwnerURL: cfg.MigrateURL}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.URL == "" {
		if d.Cluster, err = StartCluster(ctx, cfg.DataDir, cfg.Cluster); err != nil {
			return nil, err
		}
		d.URL, d.OwnerURL = d.Cluster.AppURL(), d.Cluster.URL()
	}
	if d.OwnerURL == "" {
		d.OwnerURL = d.URL
	}
	if cfg.Owner {
		d.URL = d.OwnerURL
	}
	// On the embedded cluster, a failed connection says when the process that started
	// the cluster stopped it under this one (Cluster.explainGone): the bare error is a
	// socket file that does not exist.
	var dial func(pgconn.DialFunc) pgconn.DialFunc
	if d.Cluster != nil {
		dial = d.Cluster.explainDial
	}
	if d.Pool, err = newPool(ctx, d.URL, dial); err != nil {
		return nil, err
	}
	if err := checkVersion(ctx, d.Pool); err != nil {
		return nil, err
	}
	if cfg.Migrate {
		var log *slog.Logger
		if cfg.Cluster != nil {
			log = cfg.Cluster.Logger
		}
		if err := MigrateContext(ctx, d.OwnerURL, log); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// RoleWarning says what is wrong with the role q connects as, for the application's
// connections: "" when it is not a superuser, cannot UPDATE, DELETE or TRUNCATE
// audit_log (or before the schema exists) and cannot create objects in its schema.
func RoleWarning(ctx context.Context, q Querier) (string, error) {
	var user, schema string
	var super, rewrite, create bool
	err := q.QueryRow(ctx, `/* db.RoleWarning */ SELECT current_user, r.rolsuper,
		to_regclass('audit_log') IS NOT NULL AND (has_table_privilege('audit_log', 'UPDATE') OR
			has_table_privilege('audit_log', 'DELETE') OR has_table_privilege('audit_log', 'TRUNCATE')),
		coalesce(current_schema(), ''), coalesce(has_schema_privilege(current_schema(), 'CREATE'), false)
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&user, &super, &rewrite, &schema, &create)
	if err != nil {
		return "", fmt.Errorf("db: role check: %w", err)
	}
	switch {
	case super:
		return fmt.Sprintf("the application connects to PostgreSQL as %q, a superuser: it could rewrite the audit log; connect as a member of %s (docs/security.md)", user, AppRole), nil
	case rewrite:
		return fmt.Sprintf("the application connects to PostgreSQL as %q, which may UPDATE, DELETE or TRUNCATE audit_log; connect as a member of %s (docs/security.md)", user, AppRole), nil
	case create:
		// The owner's SECURITY DEFINER functions search this schema: an object created
		// there could run as the owner (migration 63).
		return fmt.Sprintf("the application connects to PostgreSQL as %q, which may create objects in schema %q, where the owner's functions look up what they call: it could make itself the owner and rewrite the audit log; as that schema's owner run REVOKE CREATE ON SCHEMA %s FROM PUBLIC, %s (docs/security.md)",
			user, schema, schema, AppRole), nil
	}
	return "", nil
}

// minServerVersion is PostgreSQL 14: the oldest release the migrations are written for.
const minServerVersion = 140000

func checkVersion(ctx context.Context, pool *pgxpool.Pool) error {
	var v int
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		return fmt.Errorf("db: server version: %w", err)
	}
	if v < minServerVersion {
		return fmt.Errorf("db: PostgreSQL %d.%d is too old: Toolwarden needs 14 or newer", v/10000, v%10000)
	}
	return nil
}

// Close closes the pool and stops the embedded cluster if this process started it, once
// the other processes attached to it have closed theirs (Cluster.Stop).
func (d *DB) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.Cluster != nil {
		d.Cluster.Stop()
	}
}
