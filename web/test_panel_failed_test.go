package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A tool manager may not get a failed tool enabled by deleting the case it failed on and
// running the rest (enabling a failed tool is tool.override's); an administrator's run
// still verifies it, as does a manager's rerun of the unchanged cases once they pass.
func TestTestPanelFailedToolCasesChanged(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	mf := liveServer(t, srv, "mf", true)
	srv.CreateUser(t, "mgr", auth.RoleToolManager, "manager-password-1")
	mgr := srv.Login(t, "mgr", "manager-password-1")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	add := toolID(t, srv, "mf__add")
	status := func() string {
		t.Helper()
		it, err := srv.Tools.Get(t.Context(), add)
		if err != nil {
			t.Fatal(err)
		}
		return it.Status
	}
	save := func(name, b, expect string) {
		t.Helper()
		ws := testPost(t, srv, mgr, add, url.Values{"mode": {"form"}, "_action": {"save"}, "case_name": {name},
			"arg/a": {"2"}, "arg/b": {b}, "expect": {expect}, "expect_text": {"5"}})
		if !strings.Contains(ws.Find(`[data-testid="test-notice"]`).Text(), name) {
			t.Fatalf("save %s: got %s", name, ws.Text())
		}
	}
	runAll := func(c *http.Client) string {
		t.Helper()
		res := srv.PostForm(t, c, "/tools/"+add+"/test/cases/run", url.Values{})
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("run all: got %d", res.StatusCode)
		}
		return page(t, srv.Get(t, c, "/tools/"+add+"/test")).Text()
	}
	save("sum", "3", "success")
	save("wrong", "4", "success") // 2 + 4 is not 5
	if runAll(mgr); status() != "failed" {
		t.Fatalf("after a case failed: got %s, want failed", status())
	}
	cases, err := srv.Tools.TestCases(t.Context(), add)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		if tc.Name == "wrong" {
			res := srv.PostForm(t, mgr, "/tools/"+add+"/test/cases/"+tc.ID+"/delete", url.Values{})
			res.Body.Close()
		}
	}
	if text := runAll(mgr); status() != "failed" || !strings.Contains(text, "override is needed: the cases changed since the tool failed") {
		t.Fatalf("the manager's run after deleting the failing case: got %s, want failed saying an override is needed: %s", status(), text)
	}
	res := srv.PostForm(t, mgr, "/tools/"+add+"/enable", url.Values{})
	res.Body.Close()
	if status() != "failed" {
		t.Fatalf("the manager's enable: got %s, want still failed", status())
	}

	// The administrator's run verifies it as before.
	if runAll(admin); status() != "verified" {
		t.Fatalf("the administrator's run: got %s, want verified", status())
	}

	// Failed again while the server is down; the manager's rerun of the same cases once
	// it is back verifies the tool.
	mf.Stop()
	if text := runAll(mgr); status() != "failed" {
		t.Fatalf("with the server down: got %s, want failed: %s", status(), text)
	}
	mf.Restart()
	if text := runAll(mgr); status() != "verified" {
		t.Fatalf("the manager's rerun of the unchanged cases: got %s, want verified: %s", status(), text)
	}
}
