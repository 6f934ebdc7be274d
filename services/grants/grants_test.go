package grants_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// clock is a controllable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func addUser(t *testing.T, pool *pgxpool.Pool, name string) audit.Actor {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), `INSERT INTO users (username, role, password_hash) VALUES ($1, 'tool_user', 'x') RETURNING id`,
		name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return audit.Actor{Kind: audit.ActorUser, ID: id, Name: name}
}

func auditCount(t *testing.T, pool *pgxpool.Pool, action, result string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1 AND result = $2`, action, result).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A grant lasts 300 s: allowed at 299 s, refused at 301 s; a one-time grant is used
// once, and its second use is refused and audited; a grant is for its conversation,
// operation and target only.
func TestGrantLifetime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := grants.New(pool, &grants.Options{Now: clk.Now})
	alice := addUser(t, pool, "alice")

	g, err := s.Create(ctx, grants.Spec{ConversationID: "conv-1", Operation: "builtin__file_operations.create_file", By: alice})
	if err != nil {
		t.Fatal(err)
	}
	if g.Operation != "file_operations.create_file" || !g.ExpiresAt.Equal(clk.Now().Add(300*time.Second)) {
		t.Fatalf("grant: %+v", g)
	}
	for _, tc := range []struct{ conv, op, target string }{
		{"conv-2", "file_operations.create_file", ""},
		{"conv-1", "file_operations.delete_file", ""},
		{"conv-1", "terminal_operations.run_command", ""},
	} {
		if ok, err := s.Allow(ctx, tc.conv, tc.op, tc.target); err != nil || ok {
			t.Errorf("Allow(%q, %q): got %v %v, want false", tc.conv, tc.op, ok, err)
		}
	}
	clk.Add(299 * time.Second)
	for range 3 { // multi-use
		if ok, err := s.Allow(ctx, "conv-1", "file_operations.create_file", "/etc/x"); err != nil || !ok {
			t.Fatalf("at 299 s: got %v %v, want allowed", ok, err)
		}
	}
	if ok, _ := s.Allow(ctx, "conv-1", "create_file", "/etc/x"); !ok {
		t.Fatal("the bare operation name is not allowed")
	}
	clk.Add(2 * time.Second)
	if ok, err := s.Allow(ctx, "conv-1", "file_operations.create_file", "/etc/x"); err != nil || ok {
		t.Fatalf("at 301 s: got %v %v, want refused", ok, err)
	}
	if n := auditCount(t, pool, "grant.use", audit.ResultSuccess); n != 4 {
		t.Fatalf("grant.use entries: %d, want 4", n)
	}

	// One-time, and for one target.
	if _, err := s.Create(ctx, grants.Spec{ConversationID: "conv-1", Operation: "file_operations.delete_file", Target: "/tmp/a",
		OneTime: true, TTL: time.Minute, By: alice}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Allow(ctx, "conv-1", "file_operations.delete_file", "/tmp/b"); ok {
		t.Fatal("another target was allowed")
	}
	if ok, err := s.Allow(ctx, "conv-1", "file_operations.delete_file", "/tmp/a"); err != nil || !ok {
		t.Fatalf("first use: %v %v", ok, err)
	}
	if ok, err := s.Allow(ctx, "conv-1", "file_operations.delete_file", "/tmp/a"); err != nil || ok {
		t.Fatalf("second use of a one-time grant: got %v %v, want refused", ok, err)
	}
	if n := auditCount(t, pool, "grant.reuse", audit.ResultDenied); n != 1 {
		t.Fatalf("grant.reuse denied entries: %d, want 1", n)
	}

	// Revoked: refused at once, audited; only the giver revokes their own.
	g, err = s.Create(ctx, grants.Spec{ConversationID: "conv-3", Operation: "file_operations", By: alice})
	if err != nil {
		t.Fatal(err)
	}
	bob := addUser(t, pool, "bob")
	if _, err := s.Revoke(ctx, bob, g.ID, true); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("bob revokes alice's grant: %v", err)
	}
	active, err := s.Active(ctx, grants.Filter{UserID: alice.ID})
	if err != nil || len(active) != 1 || active[0].ID != g.ID {
		t.Fatalf("active: %v %+v", err, active)
	}
	if _, err := s.Revoke(ctx, alice, g.ID, true); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Allow(ctx, "conv-3", "file_operations.rename_file", ""); ok {
		t.Fatal("a revoked grant allowed")
	}
	if n := auditCount(t, pool, "grant.revoke", audit.ResultSuccess); n != 1 {
		t.Fatalf("grant.revoke entries: %d", n)
	}

	// An ended grant cannot be revoked again: it says how it ended, and nothing changes.
	if _, err := s.Revoke(ctx, alice, g.ID, true); !fault.Is(err, fault.KindConflict) || !strings.Contains(err.Error(), "already ended (revoked") {
		t.Fatalf("revoke a revoked grant: %v", err)
	}
	if n := auditCount(t, pool, "grant.revoke", audit.ResultSuccess); n != 1 {
		t.Fatalf("grant.revoke entries after a second revoke: %d", n)
	}
	// Listed as ended (used up, revoked, expired) for a day after they expire, then pruned.
	clk.Add(time.Hour)
	ended, err := s.Ended(ctx, grants.Filter{UserID: alice.ID})
	if err != nil || len(ended) != 3 {
		t.Fatalf("ended: %v %+v", err, ended)
	}
	hows := map[string]int{}
	for _, g := range ended {
		how, at := s.EndOf(g)
		if at.IsZero() || at.After(clk.Now()) {
			t.Fatalf("grant %s ended %s at %v", g.ID, how, at)
		}
		hows[how]++
	}
	if hows["used"] != 1 || hows["revoked"] != 1 || hows["expired"] != 1 {
		t.Fatalf("how they ended: %v", hows)
	}
	if n, err := s.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("prune within a day of expiry: %d %v, want 0", n, err)
	}
	clk.Add(grants.EndedKept)
	if n, err := s.Prune(ctx); err != nil || n != 3 {
		t.Fatalf("prune: %d %v, want 3", n, err)
	}
	if ended, err := s.Ended(ctx, grants.Filter{}); err != nil || len(ended) != 0 {
		t.Fatalf("ended after the prune: %v %+v", err, ended)
	}
}

// Many calls race for one one-time grant: exactly one passes.
func TestOneTimeGrantRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	if _, err := s.Create(ctx, grants.Spec{ConversationID: "c", Operation: "x.y", OneTime: true, By: alice}); err != nil {
		t.Fatal(err)
	}
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ok, err := s.Allow(ctx, "c", "x.y", "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 1 {
		t.Fatalf("%d calls passed, want 1", passed.Load())
	}
}

// Parallel calls under one multi-use grant all pass: one waits for another's use
// rather than finding the grant taken.
func TestMultiUseGrantParallel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	g, err := s.Create(ctx, grants.Spec{ConversationID: "c", Operation: "x.y", By: alice})
	if err != nil {
		t.Fatal(err)
	}
	// Another call's use holds the grant's row.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM grants WHERE id = $1 FOR UPDATE`, g.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() {
		ok, err := s.Allow(ctx, "c", "x.y", "")
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	select {
	case ok := <-done:
		_ = tx.Rollback(ctx)
		t.Fatalf("Allow answered %v while another use held the grant, want it to wait", ok)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("the call was refused under a multi-use grant")
	}
}

// Free-text answers map to approve or reject with seed 000 §4's words.
func TestClassify(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]grants.Verdict{
		"yes, go ahead": grants.Approve, "OK": grants.Approve, "Proceed.": grants.Approve, "approve": grants.Approve,
		"Confirm": grants.Approve, "no": grants.Reject, "Cancel that": grants.Reject, "STOP": grants.Reject,
		"deny": grants.Reject, "reject": grants.Reject, "no, don't proceed": grants.Reject,
		"use the blue one": grants.Neutral, "yesterday": grants.Neutral, "nothing": grants.Neutral,
		// A negated approval refuses; a question approves nothing.
		"don't proceed": grants.Reject, "Don\u2019t approve that": grants.Reject, "Do not allow this": grants.Reject,
		"I don't approve": grants.Reject, "not ok": grants.Reject, "never, ok?": grants.Reject,
		"is that ok?": grants.Neutral, "proceed?": grants.Neutral, "I won't": grants.Neutral,
	} {
		if got := grants.Classify(in); got != want {
			t.Errorf("Classify(%q) = %v, want %v", in, got, want)
		}
	}
}

// A question waits for its person: an approving answer with authorize_operation makes
// a grant; a rejection declines; another person cannot answer; a caller that gives up
// cancels it.
func TestAsk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	bob := addUser(t, pool, "bob")

	ask := func(ctx context.Context, q grants.Question) chan grants.Collaboration {
		out := make(chan grants.Collaboration, 1)
		go func() {
			c, err := s.Ask(ctx, q)
			if err != nil {
				t.Error(err)
			}
			out <- c
		}()
		return out
	}
	pending := func() grants.Collaboration {
		t.Helper()
		var list []grants.Collaboration
		deadline := time.Now().Add(10 * time.Second)
		for len(list) == 0 && time.Now().Before(deadline) {
			var err error
			if list, err = s.Collaborations(ctx, alice.ID, grants.StatusPending); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(list) != 1 {
			t.Fatalf("pending: %+v", list)
		}
		return list[0]
	}

	done := ask(ctx, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "conv-1", Prompt: "May I create /etc/x?",
		AuthorizeOperation: "file_operations.create_file", OneTime: true})
	c := pending()
	token := alice
	token.Kind, token.TokenID = audit.ActorToken, "tok"
	if _, err := s.Respond(ctx, token, c.ID, "yes"); !fault.Is(err, fault.KindForbidden) {
		t.Fatalf("alice's token answers: %v", err)
	}
	if _, err := s.Respond(ctx, bob, c.ID, "yes"); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("bob answers alice's question: %v", err)
	}
	if _, err := s.Respond(ctx, alice, c.ID, "Yes, proceed"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.Status != grants.StatusAnswered || !got.Approved() || got.GrantID == nil || got.Response != "Yes, proceed" {
		t.Fatalf("answered: %+v", got)
	}
	if _, err := s.Respond(ctx, alice, c.ID, "no"); !errors.Is(err, grants.ErrNotPending) {
		t.Fatalf("a second answer: %v", err)
	}
	if ok, _ := s.Allow(ctx, "conv-1", "file_operations.create_file", "/etc/x"); !ok {
		t.Fatal("the grant did not allow")
	}
	if ok, _ := s.Allow(ctx, "conv-1", "file_operations.create_file", "/etc/x"); ok {
		t.Fatal("the one-time grant allowed twice")
	}

	done = ask(ctx, grants.Question{UserID: alice.ID, ConversationID: "conv-1", Prompt: "Delete it?", AuthorizeOperation: "file_operations.delete_file"})
	c = pending()
	if _, err := s.Respond(ctx, alice, c.ID, "No, stop"); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.Status != grants.StatusDeclined || got.GrantID != nil {
		t.Fatalf("declined: %+v", got)
	}

	cctx, cancel := context.WithCancel(ctx)
	done = ask(cctx, grants.Question{UserID: alice.ID, ConversationID: "conv-1", Prompt: "Still there?"})
	pending()
	cancel()
	if got := <-done; got.Status != grants.StatusCancelled {
		t.Fatalf("cancelled: %+v", got)
	}
	for action, want := range map[string]int{"collaboration.request": 3, "collaboration.respond": 1, "collaboration.decline": 1,
		"collaboration.cancel": 1, "grant.create": 1} {
		if n := auditCount(t, pool, action, audit.ResultSuccess); n != want {
			t.Errorf("%s entries: %d, want %d", action, n, want)
		}
	}
}

// A question whose waiting call is gone (no sign of life for a minute) is cancelled by
// the prune; one nobody answered for a day is expired; a waiting one stays.
func TestPruneQuestions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	for _, q := range []struct{ prompt, age string }{{"abandoned", "5 minutes"}, {"old", "25 hours"}} {
		if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, created_at, heartbeat_at)
			VALUES ($1, 'c', $2, now() - $3::interval, now() - $3::interval)`, alice.ID, q.prompt, q.age); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = s.Ask(cctx, grants.Question{UserID: alice.ID, ConversationID: "c", Prompt: "waiting"}) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := s.Collaborations(ctx, alice.ID, grants.StatusPending)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	all, err := s.Collaborations(ctx, alice.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		got[c.Prompt] = c.Status
	}
	if got["abandoned"] != grants.StatusCancelled || got["old"] != grants.StatusExpired || got["waiting"] != grants.StatusPending {
		t.Fatalf("after the prune: %v", got)
	}

	// A question that ended QuestionsKept ago is removed; one that ended since, or one
	// asked that long ago and still waiting, stays.
	for _, q := range []struct{ prompt, status, ended string }{
		{"answered long ago", "answered", "91 days"}, {"expired long ago", "expired", "100 days"},
		{"answered lately", "answered", "89 days"}, {"pending long", "pending", ""}} {
		if _, err := pool.Exec(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt, status, created_at, answered_at, heartbeat_at)
			VALUES ($1, 'c', $2, $3, now() - interval '120 days', now() - nullif($4, '')::interval, now())`, alice.ID, q.prompt, q.status, q.ended); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	all, err = s.Collaborations(ctx, alice.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, c := range all {
		left[c.Prompt] = true
	}
	if left["answered long ago"] || left["expired long ago"] || !left["answered lately"] || !left["pending long"] || !left["waiting"] {
		t.Fatalf("after a prune, questions left: %v", left)
	}
}

// A grant's use is audited as its caller's (a person's token here), with the call.
func TestGrantUseNamesTheCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	if _, err := s.Create(ctx, grants.Spec{ConversationID: "c", Operation: "x.y", By: alice}); err != nil {
		t.Fatal(err)
	}
	call := callmeta.With(ctx, callmeta.Meta{ConversationID: "c", UserID: alice.ID, UserName: "alice", ActorKind: "token", TokenID: "tok-1", CallID: "call-9"})
	if ok, err := s.Allow(call, "c", "x.y", ""); err != nil || !ok {
		t.Fatalf("allow: %v %v", ok, err)
	}
	var kind, id, tok, callID string
	if err := pool.QueryRow(ctx, `SELECT actor_kind, coalesce(actor_id::text, ''), payload->>'token_id', payload->>'call_id' FROM audit_log WHERE action = 'grant.use'`).
		Scan(&kind, &id, &tok, &callID); err != nil {
		t.Fatal(err)
	}
	if kind != "token" || id != alice.ID || tok != "tok-1" || callID != "call-9" {
		t.Fatalf("grant.use by %s %s token %s call %s", kind, id, tok, callID)
	}
}

// Migration 45 gives a person's default conversation, claimed by another user before
// only its person could name it, back to its person.
func TestDefaultConversationsGoBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice, bob := addUser(t, pool, "alice"), addUser(t, pool, "bob")
	if owner, err := s.Claim(ctx, "user-"+alice.ID, "user-"+alice.ID, bob.ID, "bob"); err != nil || owner != bob.ID {
		t.Fatalf("claim: %q %v", owner, err)
	}
	if _, err := s.Create(ctx, grants.Spec{ConversationID: "user-" + alice.ID, Operation: "x.y", By: bob}); err != nil {
		t.Fatal(err)
	}
	dbtest.RunMigration(t, pool, "000045_default_conversations_owned.up.sql")
	if owner, _, err := s.OwnerOf(ctx, "user-"+alice.ID); err != nil || owner != alice.ID {
		t.Fatalf("after the migration: owner %q %v, want alice", owner, err)
	}
	if ok, err := s.Has(ctx, "user-"+alice.ID, "x.y", ""); err != nil || ok {
		t.Fatalf("bob's grant in alice's conversation still serves: %v %v", ok, err)
	}
}
