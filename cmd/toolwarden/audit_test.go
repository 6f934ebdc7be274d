package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// `audit checkpoint` signs the head with a key it keeps in the data dir; `audit verify`
// checks the chain reaches the newest checkpoint (or the one given), so deleting the
// newest entries or emptying the table fails it, naming the first missing entry.
func TestAuditCheckpointCommands(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	ctx := context.Background()
	c, err := db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	must := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := runCmd(t, "", append(args, "--data-dir", dataDir)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, stdout, stderr)
		}
		return stdout
	}
	must("migrate", "up")
	must("user", "create", "--name", "alice", "--role", "auditor")
	must("user", "create", "--name", "bob", "--role", "tool_user")

	out := must("audit", "checkpoint")
	if !strings.Contains(out, "checkpoint of entry 2 ") {
		t.Fatalf("audit checkpoint: got %q, want a checkpoint of entry 2", out)
	}
	if st, err := os.Stat(filepath.Join(dataDir, "checkpoint.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("checkpoint.key: %v %v, want created 0600", st, err)
	}
	pub, err := audit.ReadPublicKey(filepath.Join(dataDir, "checkpoint.pub"))
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "head.json")
	must("audit", "checkpoint", "--out", saved)
	cp, err := audit.ReadCheckpoint(saved)
	if err != nil || cp.Verify(pub) != nil || cp.ID != 2 {
		t.Fatalf("--out: got %+v, %v; want a checkpoint of entry 2 signed by checkpoint.pub", cp, err)
	}
	if out := must("audit", "verify"); !strings.Contains(out, "audit chain OK: 2 entries") || !strings.Contains(out, "reaches the checkpoint") {
		t.Fatalf("audit verify: got %q, want OK, reaching the checkpoint", out)
	}

	owner, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	tamper := func(sql string) {
		t.Helper()
		if _, err := owner.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER USER; `+sql+`; ALTER TABLE audit_log ENABLE TRIGGER USER`); err != nil {
			t.Fatal(err)
		}
	}
	broken := func(want string, args ...string) {
		t.Helper()
		stdout, _, err := runCmd(t, "", append(append([]string{"audit", "verify"}, args...), "--data-dir", dataDir)...)
		var ee exitError
		if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(stdout, want) {
			t.Fatalf("audit verify %v: got %v %q, want exit 1 and %q", args, err, stdout, want)
		}
	}
	var h2 []byte
	if err := owner.QueryRow(ctx, `SELECT hash FROM audit_log WHERE id = 2`).Scan(&h2); err != nil {
		t.Fatal(err)
	}
	// appendAfter writes an entry that links to entry 2 as id, as a superuser who knows
	// the hash function would.
	appendAfter := func(id int64) {
		t.Helper()
		b, err := audit.NewBatch([]audit.Entry{{Actor: audit.System, Action: "forged.entry"}})
		if err != nil {
			t.Fatal(err)
		}
		b.Seal(audit.Head{ID: id - 1, Hash: h2})
		sql, args := b.InsertQuery()
		if _, err := owner.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Entries deleted from the middle, the chain after them recomputed to link across
	// the hole: the missing ids break it, with a checkpoint or without, and no checkpoint
	// is signed over them.
	appendAfter(5)
	broken("BROKEN at entry 3: entries 3 to 4 are missing", "--checkpoint", "none")
	broken("missing ids (2; ids are consecutive, so each was deleted): 3-4")
	if _, _, err := runCmd(t, "", "audit", "checkpoint", "--data-dir", dataDir); err == nil || !strings.Contains(err.Error(), "entry 3: entries 3 to 4 are missing") {
		t.Fatalf("audit checkpoint over missing ids: got %v, want a refusal naming them", err)
	}
	// A rewrite after the newest checkpoint's entry: the older checkpoint in the
	// directory that still matches says how far the chain verifies.
	tamper(`DELETE FROM audit_log WHERE id > 2`)
	must("user", "create", "--name", "carl", "--role", "tool_user")
	if out := must("audit", "checkpoint"); !strings.Contains(out, "checkpoint of entry 3 ") {
		t.Fatalf("audit checkpoint: got %q, want a checkpoint of entry 3", out)
	}
	tamper(`DELETE FROM audit_log WHERE id = 3`)
	appendAfter(3)
	broken("BROKEN at entry 3: its hash differs from the one the checkpoint of")
	broken("rewritten somewhere in entries 3 to 3 (the checkpoint of")
	broken("the chain verifies from the start through entry 2;")
	// Back to entries 1 and 2, with their checkpoint the newest again.
	tamper(`DELETE FROM audit_log WHERE id > 2`)
	newest, err := audit.LatestCheckpoint(filepath.Join(dataDir, "checkpoints"))
	if err != nil || !strings.HasSuffix(newest, "-3.json") {
		t.Fatalf("newest checkpoint: %q %v, want the one of entry 3", newest, err)
	}
	if err := os.Remove(newest); err != nil {
		t.Fatal(err)
	}
	must("audit", "verify")

	tamper(`DELETE FROM audit_log WHERE id = 2`)
	broken("BROKEN at entry 2: entries 2 to 2 are missing")
	broken("the end of the log was deleted", "--checkpoint", saved)
	if out := must("audit", "verify", "--checkpoint", "none"); !strings.Contains(out, "audit chain OK: 1 entries") {
		t.Fatalf("verify --checkpoint none: got %q, want OK with 1 entry (the chain alone cannot tell)", out)
	}
	// A new checkpoint of the cut chain is refused: it would become the newest, and
	// verify would then find nothing missing.
	if _, _, err := runCmd(t, "", "audit", "checkpoint", "--data-dir", dataDir); err == nil || !strings.Contains(err.Error(), "no longer reaches the last checkpoint") {
		t.Fatalf("audit checkpoint after a cut: got %v, want a refusal", err)
	}
	broken("BROKEN at entry 2: entries 2 to 2 are missing")
	tamper(`TRUNCATE audit_log`)
	broken("BROKEN at entry 1: the log is empty, but the checkpoint")

	// A checkpoint by another key than the trusted one is refused.
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := audit.OpenSigner(other); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, "", "audit", "verify", "--data-dir", dataDir, "--checkpoint", saved, "--public-key", audit.PublicKeyPath(other))
	if err == nil || !strings.Contains(err.Error(), "not by the trusted key") {
		t.Fatalf("verify with another public key: got %v, want a refusal naming the trusted key", err)
	}
}

// --checkpoint-every takes 0 or a duration of at least a second, and names what it cannot use.
func TestCheckpointEveryFlag(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"-5s", "10ms"} {
		_, stderr, err := runCmd(t, "", "serve", "--checkpoint-every", v, "--data-dir", t.TempDir())
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--checkpoint-every:") {
			t.Errorf("%s: got %v\n%s\nwant a usage error naming --checkpoint-every", v, err, stderr)
		}
	}
}
