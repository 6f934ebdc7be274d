package configcode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
)

// pendingHash is the definition of x__rm the file's enable and override are about.
const pendingHash = "3f2a9c01e4b7d6c5a8f90123456789abcdef0123456789abcdef0123456789ab"

// pendingFile registers server x and states settings of its tool x__rm, which exists
// only once x is discovered.
func pendingFile(risk string) string {
	return "version: 1\nservers:\n  - name: x\n    type: streamable_http\n    url: http://127.0.0.1:1/mcp\n" +
		"tools:\n  - tool: x__rm\n    state: enabled\n    override: ok\n    definition_hash: " + pendingHash + "\n    risk: " + risk + "\n    timeout_ms: 4000\n" +
		"    tags: [files]\n    config:\n      path: {mode: fixed, value: /tmp}\n      api_key: {mode: fixed, value: " + secretValue + "}\n" +
		"    permissions: {guest1: true}\n" +
		"    compensation: {undo: x__restore, arguments: {path: {from: /path}}}\n"
}

// A dry run shows what applying will do to a tool of a server the import registers:
// applying sets it after discovery without another review, so the plan (and its
// digest) must hold it, secrets masked.
func TestPendingToolSettingsArePlanned(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.CreateUser(t, "guest1", auth.RoleGuest, "guest1-password-123")
	p := plan(t, a, "config.yaml", pendingFile("low"))
	if p.HasErrors() {
		t.Fatalf("plan:\n%s", p)
	}
	text := p.String()
	for _, want := range []string{"… after discovery: tool x__rm", "waits for: discovery of server x", "state: enabled (definition 3f2a9c01e4b7… only, as the file pins it)",
		`override: "ok"`, "risk: low", "timeout_ms: 4000", "tags: [files]", "config.path: fixed \"/tmp\"",
		"config.api_key: set (secret)", "permissions.guest1: true", `compensation: x__restore {"path":{"from":"/path"}}`} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, secretValue) {
		t.Errorf("the plan shows the secret:\n%s", text)
	}
	if other := plan(t, a, "config.yaml", pendingFile("high")); other.Digest() == p.Digest() {
		t.Errorf("the digest is the same when the pending tool's risk differs:\n%s", other)
	}
	// A credential it is sure to refuse is named, never shown.
	leaky := strings.Replace(pendingFile("low"), "{path: {from: /path}}", "{token: {value: "+secretValue+"}}", 1) +
		"    test_cases:\n      - {name: leaky, arguments: {password: hunter2}}\n"
	text = plan(t, a, "config.yaml", leaky).String()
	for _, want := range []string{"compensation.arguments.token: not applied: holds a credential", "test_cases.leaky: not applied: /password holds a secret"} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, secretValue) || strings.Contains(text, "hunter2") {
		t.Errorf("the plan shows a secret:\n%s", text)
	}
}

// A compensation's fixed value that is a credential is refused when planned: it would
// be stored, shown and exported in plain text.
func TestPlanRefusesCompensationSecrets(t *testing.T) {
	t.Parallel()
	hs := liveServer(t)
	a := source(t, hs)
	a.Settled(t, "ev__weather")
	file := "version: 1\nservers: []\ntools:\n  - tool: ev__echo\n    compensation:\n      undo: ev__weather\n      arguments:\n" +
		"        city: {from: /message}\n        api_key: {value: sk_live_51HqLyjWDarjtT1zdp7dcXbYk}\n"
	p := plan(t, a, "config.yaml", file)
	got := fmt.Sprint(p.Unapplied)
	if !strings.Contains(got, "tools.ev__echo.compensation.arguments.api_key: ") || !strings.Contains(got, "credential") {
		t.Fatalf("not applied: %s\nplan:\n%s", got, p)
	}
	if strings.Contains(p.String(), "sk_live_") {
		t.Fatalf("the plan shows the credential:\n%s", p)
	}
	if _, err := a.ConfigCode.Apply(context.Background(), admin, p); err != nil {
		t.Fatal(err)
	}
	if n := a.Count(t, `SELECT count(*) FROM tool_compensations WHERE argument_map::text LIKE '%sk_live_%'`) +
		a.Count(t, `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%sk_live_%'`); n != 0 {
		t.Fatalf("the credential is stored in %d rows", n)
	}
}

// The tool page's and the API's path refuses a credential as a compensation's fixed
// value too, naming the argument; a plain fixed value is kept.
func TestSetCompensationRefusesSecrets(t *testing.T) {
	t.Parallel()
	hs := liveServer(t)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "vault", Description: "Locks the vault.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"pin":{"type":"string","format":"password"}}}`)})
	a := source(t, hs)
	ctx := context.Background()
	echo := a.ToolID(t, "ev__echo")
	a.Settled(t, "ev__vault")
	if err := a.Executions.SetCompensation(ctx, admin, echo, "ev__vault", map[string]executions.MappedArgument{
		"pin": {Value: json.RawMessage(`"1234"`)}}); err == nil || !strings.Contains(err.Error(), "/argument_map/pin") {
		t.Errorf("pin (format password) = 1234: %v", err)
	}
	for _, tc := range []struct{ arg, value string }{
		{"api_key", `"not-a-real-looking-one"`},         // by its name
		{"city", `"sk_live_51HqLyjWDarjtT1zdp7dcXbYk"`}, // by its look
	} {
		err := a.Executions.SetCompensation(ctx, admin, echo, "ev__weather", map[string]executions.MappedArgument{
			tc.arg: {Value: json.RawMessage(tc.value)}})
		if err == nil || !strings.Contains(err.Error(), "/argument_map/"+tc.arg) || !strings.Contains(err.Error(), "credential") {
			t.Errorf("%s = %s: %v", tc.arg, tc.value, err)
		}
	}
	if err := a.Executions.SetCompensation(ctx, admin, echo, "ev__weather", map[string]executions.MappedArgument{
		"city": {Value: json.RawMessage(`"Paris"`)}, "units": {From: "/message"}}); err != nil {
		t.Fatal(err)
	}
}
