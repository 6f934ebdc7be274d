package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/jobs"
	"github.com/toolwarden/toolwarden/services/system"
)

type signalArgs struct{}

func (signalArgs) Kind() string { return "test.signal" }

type signalWorker struct {
	river.WorkerDefaults[signalArgs]
	ran chan struct{}
}

func (w *signalWorker) Work(context.Context, *river.Job[signalArgs]) error {
	w.ran <- struct{}{}
	return nil
}

// A queue whose database cannot be reached when it starts (an external PostgreSQL at
// max_connections, a failover) starts once it can, and /healthz names it down until
// then: River's Start fails at once then, and a queue that gave up worked no job on
// that replica for good.
func TestQueueStartsOnceTheDatabaseAnswers(t *testing.T) {
	ctx := context.Background()
	url := dbtest.NewURL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dbtest.Cluster(t).URLFor("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	allow := func(on bool) {
		t.Helper()
		if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t",
			pgx.Identifier{cfg.Database}.Sanitize(), on)); err != nil {
			t.Fatal(err)
		}
	}
	allow(false)
	pool, err := pgxpool.New(ctx, url) // connects on first use
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	w := &signalWorker{ran: make(chan struct{}, 1)}
	q := jobs.New(pool, nil)
	if err := jobs.Register(q, w); err != nil {
		t.Fatal(err)
	}
	if err := q.Open(); err != nil {
		t.Fatal(err)
	}
	s := system.New(pool, false).WithJobs(q)
	defer s.Close()
	queue := func() (system.Component, system.Health) {
		h := s.Health(ctx)
		return h.Components["job_queue"], h
	}

	runCtx, stop := context.WithCancel(ctx)
	var runErr error
	done := make(chan struct{})
	go func() { runErr = q.Run(runCtx); close(done) }()
	defer func() {
		stop()
		<-done
	}()

	// The first start has been tried, and failed.
	select {
	case <-q.Attempted():
	case <-done:
		t.Fatalf("run returned before its context ended: %v", runErr)
	case <-time.After(time.Minute):
		t.Fatal("the queue never tried to start")
	}
	c, h := queue()
	if c.Status != system.Down || c.Problem == "" || h.OK || h.Status != "degraded" {
		t.Fatalf("health while the database refuses connections: job_queue %+v, health %+v; want it down", c, h)
	}

	allow(true)
	if err := q.Insert(ctx, signalArgs{}, &river.InsertOpts{Queue: jobs.Maintenance}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ran:
	case <-done:
		t.Fatalf("run returned before its context ended: %v", runErr)
	case <-time.After(time.Minute):
		t.Fatal("a job queued once the database answered never ran")
	}
	testkit.WaitFor(t, time.Minute, func() bool {
		c, _ := queue()
		return c.Status == system.Up && c.Since != nil && c.Problem == ""
	}, "health never said the job queue was up")
	if c, h := queue(); !h.OK || len(h.Down) != 0 {
		t.Fatalf("health once started: job_queue %+v, health %+v; want ok", c, h)
	}
}
