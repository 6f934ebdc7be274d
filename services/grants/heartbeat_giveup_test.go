package grants

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// retryHandler hands each "heartbeat failed; trying again" record of a waiting Ask to
// the test and holds the Ask there until the test closes the channel it got, so the
// test moves the host clock between two heartbeats.
type retryHandler struct {
	retries chan chan struct{}
	stop    chan struct{}
}

func (h retryHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h retryHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h retryHandler) WithGroup(string) slog.Handler            { return h }
func (h retryHandler) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "heartbeat failed") {
		return nil
	}
	resume := make(chan struct{})
	select {
	case h.retries <- resume:
		select {
		case <-resume:
		case <-h.stop:
		}
	case <-h.stop:
	}
	return nil
}

// A waiting question whose heartbeats keep failing (the database refuses them) is
// waited on while the last heartbeat that got through is less than Abandoned ago, and
// given up with "no heartbeat" once it is more: the prune has cancelled it by then.
// The host clock is moved instead of waiting the minute.
func TestAskGivesUpWithoutHeartbeats(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pool := dbtest.New(t)
	var alice string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('alice', 'tool_user', 'x') RETURNING id`).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	h := retryHandler{retries: make(chan chan struct{}), stop: make(chan struct{})}
	s := New(pool, &Options{Logger: slog.New(h)})
	var ahead atomic.Int64
	s.now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }

	done := make(chan error, 1)
	go func() {
		_, err := s.Ask(ctx, Question{UserID: alice, UserName: "alice", ConversationID: "c", Prompt: "Go on?"})
		done <- err
	}()
	defer func() { close(h.stop); cancel(); <-done }()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, pool, `SELECT count(*) FROM collaborations WHERE status = 'pending' AND heartbeat_at IS NOT NULL`) == 1
	}, "no question asked")
	// From here every heartbeat is refused.
	if _, err := pool.Exec(ctx, `ALTER TABLE collaborations ADD CONSTRAINT no_heartbeats
		CHECK (heartbeat_at IS NULL OR heartbeat_at < '2000-01-01') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	nextRetry := func(what string) chan struct{} {
		t.Helper()
		select {
		case resume := <-h.retries:
			return resume
		case err := <-done:
			done <- err // for the deferred wait
			t.Fatalf("%s: the wait ended: %v", what, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no heartbeat retried", what)
		}
		return nil
	}
	// The first refused heartbeat: none gets through after it.
	resume := nextRetry("the first refused heartbeat")
	ahead.Store(int64(Abandoned - 10*time.Second))
	close(resume)
	// Less than Abandoned without a heartbeat: tried again.
	resume = nextRetry("less than Abandoned without a heartbeat")
	ahead.Store(int64(Abandoned + 10*time.Second))
	close(resume)
	select {
	case err := <-done:
		done <- err // for the deferred wait
		if err == nil || !strings.Contains(err.Error(), "no heartbeat") {
			t.Fatalf("after more than Abandoned without a heartbeat: %v, want a no-heartbeat error", err)
		}
	case resume := <-h.retries:
		close(resume)
		t.Fatal("more than Abandoned without a heartbeat: the wait went on")
	case <-time.After(30 * time.Second):
		t.Fatal("more than Abandoned without a heartbeat: the wait did not end")
	}
}
