package grants

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// offBy is a host clock d off the real (and the database's) time.
func offBy(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

// Replicas' clocks differ: a question asked on a host 90 s behind, or whose heartbeat
// is the database's time, still waits for its answer when pruned on a host 90 s ahead
// or in time (Abandoned is a minute).
func TestQuestionSurvivesClockSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var alice string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('alice', 'tool_user', 'x') RETURNING id`).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, heartbeat_at)
		VALUES ($1, 'c', 'heartbeat now', now())`, alice); err != nil {
		t.Fatal(err)
	}
	asker := New(pool, nil)
	asker.now = offBy(-90 * time.Second)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = asker.Ask(cctx, Question{UserID: alice, UserName: "alice", ConversationID: "c", Prompt: "asked behind"})
	}()
	defer func() { cancel(); <-done }()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, pool, `SELECT count(*) FROM collaborations WHERE prompt = 'asked behind' AND heartbeat_at IS NOT NULL`) == 1
	}, "the question asked")
	for _, d := range []time.Duration{90 * time.Second, 0} {
		pruner := New(pool, nil)
		pruner.now = offBy(d)
		if _, err := pruner.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		for _, prompt := range []string{"heartbeat now", "asked behind"} {
			if n := testkit.Count(t, pool, `SELECT count(*) FROM collaborations WHERE prompt = $1 AND status = 'pending'`, prompt); n != 1 {
				t.Errorf("pruned on a host %s ahead of the database: question %q is no longer pending", d, prompt)
			}
		}
	}
}

// A 5-minute grant given on a host whose clock is 10 minutes behind is usable now on
// a host in time and on one 10 minutes ahead (and listed there as usable); one given on a host 10 minutes ahead
// lasts 5 minutes by the database's clock, not 15.
func TestGrantLastsItsTTLDespiteClockSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	behind, ahead, inTime := New(pool, nil), New(pool, nil), New(pool, nil)
	behind.now, ahead.now = offBy(-10*time.Minute), offBy(10*time.Minute)

	if _, err := behind.Create(ctx, Spec{ConversationID: "c1", Operation: "run_command", TTL: 5 * time.Minute, By: audit.System}); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Service{"in time": inTime, "10 minutes ahead": ahead} {
		if ok, err := s.Has(ctx, "c1", "run_command", "ls"); err != nil || !ok {
			t.Errorf("a host %s: the grant just given on a host 10 minutes behind is not there (%v %v)", name, ok, err)
		}
		if ok, err := s.Allow(ctx, "c1", "run_command", "ls"); err != nil || !ok {
			t.Errorf("a host %s: the grant just given on a host 10 minutes behind was refused (%v %v)", name, ok, err)
		}
		if list, err := s.Active(ctx, Filter{ConversationID: "c1"}); err != nil || len(list) != 1 {
			t.Errorf("a host %s: %d active grants, want 1 (%v)", name, len(list), err)
		}
	}

	// Listed as usable, not ended, on the host ahead (EndOf reads the database's clock).
	if list, err := ahead.Active(ctx, Filter{ConversationID: "c1"}); err == nil && len(list) == 1 {
		if how, _ := ahead.EndOf(list[0]); how != "" {
			t.Errorf("a host 10 minutes ahead lists the grant just given as %s", how)
		}
		if got, err := ahead.Get(ctx, list[0].ID); err != nil || !ahead.Usable(got) {
			t.Errorf("a host 10 minutes ahead: the grant just given is not usable (%v)", err)
		}
	}

	g, err := ahead.Create(ctx, Spec{ConversationID: "c2", Operation: "run_command", TTL: 5 * time.Minute, By: audit.System})
	if err != nil {
		t.Fatal(err)
	}
	if n := testkit.Count(t, pool, `SELECT count(*) FROM grants WHERE id = $1 AND created_at <= now()
		AND expires_at = created_at + interval '5 minutes'`, g.ID); n != 1 {
		t.Errorf("a grant given on a host 10 minutes ahead was made at %s, expiring at %s: after the database's now()",
			g.CreatedAt.UTC().Format(time.TimeOnly), g.ExpiresAt.UTC().Format(time.TimeOnly))
	}
}
