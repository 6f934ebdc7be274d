package main

import (
	"context"
	"strings"
	"testing"
)

// A negative --expires-in-days is refused and makes no token: it took the default
// lifetime (90 days) without a word. Left out, the flag still takes the default.
func TestTokenCreateNegativeDays(t *testing.T) {
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	cli := func(args ...string) (string, string, error) {
		return runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
	}
	if _, stderr, err := cli("user", "create", "--name", "robot", "--role", "tool_user"); err != nil {
		t.Fatalf("user create: %v\n%s", err, stderr)
	}
	stdout, stderr, err := cli("token", "create", "--user", "robot", "--name", "neg", "--expires-in-days", "-7")
	if err == nil || !strings.Contains(err.Error()+stderr, "expires") {
		t.Fatalf("token create --expires-in-days -7: %v\n%s%s", err, stdout, stderr)
	}
	if _, stderr, err := cli("token", "create", "--user", "robot", "--name", "default"); err != nil {
		t.Fatalf("token create without --expires-in-days: %v\n%s", err, stderr)
	}
	var names string
	if err := pool.QueryRow(ctx, `SELECT string_agg(name, ',' ORDER BY name) FROM api_tokens`).Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names != "default" {
		t.Fatalf("tokens made: %q, want only \"default\"", names)
	}
}
