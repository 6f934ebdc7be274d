package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A plan's steps pin their server's connection identity, a MAC under the primary key of
// the time, and its approval's hash holds it; `secrets rotate` seals the execution again
// but cannot pin its steps again. retire-key refuses the old key while an execution not
// yet final has a step pinned under it (without the key the step would be refused as
// changed settings and the plan cancelled), and that plan still runs; once it has run,
// the key is retired, and a plan made after the rotation, pinned under the new key,
// held nothing back and runs after the retirement.
func TestSecretsRetireWaitsForPinnedPlans(t *testing.T) {
	ctx := context.Background()
	dir := dbtest.TempDir(t)
	path := filepath.Join(dir, "secret.key")
	old := writeKeyFile(t, path)
	// The serving keyring follows the key file, as serve's does.
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) { c.Keys = keys }})
	a.LiveServer(t, "mt", true, "echo")
	a.SetRisk(t, "mt__echo", risk.Medium)
	u, err := a.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	boss := executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}, Role: auth.RoleAdmin}
	plan := func(msg string) string {
		t.Helper()
		ex, err := a.Executions.Create(ctx, boss, executions.Input{Plan: &executions.Request{
			Steps: []executions.RequestStep{{Tool: "mt__echo", Arguments: json.RawMessage(`{"message":"` + msg + `"}`)}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Status != executions.AwaitingApproval {
			t.Fatalf("plan %q: %s, want awaiting approval", msg, ex.Status)
		}
		return ex.ID
	}
	confirm := func(id string) {
		t.Helper()
		if _, err := a.Executions.Confirm(ctx, boss, id, "", ""); err != nil {
			t.Fatalf("confirm %s: %v", id, err)
		}
		waitStatus(t, a, id, executions.Success)
	}
	cli := cliOn(a.DBURL, dir)

	before := plan("before")
	if out, err := cli("secrets", "rotate"); err != nil || !strings.Contains(out, "sealed the approvals of 1 executions again") {
		t.Fatalf("rotate: %v %s", err, out)
	}
	if err := keys.Reload(); err != nil { // the serving process would within seconds
		t.Fatal(err)
	}
	after := plan("after")
	// status says what holds the old key back: no value, no seal, one pinned plan.
	out, err := cli("secrets", "status")
	if err != nil || !strings.Contains(out, old.ID+"\tdecrypts\t0 values\t0 executions sealed\t1 executions pinned\n") ||
		!strings.Contains(out, "\tprimary\t0 values\t2 executions sealed\t1 executions pinned\n") {
		t.Fatalf("status with a plan pinned under each key: %v\n%s", err, out)
	}
	settleKeyFile(t)
	out, err = cli("secrets", "retire-key", old.ID)
	if err == nil || !strings.Contains(err.Error(), "connection settings that 1 executions not yet final") {
		t.Fatalf("retire a key that pins an open plan's server: %v %s; want it refused", err, out)
	}
	if k, _ := secrets.LoadKeyring(path); len(k.IDs()) != 2 {
		t.Fatal("a refused retire changed the key file")
	}
	confirm(before)

	if out, err = cli("secrets", "retire-key", old.ID); err != nil {
		t.Fatalf("retire once the plan pinned under the key has run: %v %s", err, out)
	}
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if len(keys.IDs()) != 1 {
		t.Fatalf("the serving keyring after the retirement: %v", keys.IDs())
	}
	confirm(after)
}
