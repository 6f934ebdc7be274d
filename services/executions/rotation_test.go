package executions_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A plan made before a key rotation is approved and runs after it: its server's
// connection identity (a MAC under the primary key) changed with the key, not with the
// server's settings.
func TestPlanApprovedAcrossKeyRotation(t *testing.T) {
	t.Parallel()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(key.ID+":"+base64.StdEncoding.EncodeToString(key.Bytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	url := dbtest.NewURL(t)
	a := apptest.Start(t, &apptest.Options{URL: url, Key: &key, Config: func(c *app.Config) {
		c.Keys = keys
		c.MCP = mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
			Debounce: 50 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second}
		c.Skip = []string{"executions", "jobs"}
	}})
	e := &env{t: t, app: a, ctx: context.Background(), url: url, key: key, pool: a.Pool, reg: a.Registry, mgr: a.MCP,
		tools: a.Tools, r: a.Router, clock: &clock{}}
	e.svc = e.service()
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	e.run(nil)
	ex := e.create(e.admin, step("mt__add", `{"a":1,"b":2}`))
	if ex.Status != executions.AwaitingApproval {
		t.Fatalf("the plan: %s, want awaiting approval", ex.Status)
	}

	if _, err := secrets.AddKeyToFile(path); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
		t.Fatalf("confirm after the rotation: %v", err)
	}
	if got := e.waitStatus(ex.ID, executions.Success, 20*time.Second); got.Status != executions.Success {
		t.Fatalf("after the rotation: %s (%s), want success", got.Status, got.Reason)
	}
}
