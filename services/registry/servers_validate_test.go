package registry_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// A template stored by an older release that puts a placeholder into shell code (refused
// since) can be rewritten to the safe form while its tool keeps a secret value: where
// the stored template sent its tools' arguments is read without the code rules, so the
// tool does not count as moved and its secret need not be cleared first.
func TestTemplateRewrittenUnderCodeRulesKeepsSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const head = "tools:\n  - name: fetch\n    input_schema: {type: object, properties: {token: {type: string}}}\n    command: "
	safe := head + `{argv: [sh, -c, 'curl -H "Authorization: Bearer $1" https://h.example/x', sh, "{token}"]}` + "\n"
	unsafe := head + `{argv: [sh, -c, "curl -H 'Authorization: Bearer {token}' https://h.example/x"]}` + "\n"

	sv := f.create(templateSpec("fetcher", safe))
	f.discover(sv.ID, discovery("connect", tool("fetch", "fetches", map[string]string{"token": `{"type":"string"}`})))
	// As an older release stored it (today's save refuses it), with the tool's value
	// encrypted (only its shape matters here).
	f.exec(`UPDATE mcp_servers SET template = $2 WHERE id = $1`, sv.ID, unsafe)
	f.exec(`UPDATE mcp_tools SET configuration = '{"params":{"token":{"mode":"fixed","secret":"v1:k:sealed"}}}' WHERE server_id = $1`, sv.ID)
	if got := mustGet(t, f, sv.ID); got.Template != unsafe {
		t.Fatalf("stored template: %q", got.Template)
	}

	if got := f.update(sv.ID, registry.Patch{Template: ptr(safe)}); got.Template != safe {
		t.Fatalf("template after the rewrite: %q", got.Template)
	}
	if n := f.count(`SELECT count(*) FROM mcp_tools WHERE server_id = $1 AND configuration->'params'->'token' ? 'secret'`, sv.ID); n != 1 {
		t.Fatalf("tools keeping the secret value: %d", n)
	}
}
