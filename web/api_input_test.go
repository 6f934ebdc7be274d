package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// sendAPI sends body with the Content-Type given ("" for none) as the token's holder
// and returns the status and the answer.
func sendAPI(t *testing.T, srv *webtest.Server, token, method, path, contentType, body string) (int, string) {
	t.Helper()
	return sendAPIAs(t, http.DefaultClient, token, srv.URL+path, method, contentType, body)
}

// sendAPIAs is sendAPI with a client (a session) and an optional token.
func sendAPIAs(t *testing.T, c *http.Client, token, url, method, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// wantInvalid checks a 400 invalid_input whose details name path and include why.
func wantInvalid(t *testing.T, what string, status int, body, path, why string) {
	t.Helper()
	var e webtest.ErrorBody
	_ = json.Unmarshal([]byte(body), &e)
	if status != http.StatusBadRequest || e.Error.Code != "invalid_input" ||
		!strings.Contains(string(e.Error.Details), `"`+path+`"`) || !strings.Contains(string(e.Error.Details), why) {
		t.Errorf("%s: got %d %.400s, want 400 invalid_input naming %s (%q)", what, status, body, path, why)
	}
}

// An import's dry_run and prune are read as booleans: dry_run=1 (or a bare ?dry_run)
// only plans, even with prune, and a value that is not a boolean is refused, naming it.
// Before, anything but "true" applied the import (and with prune removed servers).
func TestImportDryRunFlagsAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	api := webtest.API{T: t, Srv: srv, Bearer: token}
	api.JSON(http.MethodPost, "/api/v1/servers", map[string]any{"name": "keep-me", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false}, http.StatusCreated, nil)
	file := "version: 1\nservers:\n  - name: other\n    type: streamable_http\n    url: http://127.0.0.1:9/other\n    enabled: false\n"
	// 1 while only keep-me is stored (nothing applied); 2 once other is added.
	count := func() int {
		return srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name = 'other'`)*10 +
			srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name IN ('keep-me', 'other')`)
	}

	for _, base := range []string{"/api/v1/servers/import", "/api/v1/import"} {
		for _, q := range []string{"dry_run=1&prune=true", "dry_run=True&prune=1", "dry_run&prune=true", "dry_run=t&prune=TRUE"} {
			status, body := sendAPI(t, srv, token, http.MethodPost, base+"?filename=servers.yaml&"+q, "application/yaml", file)
			var out struct {
				DryRun bool            `json:"dry_run"`
				Plan   json.RawMessage `json:"plan"`
				Result json.RawMessage `json:"result"`
			}
			_ = json.Unmarshal([]byte(body), &out)
			if status != http.StatusOK || !out.DryRun || len(out.Plan) == 0 || out.Result != nil {
				t.Errorf("%s?%s: got %d %.300s, want a dry run's plan", base, q, status, body)
			}
			if n := count(); n != 1 {
				t.Fatalf("%s?%s: servers changed by a dry run (%d, want 1: keep-me only)", base, q, n)
			}
		}
		for _, tc := range []struct{ q, param string }{
			{"dry_run=maybe", "dry_run"}, {"dry_run=yes&prune=true", "dry_run"},
			{"dry_run=true&prune=", "prune"}, {"prune=sure", "prune"},
		} {
			status, body := sendAPI(t, srv, token, http.MethodPost, base+"?filename=servers.yaml&"+tc.q, "application/yaml", file)
			wantInvalid(t, base+"?"+tc.q, status, body, tc.param, "true or false")
			if n := count(); n != 1 {
				t.Fatalf("%s?%s: servers changed by a refused import (%d, want 1: keep-me only)", base, tc.q, n)
			}
		}
	}
	// dry_run=false applies, as before.
	if status, body := sendAPI(t, srv, token, http.MethodPost, "/api/v1/servers/import?filename=servers.yaml&dry_run=false",
		"application/yaml", file); status != http.StatusOK || count() != 12 {
		t.Errorf("dry_run=false: got %d %.300s and %d servers, want it applied", status, body, count())
	}
}

// A JSON API body must be JSON: a form-encoded or XML body, or JSON followed by more,
// is refused naming body, and nothing changes. Before, such a body bound as an empty
// object and the request succeeded having done nothing (or something else: a random
// password). application/merge-patch+json is JSON and works.
func TestAPIBodyMustBeJSON(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword) // a token may not manage users
	send := func(method, path, ct, body string) (int, string) {
		t.Helper()
		return sendAPIAs(t, admin, "", srv.URL+path, method, ct, body)
	}
	bob := srv.CreateUser(t, "bob", auth.RoleGuest, "long-enough-pass-1")
	disabled := func() int {
		return srv.App.Count(t, `SELECT count(*) FROM users WHERE username = 'bob' AND disabled_at IS NOT NULL`)
	}
	path := "/api/v1/users/" + bob.ID
	for _, tc := range []struct{ name, ct, body, why string }{
		{"form-encoded", "application/x-www-form-urlencoded", `{"disabled":true}`, "Content-Type: application/json"},
		{"XML", "application/xml", `<UserChange><disabled>true</disabled></UserChange>`, "Content-Type: application/json"},
		{"text", "text/plain", `{"disabled":true}`, "Content-Type: application/json"},
		{"no content type", "", `{"disabled":true}`, "Content-Type: application/json"},
		{"trailing data", "application/json", `{"disabled":true} {"role":"admin"}`, "after"},
		{"trailing garbage", "application/json", `{"disabled":true}x`, "after"},
	} {
		status, body := send(http.MethodPatch, path, tc.ct, tc.body)
		wantInvalid(t, tc.name, status, body, "body", tc.why)
		if disabled() != 0 {
			t.Fatalf("%s: bob was disabled by a refused body", tc.name)
		}
	}
	// The password reset sends the password it names, or is refused: never a random one.
	status, body := send(http.MethodPost, path+"/password", "application/x-www-form-urlencoded", `{"password":"another-long-pass-2"}`)
	wantInvalid(t, "form-encoded password", status, body, "body", "Content-Type: application/json")
	if strings.Contains(body, `"password"`) {
		t.Errorf("form-encoded password reset answered with a password: %s", body)
	}

	// Any JSON media type is JSON, its case and parameters aside.
	for _, ct := range []string{"application/merge-patch+json", "Application/JSON; charset=utf-8"} {
		status, body = send(http.MethodPatch, path, ct, `{"disabled":true}`)
		if status != http.StatusOK || disabled() != 1 {
			t.Errorf("%s: got %d %.300s, want bob disabled", ct, status, body)
		}
		if status, body = send(http.MethodPatch, path, "application/json", `{"disabled":false}`); status != http.StatusOK {
			t.Fatalf("re-enable: %d %s", status, body)
		}
	}
	// A body-less POST whose body is optional still works.
	if status, body = send(http.MethodPost, path+"/password", "", ""); status != http.StatusOK || !strings.Contains(body, `"password"`) {
		t.Errorf("empty password reset: got %d %.300s, want a generated password", status, body)
	}
}

// A value of the wrong JSON type is named by its pointer and its wanted kind, without
// Go's or echo's internals; malformed JSON says where.
func TestAPIBodyWrongTypes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	for _, tc := range []struct{ method, path, body, ptr, why string }{
		{http.MethodPost, "/api/v1/tools/call", `{"tool":5}`, "/tool", "must be a string (at byte 9)"},
		{http.MethodPost, "/api/v1/users", `{"username":["a"]}`, "/username", "must be a string"},
		{http.MethodPut, "/api/v1/executions/settings", `{"approval_ttl_seconds":"soon"}`, "/approval_ttl_seconds", "must be a whole number"},
		{http.MethodPost, "/api/v1/tools/call", `{"tool":"a",`, "body", "is not valid JSON"},
	} {
		status, body := sendAPI(t, srv, token, tc.method, tc.path, "application/json", tc.body)
		wantInvalid(t, tc.body, status, body, tc.ptr, tc.why)
		for _, leak := range []string{"Go struct", "code=400", "Unmarshal type error"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the answer %s shows %q", tc.body, body, leak)
			}
		}
	}
	// "; charset" alone is a malformed parameter, but the type is still JSON.
	status, body := sendAPI(t, srv, token, http.MethodPost, "/api/v1/tools/call", "application/json; charset", `{"tool":5}`)
	wantInvalid(t, "charset alone", status, body, "/tool", "must be a string")
}

// GET /api/v1/servers refuses a status or type it does not know and a limit outside
// 1–200, naming the parameter; before, they answered 200 with nothing, 24 or 200.
func TestServerListParamsAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	for _, tc := range []struct{ q, param, why string }{
		{"status=conected", "status", "must be one of"},
		{"type=foo", "type", "must be one of"},
		{"limit=0", "limit", "between 1 and 200"},
		{"limit=100000", "limit", "between 1 and 200"},
		{"limit=-1", "limit", "between 1 and 200"},
		{"offset=-1", "offset", "0 or more"},
	} {
		status, body := sendAPI(t, srv, token, http.MethodGet, "/api/v1/servers?"+tc.q, "", "")
		wantInvalid(t, tc.q, status, body, tc.param, tc.why)
	}
	for _, q := range []string{"status=connected", "type=streamable_http", "type=builtin", "limit=1", "limit=200", "status=&type="} {
		if status, body := sendAPI(t, srv, token, http.MethodGet, "/api/v1/servers?"+q, "", ""); status != http.StatusOK {
			t.Errorf("%s: got %d %.300s, want 200", q, status, body)
		}
	}
}
