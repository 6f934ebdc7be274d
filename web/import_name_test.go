package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A pasted file's name (the page's filename field, the API's ?filename=) is cleaned as an
// upload's is: a newline in it shifted the sealed file's body at apply, and control
// characters reached the audit log.
func TestImportPastedFileName(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	p := readImportPage(t, srv.PostForm(t, c, "/servers/import", url.Values{
		"content": {"version: 1\ncategories:\n  - name: pasted\n"}, "filename": {"a\nb\x1b[2J.yaml"}}))
	if p.status != http.StatusOK || !p.apply {
		t.Fatalf("preview of the pasted file: %+v", p)
	}
	res := srv.PostForm(t, c, "/servers/import/apply", map[string][]string{"sealed": {p.sealed}, "digest": {p.digest}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/servers" {
		t.Fatalf("apply: %d to %q, want 303 to /servers", res.StatusCode, res.Header.Get("Location"))
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_categories WHERE name = 'pasted'`); n != 1 {
		t.Fatal("the pasted file was not imported")
	}

	token := srv.Token(t, "admin")
	status, body := sendAPI(t, srv, token, http.MethodPost, "/api/v1/import?filename="+url.QueryEscape("c\nd\x1b[2J.yaml"), "application/yaml",
		"version: 1\ncategories:\n  - name: viaapi\n")
	if status != http.StatusOK {
		t.Fatalf("API import: %d %.400s", status, body)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'config.import'`); n != 2 {
		t.Fatalf("%d config.import entries, want 2", n)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE target_name ~ '[[:cntrl:]]' OR payload::text ~ '\\u001b|\\n'`); n != 0 {
		t.Errorf("%d audit entries carry the file name's control characters", n)
	}
	if strings.Contains(body, `\u001b`) {
		t.Errorf("the API's answer echoes the control characters: %.400s", body)
	}
}
