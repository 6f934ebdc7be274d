package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A Configuration form that comes back with an error keeps the version it was opened
// at: fixed and saved again after someone else saved meanwhile, it is refused (409),
// and the refused form saved again as it came back is refused too, so the other
// person's change is never undone by values the form showed from before it.
func TestToolConfigFormKeepsItsVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	seedTools(t, srv, "cfgstale", true, toolDef("deploy", "Deploys the build to the environment given.", `{"readOnlyHint":true}`))
	id := srv.ToolID(t, "cfgstale__deploy")
	a := srv.Login(t, "admin", webtest.AdminPassword)
	b := srv.Login(t, "admin", webtest.AdminPassword)
	form := func(c *http.Client) url.Values {
		res := srv.Get(t, c, "/tools/"+id+"?tab=configuration")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("configuration tab: got %d", res.StatusCode)
		}
		return submitted(page(t, res), "[data-testid=config-form]")
	}
	message := func() string {
		cfg, err := srv.Tools.Configuration(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return string(cfg.Params["message"].Value)
	}
	save := func(c *http.Client, f url.Values, want int) url.Values {
		t.Helper()
		res := srv.PostForm(t, c, "/tools/"+id+"/configure", f)
		if res.StatusCode != want {
			res.Body.Close()
			t.Fatalf("save (message %s now): got %d, want %d", message(), res.StatusCode, want)
		}
		if want == http.StatusSeeOther {
			res.Body.Close()
			return nil
		}
		return submitted(page(t, res), "[data-testid=config-form]")
	}

	// Version 1: message defaults to "staging".
	f := form(a)
	f.Set("param.message.mode", "default")
	f.Set("param.message.value", "staging")
	save(a, f, http.StatusSeeOther)

	// A opens the form at version 1; B saves "prod" as version 2.
	fa := form(a)
	fb := form(b)
	fb.Set("param.message.value", "prod")
	save(b, fb, http.StatusSeeOther)

	// A types a bad timeout: the form comes back with A's values and A's version.
	fa.Set("timeout_ms", "1.5")
	back := save(a, fa, http.StatusUnprocessableEntity)
	if v := back.Get("configuration_version"); v != "1" {
		t.Errorf("the form back with an error carries version %q, want the 1 it was opened at", v)
	}
	// A fixes the timeout and saves: refused, B's "prod" stays.
	back.Set("timeout_ms", "")
	again := save(a, back, http.StatusConflict)
	if got := message(); got != `"prod"` {
		t.Fatalf("after the stale form was saved the message is %s, want B's \"prod\"", got)
	}
	if again.Get("param.message.value") != "staging" || again.Get("configuration_version") != "1" {
		t.Errorf("the refused form shows message %q at version %q, want A's \"staging\" at 1",
			again.Get("param.message.value"), again.Get("configuration_version"))
	}
	// Saved again as it came back, still refused.
	save(a, again, http.StatusConflict)
	if got := message(); got != `"prod"` {
		t.Fatalf("after the refused form was saved again the message is %s, want B's \"prod\"", got)
	}
	// Reloaded, A's edit applies on top of B's.
	f = form(a)
	if f.Get("param.message.value") != "prod" || f.Get("configuration_version") != "2" {
		t.Errorf("reloaded form: message %q at version %q", f.Get("param.message.value"), f.Get("configuration_version"))
	}
	f.Set("timeout_ms", "2000")
	save(a, f, http.StatusSeeOther)
	if it, _ := srv.Tools.Get(ctx, id); message() != `"prod"` || it.TimeoutMS == nil || *it.TimeoutMS != 2000 {
		t.Errorf("after saving the reloaded form: message %s, timeout %v", message(), it.TimeoutMS)
	}
}
