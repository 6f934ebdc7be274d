package router

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
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
