package registry_test

import (
	"context"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// An import planned before `secrets rotate` and applied after it keeps each secret it
// keeps (a null in the file, a value equal to the stored one, an auth block without its
// token) as the rotation left it: under the new key, decrypting to the same value, also
// once the old key is retired. It wrote back the ciphertexts its plan had read, under
// the key the rotation replaced.
func TestImportAfterRotationKeepsRotatedSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	old := newKey(t)
	f := &fixture{t: t, ctx: ctx, pool: pool, keys: newKeyring(t, old)}
	f.reg = registry.New(pool, f.keys, nil)
	web := f.create(registry.Spec{Name: "web", Type: registry.TypeStreamableHTTP, URL: "https://mcp.example.com/mcp",
		Headers: map[string]string{"X-Api-Key": "header-secret", "X-Same": "same-value"}, AuthType: registry.AuthBearer,
		AuthToken: "token-secret"})
	local := f.create(registry.Spec{Name: "local", Type: registry.TypeStdio, Command: "npx", Args: []string{"-y", "@example/server"},
		Env: map[string]string{"API_KEY": "env-secret"}})

	plan := f.plan("servers.yaml", `version: 1
servers:
  - name: web
    type: streamable_http
    url: https://mcp.example.com/mcp
    description: renamed
    headers:
      X-Api-Key: null
      X-Same: same-value
    auth:
      type: bearer
    enabled: false
  - name: local
    type: stdio
    description: renamed too
    command: npx
    args: [-y, '@example/server']
    env:
      API_KEY: null
    enabled: false
`, false)
	if plan.Count(registry.PlanUpdate) != 2 {
		t.Fatalf("plan: want both servers updated:\n%s", plan)
	}

	// `secrets rotate` runs between the plan and its apply, with the key file's new key.
	fresh := newKey(t)
	n, err := registry.New(pool, newKeyring(t, fresh, old), nil).RotateSecrets(ctx)
	if err != nil || n != 4 {
		t.Fatalf("rotate: %d values, %v; want 4", n, err)
	}

	res, err := f.reg.ApplyImport(ctx, audit.System, plan)
	if err != nil || len(res.Updated) != 2 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	usage, err := f.reg.KeyUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if usage[old.ID] != 0 || usage[fresh.ID] != 4 {
		t.Fatalf("values by key after the import: %v; want all 4 under the new key %s, none under the old %s", usage, fresh.ID, old.ID)
	}
	// The old key retired: every value still opens.
	retired := registry.New(pool, newKeyring(t, fresh), nil)
	for id, want := range map[string]map[string]string{
		web.ID:   {"X-Api-Key": "header-secret", "X-Same": "same-value", "token": "token-secret", "description": "renamed"},
		local.ID: {"API_KEY": "env-secret", "description": "renamed too"},
	} {
		c, err := retired.Connection(ctx, id)
		if err != nil {
			t.Fatalf("connection of %s with the old key retired: %v", id, err)
		}
		sv, err := retired.GetServer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{"description": sv.Description}
		for k := range want {
			if v, ok := c.Headers[k]; ok {
				got[k] = v
			}
			if v, ok := c.Env[k]; ok {
				got[k] = v
			}
		}
		if _, ok := want["token"]; ok {
			got["token"] = c.AuthToken
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("server %s: %s is %q, want %q", id, k, got[k], v)
			}
		}
	}
}
