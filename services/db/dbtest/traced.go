package dbtest

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Queries records the SQL and arguments of every query a pool runs (TracedPool), for
// tests that EXPLAIN what a function sent.
type Queries struct {
	mu   sync.Mutex
	list []pgx.TraceQueryStartData
}

func (q *Queries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.list = append(q.list, d)
	return ctx
}

func (q *Queries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Reset forgets the queries recorded so far.
func (q *Queries) Reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.list = nil
}

// All is the queries recorded since the last Reset, oldest first.
func (q *Queries) All() []pgx.TraceQueryStartData {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]pgx.TraceQueryStartData(nil), q.list...)
}

// TracedPool is a pool on a new database of t's (NewURL) whose queries it records.
func TracedPool(t testing.TB) (*pgxpool.Pool, *Queries) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := &Queries{}
	cfg.ConnConfig.Tracer = q
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, q
}
