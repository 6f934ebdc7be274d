package audit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func appendN(t *testing.T, pool db.TxBeginner, n int) {
	t.Helper()
	for i := range n {
		err := appendOne(pool, audit.Entry{
			Actor:  audit.Actor{Kind: audit.ActorUser, ID: "00000000-0000-0000-0000-000000000001", Name: "alice", IP: "127.0.0.1"},
			Action: "test.action", TargetType: "thing", TargetID: fmt.Sprint(i),
			Payload: map[string]any{"i": i, "note": `quotes " and \ backslashes and ünïcode`},
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

func TestAppendAndVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	res, err := audit.Verify(ctx, pool)
	if err != nil || !res.OK() || res.Checked != 0 {
		t.Fatalf("empty chain: got %+v, %v; want OK with 0 checked", res, err)
	}
	appendN(t, pool, 25)
	res, err = audit.Verify(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Checked != 25 {
		t.Fatalf("got %+v, want OK with 25 checked", res)
	}
	recent, err := audit.Recent(ctx, pool, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 3 || recent[0].TargetID != "24" || recent[0].ActorName != "alice" {
		t.Fatalf("recent: got %+v, want newest first starting at target 24", recent)
	}
	if !strings.Contains(string(recent[0].Payload), `"i":24`) {
		t.Fatalf("payload: got %s", recent[0].Payload)
	}
}

func TestConcurrentAppendsKeepOneChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
					_, err := audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: "test.concurrent", TargetID: fmt.Sprintf("%d-%d", w, i)})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res, err := audit.Verify(ctx, pool)
	if err != nil || !res.OK() || res.Checked != 80 {
		t.Fatalf("got %+v, %v; want OK with 80 checked", res, err)
	}
}

func TestUpdateDeleteTruncateRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 3)
	for _, stmt := range []string{
		"UPDATE audit_log SET actor_name = 'mallory' WHERE id = (SELECT min(id) FROM audit_log)",
		"DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log)",
		"TRUNCATE audit_log",
	} {
		_, err := pool.Exec(ctx, stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: got %v, want an append-only error", stmt, err)
		}
	}
	if n, _ := audit.Count(ctx, pool); n != 3 {
		t.Fatalf("got %d rows, want 3 untouched", n)
	}
}

func TestVerifyFindsTampering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, tamper, reason string
		wantBad              int // index (1-based position) of the first bad entry
	}{
		{"altered field", "UPDATE audit_log SET actor_name = 'mallory' WHERE id = (SELECT id FROM audit_log ORDER BY id OFFSET 3 LIMIT 1)", "altered", 4},
		{"altered payload", `UPDATE audit_log SET payload = '{"i":99}' WHERE id = (SELECT id FROM audit_log ORDER BY id OFFSET 5 LIMIT 1)`, "altered", 6},
		{"deleted row", "DELETE FROM audit_log WHERE id = (SELECT id FROM audit_log ORDER BY id OFFSET 2 LIMIT 1)", "it was deleted", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.New(t)
			appendN(t, pool, 8)
			rows, _ := pool.Query(ctx, "SELECT id FROM audit_log ORDER BY id")
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatal(err)
			}
			// Only a superuser who disables the triggers can do this; verify must notice.
			if _, err := pool.Exec(ctx, "ALTER TABLE audit_log DISABLE TRIGGER USER"); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, tc.tamper); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, "ALTER TABLE audit_log ENABLE TRIGGER USER"); err != nil {
				t.Fatal(err)
			}
			res, err := audit.Verify(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			want := ids[tc.wantBad-1] // for the deleted row, its own id: ids are consecutive
			if res.OK() || res.BadID != want || !strings.Contains(res.Reason, tc.reason) {
				t.Fatalf("got %+v, want first bad entry %d (%s)", res, want, tc.reason)
			}
		})
	}
}

func TestFailedAuditAbortsTheAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE widgets (name text);
		CREATE FUNCTION fail_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
		CREATE TRIGGER fail_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION fail_audit();`); err != nil {
		t.Fatal(err)
	}
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO widgets VALUES ('w')"); err != nil {
			return err
		}
		_, err := audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: "widget.create"})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, want the audit failure", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM widgets").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the action happened without its audit entry: %d widgets, want 0", n)
	}
}

func TestAppendRequiresAction(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	if err := appendOne(pool, audit.Entry{}); err == nil {
		t.Fatal("got nil error for an entry without action")
	}
}

func appendOne(pool db.TxBeginner, e audit.Entry) error {
	return db.WithTx(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := audit.Append(context.Background(), tx, e)
		return err
	})
}

// A batch links into the chain like single appends do, before and after it, and a
// large batch announces only its last entry.
func TestAppendBatchChains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 3)
	var entries []audit.Entry
	for i := range 40 {
		entries = append(entries, audit.Entry{
			Actor:  audit.Actor{Kind: audit.ActorToken, ID: "00000000-0000-0000-0000-000000000002", Name: "bot"},
			Action: "tool.call", TargetType: "tool", TargetID: fmt.Sprint("b", i), Payload: map[string]any{"i": i}})
	}
	var rs []audit.Record
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		var err error
		rs, err = audit.AppendBatch(ctx, tx, entries)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].ID != rs[i-1].ID+1 {
			t.Fatalf("ids: got %d after %d, want consecutive", rs[i].ID, rs[i-1].ID)
		}
	}
	appendN(t, pool, 2)
	res, err := audit.Verify(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Checked != 45 {
		t.Fatalf("got %+v, want OK with 45 checked", res)
	}
	var announced int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE topic = 'audit' AND payload->>'action' = 'tool.call'`).Scan(&announced); err != nil {
		t.Fatal(err)
	}
	if announced != 1 {
		t.Fatalf("announced %d entries of a 40-entry batch, want 1", announced)
	}
}

// The router's one-round-trip append: a batch sealed after a remembered head goes in
// only while that head is still the chain's last entry.
func TestInsertAfterRememberedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 2)
	var head audit.Head
	insertAfter := func(h audit.Head, action string) (int64, audit.Head) {
		t.Helper()
		b, err := audit.NewBatch([]audit.Entry{{Actor: audit.System, Action: action}, {Actor: audit.System, Action: action}})
		if err != nil {
			t.Fatal(err)
		}
		b.Seal(h)
		var n int64
		err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if err := db.LockJournal(ctx, tx); err != nil {
				return err
			}
			sql, args := b.InsertAfterQuery(h)
			tag, err := tx.Exec(ctx, sql, args...)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, b.Last()
	}
	// The head as a reader sees it.
	b, _ := audit.NewBatch([]audit.Entry{{Actor: audit.System, Action: "probe"}})
	sql, args := b.HeadQuery()
	if err := pool.QueryRow(ctx, sql, args...).Scan(&head.ID, &head.Hash); err != nil || head.ID != 2 {
		t.Fatalf("head: got id %d (%v), want 2", head.ID, err)
	}
	n, next := insertAfter(head, "after.current")
	if n != 2 || next.ID != 4 {
		t.Fatalf("after the current head: got %d rows, last id %d; want 2 rows, last id 4", n, next.ID)
	}
	appendN(t, pool, 1) // someone else appends: id 5
	if n, _ := insertAfter(next, "after.stale"); n != 0 {
		t.Fatalf("after a stale head: got %d rows, want 0", n)
	}
	forged := audit.Head{ID: 5, Hash: next.Hash} // the right id with the wrong hash
	if n, _ := insertAfter(forged, "after.forged"); n != 0 {
		t.Fatalf("after a head with the wrong hash: got %d rows, want 0", n)
	}
	res, err := audit.Verify(ctx, pool)
	if err != nil || !res.OK() || res.Checked != 5 {
		t.Fatalf("verify: got %+v, %v; want OK with 5 checked", res, err)
	}
}
