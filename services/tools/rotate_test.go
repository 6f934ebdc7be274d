package tools_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// RotateSecrets re-encrypts a tool's secret parameters, current and past versions,
// under the new primary key; the values stay; a ciphertext copied to another tool does
// not decrypt there.
func TestRotateToolSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	oldKey, _ := secrets.GenerateKey()
	var err error
	if f.keys, err = secrets.NewKeyring(oldKey); err != nil {
		t.Fatal(err)
	}
	f.svc = tools.New(f.pool, f.keys, &tools.Options{Logger: slog.New(slog.DiscardHandler)})
	id := configTool(f, "validated")
	other := configTool(f, "validated")
	f.update(id, tools.Patch{Reason: "v1", Params: map[string]tools.ParamInput{"path": text("/a"), "api_key": text("sk-live-Rot8Key1")}})
	f.update(id, tools.Patch{Reason: "v2", Params: map[string]tools.ParamInput{"path": text("/a"), "api_key": text("sk-live-Rot8Key2")}})
	oldID := f.keys.PrimaryID()
	usage, err := f.svc.KeyUsage(f.ctx)
	if err != nil || usage[oldID] < 3 { // the current configuration and both versions
		t.Fatalf("usage before: %v %v", usage, err)
	}
	newKey, _ := secrets.GenerateKey()
	both, err := secrets.NewKeyring(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	versions := func() string {
		t.Helper()
		// What each version holds but its secrets' ciphertexts.
		return strings.Join(testkit.Strings(t, f.pool, `SELECT (configuration - 'params')::text || ' ' || (
			SELECT string_agg(k || '=' || (v - 'secret')::text, ',' ORDER BY k) FROM jsonb_each(configuration->'params') AS p(k, v))
			FROM tool_configurations WHERE tool_id = $1 ORDER BY id`, id), "\n")
	}
	before := versions()
	rot := tools.New(f.pool, both, &tools.Options{Logger: slog.New(slog.DiscardHandler)})
	n, err := rot.RotateSecrets(f.ctx)
	if err != nil || n < 3 {
		t.Fatalf("RotateSecrets: %d %v", n, err)
	}
	if after := versions(); after != before || !strings.Contains(before, `"timeout_ms"`) {
		t.Errorf("the versions after rotation:\n%s\nbefore:\n%s", after, before)
	}
	usage, _ = rot.KeyUsage(f.ctx)
	if usage[oldID] != 0 || usage[newKey.ID] < 3 {
		t.Fatalf("usage after: %v", usage)
	}
	if n, _ := rot.RotateSecrets(f.ctx); n != 0 {
		t.Errorf("a second rotation re-encrypted %d values, want 0", n)
	}
	newOnly, _ := secrets.NewKeyring(newKey)
	svc := tools.New(f.pool, newOnly, &tools.Options{Logger: slog.New(slog.DiscardHandler)})
	r, err := svc.Resolve(id, f.config(id))
	if err != nil || string(r.Defaults["api_key"]) != `"sk-live-Rot8Key2"` {
		t.Fatalf("resolve with the new key only: %s %v", r.Defaults["api_key"], err)
	}
	// Copy attack.
	c := f.config(id)
	if _, err := svc.Resolve(other, c); !errors.Is(err, secrets.ErrDecrypt) {
		t.Fatalf("another tool's ciphertext: %v, want ErrDecrypt", err)
	}
}
