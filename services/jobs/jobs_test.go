package jobs_test

import (
	"context"
	"testing"

	"github.com/riverqueue/river"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/jobs"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type waitArgs struct {
	ExecutionID string `json:"execution_id"`
}

func (waitArgs) Kind() string { return "test.wait" }

type waitWorker struct{ river.WorkerDefaults[waitArgs] }

func (waitWorker) Work(context.Context, *river.Job[waitArgs]) error { return nil }

// Waiting and WaitingFor see the jobs queued and not yet worked (the queue is open
// but not running), by kind and by the value of one of their arguments.
func TestWaiting(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	q := jobs.New(pool, nil)
	if err := jobs.Register(q, &waitWorker{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Open(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "a"} {
		if err := q.Insert(ctx, waitArgs{ExecutionID: id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// One marked running (a worker's, live or dead) is told apart.
	if err := q.Insert(ctx, waitArgs{ExecutionID: "r"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
		WHERE args->>'execution_id' = 'r'`); err != nil {
		t.Fatal(err)
	}
	got, running, err := q.Waiting(ctx, "test.wait", "execution_id")
	if err != nil || len(got) != 2 || !got["a"] || !got["b"] || len(running) != 1 || !running["r"] {
		t.Fatalf("waiting: %v, running %v, %v", got, running, err)
	}
	if got, running, err := q.Waiting(ctx, "test.other", "execution_id"); err != nil || len(got)+len(running) != 0 {
		t.Fatalf("waiting of another kind: %v, %v, %v", got, running, err)
	}
	for id, want := range map[string]bool{"a": true, "b": true, "c": false, "r": false} {
		if ok, err := q.WaitingFor(ctx, "test.wait", "execution_id", id); err != nil || ok != want {
			t.Errorf("waiting for %s: %v, %v; want %v", id, ok, err, want)
		}
	}
}
