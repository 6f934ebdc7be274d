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
	q := jobs.New(dbtest.New(t), nil)
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
	got, err := q.Waiting(ctx, "test.wait", "execution_id")
	if err != nil || len(got) != 2 || !got["a"] || !got["b"] {
		t.Fatalf("waiting: %v, %v", got, err)
	}
	if got, err := q.Waiting(ctx, "test.other", "execution_id"); err != nil || len(got) != 0 {
		t.Fatalf("waiting of another kind: %v, %v", got, err)
	}
	for id, want := range map[string]bool{"a": true, "b": true, "c": false} {
		if ok, err := q.WaitingFor(ctx, "test.wait", "execution_id", id); err != nil || ok != want {
			t.Errorf("waiting for %s: %v, %v; want %v", id, ok, err, want)
		}
	}
}
