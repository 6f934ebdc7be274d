package router

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
)

// A record submitted while the router stops is either written or refused
// (errStopped), never accepted and then dropped: jobs queued after the writers' last
// drain used to wait in the queue forever.
func TestRecorderStopsWithoutDroppingRecords(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	w := newRecorder(pool, pool, nil, slog.New(slog.DiscardHandler), 64)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.run(ctx); close(stopped) }()

	var accepted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				j := &job{drafts: []events.Draft{{Topic: "test.records", Kind: "test.record", Payload: map[string]any{}}}}
				err := w.submit(context.Background(), j, false)
				if errors.Is(err, errStopped) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				accepted.Add(1)
			}
		})
	}
	// Stop once the writers are busy with what keeps arriving.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		var n int64
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE topic = 'test.records'`).Scan(&n)
		return n > 0
	}, "no record was written")
	cancel()
	<-stopped
	wg.Wait()

	var written int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE topic = 'test.records'`).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written != accepted.Load() || written == 0 {
		t.Errorf("%d records accepted, %d written", accepted.Load(), written)
	}
}

// sinceCounter counts the bus's reads of events back from the table.
type sinceCounter struct{ n atomic.Int64 }

func (c *sinceCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "/* events.Since */") {
		c.n.Add(1)
	}
	return ctx
}

func (c *sinceCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A gathered write's audit entries are announced with its other events, in one
// publication this replica's bus hands to its subscribers from memory: announced apart
// (before them, and by NOTIFY), they made the bus read both back from the table.
func TestGatheredWriteAnnouncesWithItsEvents(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	reads := &sinceCounter{}
	cfg.ConnConfig.Tracer = reads
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	bus := events.NewBus(pool, &events.BusOptions{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = bus.Run(ctx) }()
	<-bus.Ready()
	sub := bus.Subscribe(audit.Topic, "test.records")
	defer sub.Close()
	w := newRecorder(pool, pool, bus, slog.New(slog.DiscardHandler), 64)
	stopped := make(chan struct{})
	go func() { w.run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	before := reads.n.Load()
	j := &job{audits: []audit.Entry{{Actor: audit.System, Action: "tool.call", Result: audit.ResultDenied}},
		drafts: []events.Draft{{Topic: "test.records", Kind: "test.record", Payload: map[string]any{}}}}
	if err := w.submit(t.Context(), j, false); err != nil {
		t.Fatal(err)
	}
	if err := w.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-sub.C:
		case <-time.After(10 * time.Second):
			t.Fatal("the gathered write's events never reached a subscriber")
		}
	}
	// A NOTIFY the bus would act on arrives within moments of the commit.
	time.Sleep(300 * time.Millisecond)
	if n := reads.n.Load() - before; n != 0 {
		t.Errorf("the bus read events back %d times after a gathered write of its own", n)
	}
}
