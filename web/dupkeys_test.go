package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A JSON body that gives a key twice in one object is refused with 400 naming the key,
// on every API route (user creation, tool arguments, plans), and in the plan and
// argument text of the pages; nothing is created.
func TestDuplicateJSONKeysRefused(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	srv.LiveServer(t, "dup", true, "echo")

	for _, tc := range []struct {
		as   webtest.API
		path string
		body string
		key  string
	}{
		{api, "/api/v1/users", `{"username":"eve","username":"mallory","role":"guest","password":"long-enough-pass-1"}`, "/username"},
		{tok, "/api/v1/tools/call", `{"tool":"dup__echo","arguments":{"message":"hello","message":"rm -rf /"}}`, "/arguments/message"},
		{tok, "/api/v1/executions", `{"steps":[{"tool":"dup__echo","arguments":{"message":"a"},"arguments":{"message":"b"}}]}`, "/steps/0/arguments"},
		{tok, "/api/v1/tools/call", `{"tool":"dup__echo","\u0074ool":"dup__other","arguments":{}}`, "/tool"},
	} {
		e := tc.as.Error(http.MethodPost, tc.path, tc.body, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(string(e.Error.Details), `"`+tc.key+`"`) || !strings.Contains(string(e.Error.Details), "twice") {
			t.Errorf("POST %s: details %s do not name %s", tc.path, e.Error.Details, tc.key)
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM users WHERE username IN ('eve', 'mallory')`); n != 0 {
		t.Errorf("a user was created from a body with a duplicate key")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM executions`); n != 0 {
		t.Errorf("an execution was created from a body with a duplicate key")
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call'`); n != 0 {
		t.Errorf("a call ran from a body with a duplicate key")
	}
	// Keys that differ only in case land in the same field of Go's decoder (the last one
	// wins); a case-sensitive reader takes the first. Refused too, where a field reads them.
	for _, tc := range []struct {
		as   webtest.API
		path string
		body string
		key  string
	}{
		{api, "/api/v1/users", `{"username":"eve","Username":"mallory","role":"guest","password":"long-enough-pass-1"}`, "/username"},
		{tok, "/api/v1/tools/call", `{"tool":"dup__echo","TOOL":"dup__other","arguments":{}}`, "/tool"},
	} {
		e := tc.as.Error(http.MethodPost, tc.path, tc.body, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(string(e.Error.Details), `"`+tc.key+`"`) || !strings.Contains(string(e.Error.Details), "only in case") {
			t.Errorf("POST %s: details %s do not name %s", tc.path, e.Error.Details, tc.key)
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM users WHERE username IN ('eve', 'mallory')`); n != 0 {
		t.Errorf("a user was created from a body with keys differing in case")
	}
	// Tool arguments keep their keys exactly: "Message" and "message" are two, and it is
	// the tool's schema (no other properties) that refuses this one, not the case rule.
	tok.Error(http.MethodPost, "/api/v1/tools/call", `{"tool":"dup__echo","arguments":{"message":"tool","Message":"x"}}`,
		http.StatusBadRequest, "invalid_arguments")
	// The same keys in different objects are fine.
	tok.JSON(http.MethodPost, "/api/v1/tools/call", `{"tool":"dup__echo","arguments":{"message":"tool"}}`, http.StatusOK, nil)

	// The plan typed into the page.
	res := srv.PostForm(t, admin, "/executions/new", url.Values{"mode": {"plan"}, "plan": {`{"steps":[{"tool":"dup__echo","arguments":{"message":"a","message":"b"}}]}`}})
	doc := page(t, res)
	if res.StatusCode < 400 || !strings.Contains(doc.Text(), "twice") {
		t.Errorf("plan form with a duplicate key: %d %q", res.StatusCode, doc.Find("main").Text())
	}
}
