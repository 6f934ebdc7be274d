package main

import (
	"context"
	"strings"
	"testing"
)

// A table altered so that an entry cannot be read is tampering: audit verify exits 1
// (a NULL names its entry; an id of another type stops the check), never 3, which a
// script retries.
func TestAuditVerifyMalformedTableExit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	cli := func(args ...string) (string, string, error) {
		return runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
	}
	for _, name := range []string{"alice", "bob", "carol"} {
		if _, stderr, err := cli("user", "create", "--name", name, "--role", "auditor"); err != nil {
			t.Fatalf("user create: %v\n%s", err, stderr)
		}
	}
	tamper := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER USER; `+sql+`; ALTER TABLE audit_log ENABLE TRIGGER USER`); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(says string) {
		t.Helper()
		stdout, _, err := cli("audit", "verify", "--checkpoint", "none")
		out := stdout
		if err != nil {
			out += err.Error()
		}
		if code := exitCode(err); code != exitVerifyFailed || !strings.Contains(out, says) {
			t.Errorf("audit verify: %v (exit %d)\n%s; want exit %d saying %q", err, code, stdout, exitVerifyFailed, says)
		}
	}
	tamper(`ALTER TABLE audit_log ALTER COLUMN ip DROP NOT NULL; UPDATE audit_log SET ip = NULL WHERE id = 2`)
	verify("BROKEN at entry 2: its ip is NULL")
	tamper(`ALTER TABLE audit_log ALTER COLUMN id TYPE integer`)
	verify("not a bigint")
}
