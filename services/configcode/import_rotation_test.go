package configcode_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// rotationApp is an App whose keyring is read from a key file, as serve's is, with
// ev__weather's api_key stored encrypted and a disabled server h1 with a secret header;
// rotate runs `secrets rotate` on that file, and the App takes the new key up.
func rotationApp(t *testing.T) (a *apptest.App, keys *secrets.Keyring, rotate func() string) {
	t.Helper()
	ctx := context.Background()
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(k.ID+":"+base64.StdEncoding.EncodeToString(k.Bytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err = secrets.LoadKeyring(path); err != nil {
		t.Fatal(err)
	}
	hs := liveServer(t)
	a = apptest.Start(t, &apptest.Options{Key: &k, Config: func(c *app.Config) { c.Keys = keys }})
	a.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.RegisterServer(t, registry.Spec{Name: "h1", Type: registry.TypeStreamableHTTP, URL: "https://example.com/mcp",
		Description: "one", Headers: map[string]string{"X-Api-Key": "header-secret"}})
	weather := a.Settled(t, "ev__weather")
	must[tools.Item](t)(a.Tools.Update(ctx, admin, weather.ID, tools.Patch{Params: map[string]tools.ParamInput{
		"api_key": {Mode: tools.ModeFixed, Value: json.RawMessage(`"` + secretValue + `"`)}}}))
	return a, keys, func() string {
		t.Helper()
		r, err := secretkeys.Rotate(ctx, a.Pool, path, false, nil, audit.Actor{Kind: audit.ActorSystem, Name: "rotate"}, io.Discard)
		if err != nil || r.Servers != 1 || r.Tools < 1 {
			t.Fatalf("rotate: %+v, %v", r, err)
		}
		// As serve takes up a changed key file (secrets.ReloadEvery).
		if err := keys.Reload(); err != nil {
			t.Fatal(err)
		}
		return r.Key
	}
}

// The file lists ev__weather with its secret (the same value) and h1 with its header
// kept, and changes something else of each.
const rotationFile = `version: 1
servers:
  - name: h1
    type: streamable_http
    url: https://example.com/mcp
    description: two
    headers:
      X-Api-Key: null
    enabled: false
tools:
  - tool: ev__weather
    timeout_ms: 9000
    config:
      api_key: {mode: fixed, secret: "${env:` + secretEnv + `}"}
`

// An import planned before `secrets rotate` and applied after it: the rotation's new
// ciphertexts are no change of a listed tool's secret (the import was refused as
// changed since its plan), and the server secret the import keeps stays under the new
// key (the import wrote back the ciphertext its plan read, under the retired key).
func TestImportAppliesAfterRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, keys, rotate := rotationApp(t)
	old := keys.PrimaryID()
	p := plan(t, a, "config.yaml", rotationFile)
	if p.HasErrors() || len(p.Unapplied) > 0 || !strings.Contains(p.String(), "timeout_ms") || strings.Contains(p.String(), "api_key") {
		t.Fatalf("plan: want h1's description and ev__weather's timeout changed, its secret not:\n%s", p)
	}
	fresh := rotate()

	if _, err := a.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatalf("apply after the rotation: %v", err)
	}
	usage, err := secretkeys.Usage(ctx, a.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if usage[old] != 0 {
		t.Fatalf("values by key after the import: %v; want none under %s, which the rotation replaced by %s", usage, old, fresh)
	}
	sv, err := a.Registry.GetServerByName(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Registry.Connection(ctx, sv.ID)
	if err != nil || c.Headers["X-Api-Key"] != "header-secret" || sv.Description != "two" {
		t.Fatalf("h1 after the import: %q, header %q, %v", sv.Description, c.Headers["X-Api-Key"], err)
	}
	weather := a.Settled(t, "ev__weather")
	cfg, err := a.Tools.Configuration(ctx, weather.ID)
	if err != nil {
		t.Fatal(err)
	}
	if weather.Timeout() != 9000 || !a.Tools.SameSecret(weather.ID, "api_key", cfg.Params["api_key"].Secret, json.RawMessage(`"`+secretValue+`"`)) ||
		secrets.KeyOf(cfg.Params["api_key"].Secret) != fresh {
		t.Fatalf("ev__weather after the import: timeout %d, api_key %+v", weather.Timeout(), cfg.Params["api_key"])
	}
}

// A secret a person changed between the plan and its apply still refuses the import,
// though a rotation re-encrypted every value meanwhile as well.
func TestImportRefusedBySecretChangedBeforeRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _, rotate := rotationApp(t)
	p := plan(t, a, "config.yaml", rotationFile)
	if p.HasErrors() || len(p.Unapplied) > 0 {
		t.Fatalf("plan:\n%s", p)
	}
	weather := a.ToolID(t, "ev__weather")
	must[tools.Item](t)(a.Tools.Update(ctx, admin, weather, tools.Patch{Params: map[string]tools.ParamInput{
		"api_key": {Mode: tools.ModeFixed, Value: json.RawMessage(`"sk-live-another-value-0123456789"`)}}}))
	rotate()
	if _, err := a.ConfigCode.Apply(ctx, admin, p); !errors.Is(err, configcode.ErrChangedSincePlan) {
		t.Fatalf("apply after the secret changed: %v, want ErrChangedSincePlan", err)
	}
	cfg, err := a.Tools.Configuration(ctx, weather)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Tools.SameSecret(weather, "api_key", cfg.Params["api_key"].Secret, json.RawMessage(`"sk-live-another-value-0123456789"`)) {
		t.Fatal("the person's new secret was not kept")
	}
}
