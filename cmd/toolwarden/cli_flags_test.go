package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
)

// `audit checkpoint --out F` refuses an existing F (an older checkpoint kept as
// evidence: it was truncated and rewritten) and writes a new one whole, readable as the
// ones in <data-dir>/checkpoints are.
func TestAuditCheckpointOutKeepsExisting(t *testing.T) {
	t.Parallel()
	dir, url, _ := cliDatabase(t)
	cli := func(args ...string) (string, string, error) {
		return runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
	}
	if _, stderr, err := cli("user", "create", "--name", "alice", "--role", "auditor"); err != nil {
		t.Fatalf("user create: %v\n%s", err, stderr)
	}
	kept := filepath.Join(t.TempDir(), "evidence.json")
	if err := os.WriteFile(kept, []byte("an older checkpoint\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli("audit", "checkpoint", "--out", kept); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("audit checkpoint --out over a file: %v, want a refusal saying it exists", err)
	}
	if b, _ := os.ReadFile(kept); string(b) != "an older checkpoint\n" {
		t.Fatalf("the existing file now holds %q", b)
	}
	fresh := filepath.Join(t.TempDir(), "new.json")
	if stdout, stderr, err := cli("audit", "checkpoint", "--out", fresh); err != nil || !strings.Contains(stdout, "written to "+fresh) {
		t.Fatalf("audit checkpoint --out new: %v\n%s%s", err, stdout, stderr)
	}
	cp, err := audit.ReadCheckpoint(fresh)
	if err != nil || cp.ID == 0 {
		t.Fatalf("the new checkpoint: %+v, %v", cp, err)
	}
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("the new checkpoint's mode: %v, %v; want 0644", st, err)
	}
	if names, _ := filepath.Glob(filepath.Join(filepath.Dir(fresh), ".*")); len(names) > 0 {
		t.Fatalf("left beside it: %v", names)
	}
}

// --expires-in-days is decimal: 030 is 30 days (it was octal, 24), 090 is 90 (a bare
// parse error), 0x10 is refused (it was 16).
func TestTokenCreateDaysDecimal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	cli := func(args ...string) (string, string, error) {
		return runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
	}
	if _, stderr, err := cli("user", "create", "--name", "robot", "--role", "tool_user"); err != nil {
		t.Fatalf("user create: %v\n%s", err, stderr)
	}
	for value, days := range map[string]int{"030": 30, "090": 90, "7": 7} {
		if _, stderr, err := cli("token", "create", "--user", "robot", "--name", "t"+value, "--expires-in-days", value); err != nil {
			t.Fatalf("--expires-in-days %s: %v\n%s", value, err, stderr)
		}
		var secs float64
		if err := pool.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - now())::float8 FROM api_tokens WHERE name = $1`, "t"+value).Scan(&secs); err != nil {
			t.Fatal(err)
		}
		left := time.Duration(secs * float64(time.Second))
		if want := time.Duration(days) * 24 * time.Hour; left > want || left < want-time.Hour {
			t.Errorf("--expires-in-days %s: expires in %s, want %d days", value, left, days)
		}
	}
	for _, value := range []string{"0x10", "1e3", "-7"} {
		if _, stderr, err := cli("token", "create", "--user", "robot", "--name", "bad"+value, "--expires-in-days", value); !errors.Is(err, errUsage) ||
			!strings.Contains(stderr, "expires-in-days") {
			t.Errorf("--expires-in-days %s: %v\n%s; want a usage error naming the flag", value, err, stderr)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM api_tokens WHERE name LIKE 'bad%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tokens made from refused values: %d, %v", n, err)
	}
}

// `audit verify --workers` is decimal and never negative (-5 was taken for one per CPU
// without a word); the refusal comes before anything opens.
func TestAuditVerifyWorkersFlag(t *testing.T) {
	t.Parallel()
	for _, value := range []string{"-5", "0x10", "010x"} {
		typo := filepath.Join(t.TempDir(), "typo")
		_, stderr, err := runCmd(t, "", "audit", "verify", "--workers", value, "--data-dir", typo)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, `invalid value "`+value+`" for flag -workers`) || !strings.Contains(stderr, "0 for one per CPU") {
			t.Errorf("--workers %s: %v\n%s; want a usage error naming the flag and what it takes", value, err, stderr)
		}
	}
	var n int
	fs := newFlagSet("audit verify", io.Discard)
	decimalVar(fs, &n, "workers", 0, 0, "a whole number", "")
	if err := fs.Parse([]string{"--workers", "010"}); err != nil || n != 10 {
		t.Fatalf("--workers 010: %d, %v; want 10", n, err)
	}
}

// token create reads TOOLWARDEN_TOKEN_DEFAULT_TTL before it opens (and would migrate)
// anything, and its help names the variable, not serve's flag.
func TestTokenCreateTTLEnvFirst(t *testing.T) {
	t.Setenv("TOOLWARDEN_TOKEN_DEFAULT_TTL", "forever")
	typo := filepath.Join(t.TempDir(), "typo")
	_, stderr, err := runCmd(t, "", "token", "create", "--user", "robot", "--name", "x", "--data-dir", typo)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, `TOOLWARDEN_TOKEN_DEFAULT_TTL: "forever" is not`) {
		t.Errorf("TOOLWARDEN_TOKEN_DEFAULT_TTL=forever: %v\n%s; want a usage error naming the variable", err, stderr)
	}
	if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data dir was created (a cluster started) before the variable was read: %v", err)
	}
	_, stderr, _ = runCmd(t, "", "token", "create", "--help")
	if !strings.Contains(stderr, "TOOLWARDEN_TOKEN_DEFAULT_TTL") || strings.Contains(stderr, "token-default-ttl") {
		t.Errorf("token create --help: want TOOLWARDEN_TOKEN_DEFAULT_TTL named, and no --token-default-ttl:\n%s", stderr)
	}
}

// An empty TOOLWARDEN_MAX_MESSAGE_SIZE= or TOOLWARDEN_SNAPSHOT_BUDGET= is unset, as
// envFlags and the docs have an empty variable: serve stopped on it as a bad size.
func TestEnvSizeEmptyIsUnset(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	msg := maxMessageFlag(fs)
	budget := snapshotBudgetFlag(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	empty := func(string) (string, bool) { return "", true }
	wantMsg, wantBudget := *msg, *budget
	if err := envSize(fs, "max-message-size", "TOOLWARDEN_MAX_MESSAGE_SIZE", empty, msg); err != nil || *msg != wantMsg {
		t.Errorf("TOOLWARDEN_MAX_MESSAGE_SIZE=: %s, %v; want the default %s", msg, err, &wantMsg)
	}
	if err := envSize(fs, "snapshot-budget", "TOOLWARDEN_SNAPSHOT_BUDGET", empty, budget); err != nil || *budget != wantBudget {
		t.Errorf("TOOLWARDEN_SNAPSHOT_BUDGET=: %s, %v; want the default %s", budget, err, &wantBudget)
	}
}
