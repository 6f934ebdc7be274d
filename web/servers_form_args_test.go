package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestServerFormArgumentErrorShown: the registry refuses an argument by its place
// (args/1); the form shows it at the arguments box, by the line it is on, marked
// invalid (so it takes the focus), instead of coming back 422 looking unchanged.
func TestServerFormArgumentErrorShown(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	f := httpForm("secret-args", "")
	f.Set("type", registry.TypeStdio)
	f.Set("command", "/usr/bin/env")
	f.Set("args", "--api-key\r\n\r\nsk-live-abcdef0123456789")
	f.Del("enabled")
	res := srv.PostForm(t, admin, "/servers", f)
	doc := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a secret in the arguments: got %d, want 422", res.StatusCode)
	}
	msg := strings.TrimSpace(doc.Find("[data-testid=error-args]").Text())
	// The value is on the third line of the box (a blank line before it).
	if !strings.HasPrefix(msg, "line 3: ") || !strings.Contains(msg, "looks like a secret") {
		t.Errorf("error at the arguments box: %q, want it to name line 3 and say it looks like a secret", msg)
	}
	box := doc.Find("textarea#args")
	if box.AttrOr("aria-invalid", "") != "true" || box.AttrOr("aria-describedby", "") != "args-error" {
		t.Errorf("the arguments box: aria-invalid %q aria-describedby %q, want true and args-error", box.AttrOr("aria-invalid", ""), box.AttrOr("aria-describedby", ""))
	}
	if got := box.Text(); strings.TrimPrefix(got, "\n") != strings.ReplaceAll(f.Get("args"), "\r\n", "\n") {
		t.Errorf("the arguments box holds %q, want what was typed", got)
	}
	if strings.Contains(msg, "sk-live") {
		t.Errorf("the error repeats the secret: %q", msg)
	}

	// An env variable's problem is shown at its row (the registry keys it by name).
	f = httpForm("bad-env-name", "")
	f.Set("type", registry.TypeStdio)
	f.Set("command", "/usr/bin/env")
	f.Del("enabled")
	f["env_name"], f["env_value"] = []string{"1BAD"}, []string{"x"}
	res = srv.PostForm(t, admin, "/servers", f)
	doc = page(t, res)
	name := doc.Find("[data-testid=env-rows] input[name=env_name]")
	if res.StatusCode != http.StatusUnprocessableEntity || doc.Find("[data-testid='error-env/1BAD']").Length() != 1 || name.AttrOr("aria-invalid", "") != "true" {
		t.Errorf("env name 1BAD: got %d, error at the row %d, aria-invalid %q; want 422 with the row marked", res.StatusCode,
			doc.Find("[data-testid='error-env/1BAD']").Length(), name.AttrOr("aria-invalid", ""))
	}
}
