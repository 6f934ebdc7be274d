package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
)

// exitCode is the status main exits with for a command's error.
func exitCode(err error) int {
	var ce codedError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// A checkpoint that is itself altered fails audit verify with exit 1, as a signature
// that does not hold does: the newest in the directory renamed (which LoadCheckpoint
// calls a sign of tampering), its JSON corrupted, a --checkpoint file or standard input
// that holds no checkpoint. Exit 3 stays for a check that could not run: a checkpoint
// file missing, no file at all, a public key file missing. A monitor that alerts on 1
// and retries on 3 must not retry on tampering.
func TestAuditVerifyAlteredCheckpointExit(t *testing.T) {
	t.Parallel()
	dir, url, _ := cliDatabase(t)
	cli := func(stdin string, args ...string) (string, string, error) {
		return runCmd(t, stdin, append(args, "--database-url", url, "--data-dir", dir)...)
	}
	if _, stderr, err := cli("", "user", "create", "--name", "alice", "--role", "auditor"); err != nil {
		t.Fatalf("user create: %v\n%s", err, stderr)
	}
	if _, stderr, err := cli("", "audit", "checkpoint"); err != nil {
		t.Fatalf("audit checkpoint: %v\n%s", err, stderr)
	}
	cpDir := filepath.Join(dir, "checkpoints")
	newest, err := audit.LatestCheckpoint(cpDir)
	if err != nil || newest == "" {
		t.Fatalf("the checkpoint written: %q, %v", newest, err)
	}
	good, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(stdin string, want int, says string, args ...string) {
		t.Helper()
		stdout, _, err := cli(stdin, append([]string{"audit", "verify"}, args...)...)
		if code := exitCode(err); code != want || err != nil && !strings.Contains(err.Error(), says) {
			t.Errorf("audit verify %v: %v (exit %d)\n%s; want exit %d saying %q", args, err, code, stdout, want, says)
		}
	}
	verify("", 0, "")

	// The newest renamed: an older checkpoint copied under a newer name looks so.
	cp, err := audit.ParseCheckpoint(good)
	if err != nil {
		t.Fatal(err)
	}
	later := cp
	later.At = cp.At.Add(time.Hour)
	renamed := filepath.Join(cpDir, later.FileName())
	if err := os.Rename(newest, renamed); err != nil {
		t.Fatal(err)
	}
	verify("", exitVerifyFailed, "its name does not match its content")
	if err := os.Rename(renamed, newest); err != nil {
		t.Fatal(err)
	}

	// Its JSON corrupted, in the directory and given as --checkpoint.
	corrupt := good[:len(good)/2]
	if err := os.WriteFile(newest, corrupt, 0o644); err != nil {
		t.Fatal(err)
	}
	verify("", exitVerifyFailed, "audit: checkpoint")
	if err := os.WriteFile(newest, good, 0o644); err != nil {
		t.Fatal(err)
	}
	verify("", 0, "")
	given := filepath.Join(t.TempDir(), "cp.json")
	if err := os.WriteFile(given, append([]byte("{\"planted\": 1,"), good[1:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	verify("", exitVerifyFailed, "unknown field", "--checkpoint", given)
	verify("not a checkpoint", exitVerifyFailed, "(standard input)", "--checkpoint", "-")
	// A version below any this Toolwarden wrote is no newer format: altered.
	v0 := cp
	v0.Version = 0
	verify(string(v0.Marshal()), exitVerifyFailed, "checkpoint version 0", "--checkpoint", "-")

	// Could not check: no such file, a folder given as the file, a public key missing.
	verify("", exitCouldNotVerify, "nonexistent.json", "--checkpoint", filepath.Join(dir, "nonexistent.json"))
	verify("", exitCouldNotVerify, "not a regular file", "--checkpoint", t.TempDir())
	verify("", exitCouldNotVerify, "missing.pub", "--public-key", filepath.Join(dir, "missing.pub"))
	verify("", 0, "")
}
