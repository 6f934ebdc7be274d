package builtin_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// The records of a replica's terminals are put right from what the replica holds
// (Reconcile, which its sweep runs): a command that ended after another replica had
// taken this one for stopped (its record ended as replica_stopped, so the end itself
// changed nothing) is recorded ended with its exit code; a running one taken for
// stopped is reopened; a terminal whose record was never written (the database away as
// it started) gets one. A closed terminal's record is not brought back.
func TestTerminalRecordsReconciled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// A never joins: to B, A is a replica not seen for DeadAfter.
	storeA := builtin.NewTerminalStore(pool, replicas.New(pool, replicas.Options{Name: "a"}))
	storeB := builtin.NewTerminalStore(pool, replicas.New(pool, replicas.Options{Name: "b"}))
	exited := make(chan string, 8)
	root := t.TempDir()
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: root, Env: []string{"HOME=" + t.TempDir()}, Store: storeA,
		OnChange: func(term *builtin.Terminal, c builtin.TerminalChange) {
			if c == builtin.TerminalExited {
				exited <- term.ID
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	dir := filepath.Join(root, "conv")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	who := builtin.TerminalCaller{UserID: "u1", UserName: "carol"}
	late, err := ts.Start(who, "conv", dir, "while [ ! -e go ]; do sleep 0.05; done; exit 3", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	pty, _, err := ts.OpenPTY(who, "conv", dir)
	if err != nil {
		t.Fatal(err)
	}
	unrecorded, err := ts.Start(who, "conv", dir, "sleep 600", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM terminals WHERE id = $1`, unrecorded.ID); err != nil {
		t.Fatal(err)
	}
	// B takes A for stopped; then A's command ends.
	if ended, err := storeB.EndOrphaned(ctx, replicas.DefaultDeadAfter); err != nil || len(ended) != 2 {
		t.Fatalf("B ended %v (%v), want A's two recorded terminals", ended, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-exited:
		if id != late.ID {
			t.Fatalf("%s ended, want %s", id, late.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command never ended")
	}
	if rec, err := storeA.Get(ctx, late.ID); err != nil || rec.EndedReason != "replica_stopped" {
		t.Fatalf("before reconciling, the ended command's record: %+v (%v); want it still taken for ended with its replica", rec, err)
	}

	held := ts.List()
	changed, err := storeA.Reconcile(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 3 {
		t.Errorf("reconcile changed %d records, want 3: %+v", len(changed), changed)
	}
	rec, err := storeA.Get(ctx, late.ID)
	if err != nil || !rec.Ended() || rec.EndedReason != "exited" || rec.ExitCode == nil || *rec.ExitCode != 3 {
		t.Fatalf("the ended command's record: %+v (%v); want ended, exited, exit code 3", rec, err)
	}
	for _, term := range []*builtin.Terminal{pty, unrecorded} {
		if rec, err := storeA.Get(ctx, term.ID); err != nil || rec.Ended() || !rec.Local || rec.ConversationID != "conv" || rec.OwnerName != "carol" {
			t.Fatalf("the record of %s, which runs: %+v (%v)", term.ID, rec, err)
		}
	}
	// Records that say what their terminals are are not written again, not even locked
	// (a sweep runs every heartbeat): their xmax stays.
	xmax := func() string {
		t.Helper()
		var x string
		if err := pool.QueryRow(ctx, `SELECT string_agg(xmax::text, ',' ORDER BY id) FROM terminals WHERE replica_id = (SELECT replica_id FROM terminals WHERE id = $1)`,
			late.ID).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := xmax()
	if again, err := storeA.Reconcile(ctx, held); err != nil || len(again) != 0 {
		t.Fatalf("a second reconcile changed %+v (%v), want nothing", again, err)
	}
	if after := xmax(); after != before {
		t.Errorf("a second reconcile locked or wrote records that needed nothing: xmax %s, then %s", before, after)
	}

	// Closed after held was taken: not listed again, whether its record was there (the
	// PTY) or not (written by the reconcile, then marked gone again).
	if _, err := pool.Exec(ctx, `DELETE FROM terminals WHERE id = $1`, unrecorded.ID); err != nil {
		t.Fatal(err)
	}
	pty.Close()
	unrecorded.Close()
	if _, err := storeA.Reconcile(ctx, held); err != nil {
		t.Fatal(err)
	}
	var listed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM terminals WHERE id IN ($1, $2) AND gone_at IS NULL`, pty.ID, unrecorded.ID).Scan(&listed); err != nil || listed != 0 {
		t.Fatalf("%d closed terminals listed again after a reconcile (%v)", listed, err)
	}
}
