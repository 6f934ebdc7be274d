package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// bodyCase is a request whose body must be refused with 400 invalid_input naming path,
// the message containing why.
type bodyCase struct {
	name, method, path string
	body               any
	ptr, why           string
}

func (bc bodyCase) check(t *testing.T, api webtest.API) {
	t.Helper()
	api.T = t
	e := api.Error(bc.method, bc.path, bc.body, http.StatusBadRequest, "invalid_input")
	var fields []struct{ Path, Message string }
	if err := json.Unmarshal(e.Error.Details, &fields); err != nil {
		t.Fatalf("%s: details %s: %v", bc.name, e.Error.Details, err)
	}
	for _, f := range fields {
		if f.Path == bc.ptr && strings.Contains(f.Message, bc.why) {
			return
		}
	}
	t.Errorf("%s: details %s, want %s %q", bc.name, e.Error.Details, bc.ptr, bc.why)
}

// A body that names no key the route takes, or a misspelt one, is refused naming the
// key by its pointer, and changes nothing. Before, PATCH and PUT answered 200 having
// changed nothing, the password reset set a random password, and an empty compensation
// PUT removed the tool's configured undo.
func TestAPIBodiesAreStrict(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "bf", true, "echo", "fail")
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	bob := srv.CreateUser(t, "bf-bob", auth.RoleToolUser, "bf-bob-password-1")
	echo, fail := srv.ToolID(t, "bf__echo"), srv.ToolID(t, "bf__fail")
	var server struct {
		ID string `json:"id"`
	}
	// A create may send back what only the server sets, as GET answered it: ignored.
	admin.JSON(http.MethodPost, "/api/v1/servers", map[string]any{"name": "bf-off", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false, "id": "7", "created_at": "2026-01-01T00:00:00Z",
		"Updated_At": "2026-01-01T00:00:00Z"}, http.StatusCreated, &server)
	admin.JSON(http.MethodPost, "/api/v1/users", map[string]any{"username": "bf-carol", "role": "guest",
		"password": "bf-carol-password-1", "id": "x", "created_at": "2026-01-01T00:00:00Z"}, http.StatusCreated, nil)
	comp := "/api/v1/tools/" + fail + "/compensation"
	admin.JSON(http.MethodPut, comp, map[string]any{"undo_tool": "bf__echo",
		"argument_map": map[string]any{"message": map[string]any{"from": "/message"}}}, http.StatusOK, nil)
	settings := func() string {
		_, raw := admin.Do(http.MethodGet, "/api/v1/executions/settings", nil)
		return string(raw)
	}
	before := settings()
	var bobHash string
	if err := srv.Pool.QueryRow(t.Context(), `SELECT password_hash FROM users WHERE id = $1`, bob.ID).Scan(&bobHash); err != nil {
		t.Fatal(err)
	}
	someID := "6f1b1f0e-0000-4000-8000-000000000000"

	for _, bc := range []bodyCase{
		// Misspelt keys on PATCH and PUT.
		{"users", http.MethodPatch, "/api/v1/users/" + bob.ID, map[string]any{"active": false}, "/active", "check its spelling"},
		{"settings", http.MethodPut, "/api/v1/executions/settings", map[string]any{"approval_ttl": 600}, "/approval_ttl", "approval_ttl_seconds"},
		{"servers", http.MethodPatch, "/api/v1/servers/" + server.ID, map[string]any{"timeout": 5000}, "/timeout", "timeout_ms"},
		{"tools", http.MethodPatch, "/api/v1/tools/" + echo, map[string]any{"risk_level": "high"}, "/risk_level", "check its spelling"},
		{"compensation", http.MethodPut, comp, map[string]any{"undoTool": "bf__echo"}, "/undoTool", "check its spelling"},
		{"categories", http.MethodPatch, "/api/v1/categories/" + someID, map[string]any{"title": "x"}, "/title", "check its spelling"},
		// Passwords: a random one, or a refusal about the wrong field, before.
		{"password reset", http.MethodPost, "/api/v1/users/" + bob.ID + "/password", map[string]any{"new_password": "bf-new-password-2"}, "/new_password", "password"},
		{"own password", http.MethodPost, "/api/v1/me/password", map[string]any{"current_password": webtest.AdminPassword, "newPassword": "bf-new-password-3"}, "/newPassword", "new_password"},
		// Decisions (read before the id is looked up).
		{"confirm", http.MethodPost, "/api/v1/executions/" + someID + "/confirm", map[string]any{"phrase": "x", "plan_hsh": "y"}, "/plan_hsh", "plan_hash"},
		{"reject", http.MethodPost, "/api/v1/executions/" + someID + "/reject", map[string]any{"reasn": "no"}, "/reasn", "reason"},
		{"respond", http.MethodPost, "/api/v1/collaborations/" + someID + "/respond", map[string]any{"answer": "yes"}, "/answer", "response"},
		// Creates: keys neither asked for nor answered.
		{"server create", http.MethodPost, "/api/v1/servers", map[string]any{"name": "bf-two", "type": "streamable_http",
			"url": "http://127.0.0.1:9/mcp", "enabled": false, "timeout": 5}, "/timeout", "check its spelling"},
		{"user create", http.MethodPost, "/api/v1/users", map[string]any{"username": "bf-dave", "role": "guest", "rol": "admin"}, "/rol", "check its spelling"},
		{"token create", http.MethodPost, "/api/v1/tokens", map[string]any{"name": "bf-token", "expires_in": 5}, "/expires_in", "expires_in_days"},
		// Keys of the answer that look like settings are not let through: the token would
		// get the default lifetime, the user be enabled.
		{"token expiry", http.MethodPost, "/api/v1/tokens", map[string]any{"name": "bf-token", "expires_at": "2027-01-01T00:00:00Z"}, "/expires_at", "expires_in_days"},
		{"user disabled_at", http.MethodPost, "/api/v1/users", map[string]any{"username": "bf-dave", "role": "guest", "disabled_at": "2026-01-01T00:00:00Z"}, "/disabled_at", "check its spelling"},
		{"server status", http.MethodPost, "/api/v1/servers", map[string]any{"name": "bf-two", "type": "streamable_http",
			"url": "http://127.0.0.1:9/mcp", "enabled": false, "status": "connected"}, "/status", "check its spelling"},
		// A key encoding/json would not read into the field its letters fold to (dotless ı).
		{"dotless i", http.MethodPatch, "/api/v1/users/" + bob.ID, map[string]any{"dısabled": true}, "/dısabled", "check its spelling"},
		// A call, a permission and a message to the assistant.
		{"tool call", http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "bf__echo", "argument": map[string]any{"message": "a"}}, "/argument", "arguments"},
		{"permission", http.MethodPut, "/api/v1/tools/" + echo + "/permissions", map[string]any{"username": "bf-bob", "canUse": false}, "/canUse", "can_use"},
		{"assistant", http.MethodPost, "/api/v1/assistant/messages", map[string]any{"mesage": "hi"}, "/mesage", "message"},
		// Nested keys, named where they are.
		{"plan rollback", http.MethodPost, "/api/v1/executions", `{"plan":{"steps":[{"tool":"bf__echo","arguments":{"message":"a"}}],"rolback":[]}}`, "/plan/rolback", "rollback"},
		{"plan step", http.MethodPost, "/api/v1/executions", `{"plan":{"steps":[{"tool":"bf__echo"},{"tool":"bf__echo","argumets":{}}]}}`, "/plan/steps/1/argumets", "arguments"},
		// Naming nothing the route changes.
		{"empty patch", http.MethodPatch, "/api/v1/users/" + bob.ID, map[string]any{}, "body", "names no field this route changes; it changes: role, disabled"},
		{"only a reason", http.MethodPatch, "/api/v1/tools/" + echo, map[string]any{"reason": "why"}, "body", "it changes: risk, timeout_ms"},
		{"empty settings", http.MethodPut, "/api/v1/executions/settings", map[string]any{}, "body", "approval_ttl_seconds"},
		{"empty compensation", http.MethodPut, comp, map[string]any{}, "body", "undo_tool, argument_map"},
		{"compensation without undo_tool", http.MethodPut, comp, map[string]any{"argument_map": map[string]any{}}, "undo_tool", "is required"},
		// The two forms of the separation, disagreeing.
		{"separation", http.MethodPut, "/api/v1/executions/settings", map[string]any{"high_separation": "off", "separate_high_approver": true}, "high_separation", "disagree"},
		{"separation too", http.MethodPut, "/api/v1/executions/settings", map[string]any{"high_separation": "always", "separate_high_approver": false}, "separate_high_approver", "disagree"},
	} {
		t.Run(bc.name, func(t *testing.T) { bc.check(t, admin) })
	}
	// No body at all: refused too (the compensation was removed by it).
	if got, raw := admin.Do(http.MethodPut, comp, nil); got != http.StatusBadRequest || !strings.Contains(string(raw), "names no field") {
		t.Errorf("compensation without a body: got %d %s, want 400 naming body", got, raw)
	}
	if got, raw := admin.Do(http.MethodPatch, "/api/v1/users/"+bob.ID, nil); got != http.StatusBadRequest {
		t.Errorf("user patch without a body: got %d %s, want 400", got, raw)
	}

	// Nothing changed.
	if n := srv.App.Count(t, `SELECT count(*) FROM users WHERE id = $1 AND disabled_at IS NULL AND password_hash = $2`,
		bob.ID, bobHash); n != 1 {
		t.Errorf("bob was disabled or got a new password by a refused body")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM users WHERE username IN ('bf-two', 'bf-dave')`); n != 0 {
		t.Errorf("%d users created by refused bodies", n)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM api_tokens WHERE name = 'bf-token'`); n != 0 {
		t.Error("a token was created by a refused body")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name = 'bf-two'`); n != 0 {
		t.Error("a server was created by a refused body")
	}
	if after := settings(); after != before {
		t.Errorf("settings changed by refused bodies: %s, were %s", after, before)
	}
	admin.JSON(http.MethodGet, comp, nil, http.StatusOK, nil) // still configured

	// What is allowed still works: the forms agreeing, and removal by an explicit null.
	admin.JSON(http.MethodPut, "/api/v1/executions/settings", map[string]any{"high_separation": "always", "separate_high_approver": true}, http.StatusOK, nil)
	if got, raw := admin.Do(http.MethodPut, comp, map[string]any{"undo_tool": nil}); got != http.StatusNoContent {
		t.Fatalf("remove by null: got %d %s, want 204", got, raw)
	}
	admin.Error(http.MethodGet, comp, nil, http.StatusNotFound, "not_found")
}

// A time given a number or a word is named by its field, in words, not Go's; a key
// holding "/", "~" or "." is one token of the pointer.
func TestAPIBodyTimesAndPointers(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	var server struct {
		ID string `json:"id"`
	}
	token.JSON(http.MethodPost, "/api/v1/servers", map[string]any{"name": "bt-off", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false}, http.StatusCreated, &server)
	path := "/api/v1/servers/" + server.ID
	const rfc = "must be an RFC 3339 time like 2026-12-06T10:00:00Z"
	for _, bc := range []bodyCase{
		{"number", http.MethodPatch, path, `{"description":"x","expect_updated_at":5}`, "/expect_updated_at", rfc},
		{"word", http.MethodPatch, path, `{"description":"x","expect_updated_at":"yesterday"}`, "/expect_updated_at", rfc},
		{"category", http.MethodPatch, "/api/v1/categories/6f1b1f0e-0000-4000-8000-000000000000", `{"name":"x","expect_updated_at":"2026-13-01"}`, "/expect_updated_at", rfc},
		{"escaped key", http.MethodPatch, path, `{"env":{"a.b/c~d":5}}`, "/env/a.b~1c~0d", "must be a string"},
		{"array index", http.MethodPost, "/api/v1/executions", `{"plan":{"steps":[{"tool":"x"},{"tool":5}]}}`, "/plan/steps/1/tool", "must be a string"},
	} {
		t.Run(bc.name, func(t *testing.T) {
			bc.check(t, token)
			_, raw := token.Do(bc.method, bc.path, bc.body)
			for _, leak := range []string{"UnmarshalJSON", "parsing time", "2006-01-02"} {
				if strings.Contains(string(raw), leak) {
					t.Errorf("the answer %s shows %q", raw, leak)
				}
			}
		})
	}
}

// The test panel runs the tool only for its Run button (or a form sent with Enter,
// naming none): another _action (a stale or mistyped button) is refused, not run.
func TestTestPanelUnknownActionDoesNotRun(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "ta", true, "echo")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	echo := srv.ToolID(t, "ta__echo")
	runs := func() int {
		return srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_id = $1`, echo)
	}
	post := func(action string) int {
		form := url.Values{"mode": {"form"}, "arg/message": {"hi"}}
		if action != "-" {
			form.Set("_action", action)
		}
		res := srv.PostFormHeaders(t, c, "/tools/"+echo+"/test", form, map[string]string{"HX-Request": "true"})
		res.Body.Close()
		return res.StatusCode
	}
	for _, action := range []string{"delete", "Run", "mode:yaml"} {
		if got := post(action); got != http.StatusBadRequest {
			t.Errorf("_action=%q: got %d, want 400", action, got)
		}
	}
	time.Sleep(300 * time.Millisecond) // a run started would be recorded by now
	if n := runs(); n != 0 {
		t.Fatalf("%d runs recorded for unknown actions", n)
	}
	// "-": no _action at all, as a form sent with Enter.
	for i, action := range []string{"run", "", "-"} {
		if got := post(action); got != http.StatusOK {
			t.Fatalf("_action=%q: got %d, want 200", action, got)
		}
		webtest.WaitFor(t, 10*time.Second, func() bool { return runs() == i+1 }, "the run of _action="+action+" recorded")
	}
}
