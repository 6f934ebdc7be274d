package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Config says which PostgreSQL to use.
type Config struct {
	// URL of an external PostgreSQL; empty means the embedded cluster under DataDir/pg.
	URL     string
	DataDir string
	// Migrate applies pending migrations after connecting.
	Migrate bool
	Cluster *ClusterOptions
}

// DB is an open database: the pool, and the embedded cluster when one is in use.
type DB struct {
	Pool    *pgxpool.Pool
	URL     string
	Cluster *Cluster // nil with an external database
}

// Open connects to the configured database, starting (or attaching to) the embedded
// cluster when no URL is given, and migrates it when asked. Close undoes all of it.
func Open(ctx context.Context, cfg Config) (_ *DB, err error) {
	d := &DB{URL: cfg.URL}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.URL == "" {
		if d.Cluster, err = StartCluster(ctx, cfg.DataDir, cfg.Cluster); err != nil {
			return nil, err
		}
		d.URL = d.Cluster.URL()
	}
	if d.Pool, err = NewPool(ctx, d.URL); err != nil {
		return nil, err
	}
	if err := checkVersion(ctx, d.Pool); err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := Migrate(d.URL); err != nil {
			return nil, err
		}
	}
	return d, nil
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

// Close closes the pool and stops the embedded cluster if this process started it.
func (d *DB) Close() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.Cluster != nil {
		d.Cluster.Stop()
	}
}
