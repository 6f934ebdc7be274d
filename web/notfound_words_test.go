package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// flashAfter follows the redirect res answers and returns the flash the page shows.
func flashAfter(t *testing.T, srv *webtest.Server, c *http.Client, res *http.Response) string {
	t.Helper()
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("got %d, want a redirect with a flash", res.StatusCode)
	}
	return strings.TrimSpace(page(t, srv.Get(t, c, res.Header.Get("Location"))).Find("[data-testid=flash]").Text())
}

// A test case or a category that is not there is named as such, not as a tool "removed
// with its server" (the tool exists); a case of a tool that is gone is the tool's.
func TestNotFoundNamesItsResource(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	id := srv.App.Enable(t, "builtin__file_operations").ID
	c := srv.Login(t, "admin", webtest.AdminPassword)

	for _, cs := range []string{"xyz", uuid.NewString()} {
		msg := flashAfter(t, srv, c, srv.PostForm(t, c, "/tools/"+id+"/test/cases/"+cs+"/delete", nil))
		if !strings.HasPrefix(msg, "That test case no longer exists") {
			t.Errorf("deleting case %s: flash %q, want one saying the test case no longer exists", cs, msg)
		}
	}
	for _, path := range []string{"/tools/categories/xyz", "/tools/categories/" + uuid.NewString(),
		"/tools/categories/xyz/delete", "/tools/categories/" + uuid.NewString() + "/delete"} {
		msg := flashAfter(t, srv, c, srv.PostForm(t, c, path, url.Values{"name": {"ghost"}}))
		if !strings.HasPrefix(msg, "That category no longer exists") {
			t.Errorf("POST %s: flash %q, want one saying the category no longer exists", path, msg)
		}
	}
	gone := uuid.NewString()
	res := srv.PostForm(t, c, "/tools/"+gone+"/test/cases/"+uuid.NewString()+"/delete", nil)
	res.Body.Close()
	// The page it goes back to is gone too: the words are read from the flash cookie.
	var flash string
	for _, sc := range res.Header.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(sc, "tw_flash="); ok {
			flash, _ = url.QueryUnescape(strings.SplitN(v, ";", 2)[0])
		}
	}
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(flash, "That tool no longer exists") {
		t.Errorf("a case of a gone tool: %d, flash %q; want a redirect with the tool's words", res.StatusCode, flash)
	}
}

// Through the API: a server's description with U+202E or ESC, a server with more
// arguments than the bound, and a category's description with ESC are each a 400
// naming the field and the character (or the bound); nothing is stored.
func TestDescriptionAndArgsRefusedAPI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := srv.Token(t, "admin")
	post := func(path string, body map[string]any) (int, string) {
		b, _ := json.Marshal(body)
		return sendAPI(t, srv, token, http.MethodPost, path, "application/json", string(b))
	}
	status, body := post("/api/v1/servers", map[string]any{"name": "rtl", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false, "description": "hi\u202e\u001b[31mred"})
	wantInvalid(t, "description with U+202E", status, body, "description", "U+202E")
	status, body = post("/api/v1/servers", map[string]any{"name": "esc", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false, "description": "hi\u001b[31mred"})
	wantInvalid(t, "description with ESC", status, body, "description", "U+001B")
	args := make([]string, registry.MaxArgs+1)
	for i := range args {
		args[i] = "-v"
	}
	status, body = post("/api/v1/servers", map[string]any{"name": "many-args", "type": "stdio", "command": "npx",
		"args": args, "enabled": false})
	wantInvalid(t, "too many args", status, body, "args", fmt.Sprintf("at most %d", registry.MaxArgs))
	if n := srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name IN ('rtl', 'esc', 'many-args')`); n != 0 {
		t.Fatalf("%d refused servers stored", n)
	}
	status, body = post("/api/v1/categories", map[string]any{"name": "esc", "description": "hi\u001b[31mred"})
	wantInvalid(t, "category description with ESC", status, body, "description", "U+001B")
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_categories WHERE name = 'esc'`); n != 0 {
		t.Fatalf("%d refused categories stored", n)
	}
}
