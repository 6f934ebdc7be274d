package grants_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
)

// indexUse is what pg_stat_user_indexes says of one index: its scans and the entries
// they read (the statistics reach it a moment after the statement, hence the waits).
func indexUse(t *testing.T, pool *pgxpool.Pool, index string) (scans, read int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes
		WHERE indexrelname = $1`, index).Scan(&scans, &read); err != nil {
		t.Fatal(err)
	}
	return scans, read
}

// waitForScans waits until index was scanned more than `after` times.
func waitForScans(t *testing.T, pool *pgxpool.Pool, index string, after int, what string) (scans, read int) {
	t.Helper()
	testkit.WaitFor(t, time.Minute, func() bool {
		scans, read = indexUse(t, pool, index)
		return scans > after
	}, what+" never scanned "+index+": it read the whole table")
	return scans, read
}

// The questions are found through their primary key and the indexes by person, not by
// reading the whole table (one row a call of user_collaboration, kept for good): an
// answer, a question, the heartbeat of a waiting call and a person's lists.
func TestCollaborationLookupsUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	for i := range 20 {
		addUser(t, pool, "other"+strings.Repeat("x", i))
	}
	// 20,000 questions of the others, half of them still pending.
	testkit.Exec(t, pool, `INSERT INTO collaborations (user_id, conversation_id, prompt, status, created_at)
		SELECT u.id, 'c', 'q' || g, CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'answered' END, now() - g * interval '1 second'
		FROM generate_series(1, 20000) g
		JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM users WHERE username <> 'alice') u ON u.n = g % 20`)
	var mine string
	if err := pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'May I?')
		RETURNING id::text`, alice.ID).Scan(&mine); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, pool, `ANALYZE collaborations`)

	pk, _ := indexUse(t, pool, "collaborations_pkey")
	if c, err := s.GetCollaboration(ctx, mine); err != nil || c.Prompt != "May I?" {
		t.Fatalf("get: %v %+v", err, c)
	}
	pk, _ = waitForScans(t, pool, "collaborations_pkey", pk, "GetCollaboration")

	pending, read := indexUse(t, pool, "collaborations_pending")
	if list, err := s.Collaborations(ctx, alice.ID, grants.StatusPending); err != nil || len(list) != 1 || list[0].ID != mine {
		t.Fatalf("alice's pending questions: %v %+v", err, list)
	}
	_, read2 := waitForScans(t, pool, "collaborations_pending", pending, "the pending list")
	// Only alice's entries: not a walk through everyone's 10,000 pending questions.
	if n := read2 - read; n > 100 {
		t.Fatalf("the pending list read %d entries of the pending index for alice's one question", n)
	}

	// Every status: through the index of a person's questions.
	all, read := indexUse(t, pool, "collaborations_user")
	if list, err := s.Collaborations(ctx, alice.ID, ""); err != nil || len(list) != 1 || list[0].ID != mine {
		t.Fatalf("alice's questions: %v %+v", err, list)
	}
	if _, read2 := waitForScans(t, pool, "collaborations_user", all, "the list of every status"); read2-read > 100 {
		t.Fatalf("the list read %d entries of the index for alice's one question", read2-read)
	}

	if c, err := s.Respond(ctx, alice, mine, "yes"); err != nil || c.Status != grants.StatusAnswered {
		t.Fatalf("respond: %v %+v", err, c)
	}
	pk, _ = waitForScans(t, pool, "collaborations_pkey", pk, "Respond")

	// A waiting call looks at its row (the heartbeat) until the answer.
	done := make(chan error, 1)
	go func() {
		c, err := s.Ask(ctx, grants.Question{UserID: alice.ID, UserName: "alice", ConversationID: "c", Prompt: "And now?"})
		if err == nil && c.Status != grants.StatusAnswered {
			t.Errorf("the waiting call ended %s", c.Status)
		}
		done <- err
	}()
	var asked []grants.Collaboration
	testkit.WaitFor(t, 30*time.Second, func() bool {
		var err error
		asked, err = s.Collaborations(ctx, alice.ID, grants.StatusPending)
		return err == nil && len(asked) == 1
	}, "the question never waited")
	waitForScans(t, pool, "collaborations_pkey", pk, "the waiting call's heartbeat")
	if _, err := s.Respond(ctx, alice, asked[0].ID, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An id that is not a uuid as PostgreSQL writes it names nothing: not found, or an
// empty list, never the database's invalid-uuid error (a 500).
func TestLookupsByMalformedID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	var id string
	if err := pool.QueryRow(ctx, `INSERT INTO collaborations (user_id, conversation_id, prompt) VALUES ($1, 'c', 'May I?')
		RETURNING id::text`, alice.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	g, err := s.Create(ctx, grants.Spec{ConversationID: "c", Operation: "shell", By: alice})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"nope", "", strings.ToUpper(id), "{" + id + "}", strings.ReplaceAll(id, "-", "")} {
		if _, err := s.GetCollaboration(ctx, bad); !fault.Is(err, fault.KindNotFound) {
			t.Errorf("GetCollaboration(%q): %v, want not found", bad, err)
		}
		if _, err := s.Respond(ctx, alice, bad, "yes"); !fault.Is(err, fault.KindNotFound) {
			t.Errorf("Respond(%q): %v, want not found", bad, err)
		}
		if _, err := s.Get(ctx, bad); !fault.Is(err, fault.KindNotFound) {
			t.Errorf("Get(%q): %v, want not found", bad, err)
		}
		if _, err := s.Revoke(ctx, alice, bad, false); !fault.Is(err, fault.KindNotFound) {
			t.Errorf("Revoke(%q): %v, want not found", bad, err)
		}
	}
	for _, bad := range []string{"nope", strings.ToUpper(alice.ID)} {
		if list, err := s.Collaborations(ctx, bad, ""); err != nil || len(list) != 0 {
			t.Errorf("Collaborations(%q): %v %+v, want none", bad, err, list)
		}
		if ended, err := s.CancelAsked(ctx, bad); err != nil || len(ended) != 0 {
			t.Errorf("CancelAsked(%q): %v %+v, want none", bad, err, ended)
		}
		for _, list := range []func(context.Context, grants.Filter) ([]grants.Grant, error){s.Active, s.Ended} {
			if got, err := list(ctx, grants.Filter{UserID: bad}); err != nil || len(got) != 0 {
				t.Errorf("grants of %q: %v %+v, want none", bad, err, got)
			}
		}
		// Revoking only one's own, as someone whose id is no uuid (nobody's), revokes nothing.
		if _, err := s.Revoke(ctx, audit.Actor{Kind: audit.ActorUser, ID: bad, Name: "x"}, g.ID, true); !fault.Is(err, fault.KindNotFound) {
			t.Errorf("Revoke of alice's grant as %q: %v, want not found", bad, err)
		}
	}
	// The well-formed ids still find what they name.
	if c, err := s.GetCollaboration(ctx, id); err != nil || c.UserID != alice.ID {
		t.Fatalf("GetCollaboration: %v %+v", err, c)
	}
	if list, err := s.Active(ctx, grants.Filter{UserID: alice.ID}); err != nil || len(list) != 1 {
		t.Fatalf("alice's grants: %v %+v", err, list)
	}
	if _, err := s.Revoke(ctx, alice, g.ID, true); err != nil {
		t.Fatal(err)
	}
	if list, err := s.Ended(ctx, grants.Filter{UserID: alice.ID}); err != nil || len(list) != 1 {
		t.Fatalf("alice's ended grants: %v %+v", err, list)
	}
}
