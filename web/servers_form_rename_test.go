package web_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestServerFormRenamesKeepSecrets: a stored variable renamed on the edit form with
// its value box left empty is refused at its row, however many rows were renamed or
// removed beside it, and the stored secrets stay as they were. The form that comes back
// still knows the rows as renamed, so sending it again unchanged is refused again.
func TestServerFormRenamesKeepSecrets(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ctx := context.Background()
	stored := map[string]string{"API_KEY": "rename-key-5512", "ORG": "rename-org-7731"}

	unchanged := func(what string, sv registry.Server) {
		t.Helper()
		if conn, _ := srv.Registry.Connection(ctx, sv.ID); !maps.Equal(conn.Env, stored) {
			t.Errorf("%s: the stored env changed to names %v", what, slices.Sorted(maps.Keys(conn.Env)))
		}
	}
	rowsOf := func(doc *goquery.Document) []string {
		var names []string
		doc.Find("[data-testid=env-rows] > .secret-row input[name=env_name]").Each(func(_ int, s *goquery.Selection) {
			names = append(names, s.AttrOr("value", ""))
		})
		return names
	}

	cases := []struct {
		name         string
		names        []string
		refusedAt    []string // the rows' error keys
		rowsComeBack []string
	}{
		{"two renames", []string{"OPENAI_API_KEY", "OPENAI_ORG"}, []string{"env/OPENAI_API_KEY", "env/OPENAI_ORG"},
			[]string{"OPENAI_API_KEY", "OPENAI_ORG"}},
		{"a rename and a removal", []string{"OPENAI_API_KEY"}, []string{"env/OPENAI_API_KEY"}, []string{"OPENAI_API_KEY"}},
	}
	for i, tc := range cases {
		sv := mustCreate(t, srv, registry.Spec{Name: fmt.Sprintf("renames-%d", i), Type: registry.TypeStdio, Command: "/usr/bin/env",
			Env: maps.Clone(stored), Enabled: false})
		f := browserForm(t, page(t, srv.Get(t, admin, "/servers/"+sv.ID+"/edit")))
		// The browser sends a removed row's fields no more: the first rows stay, renamed.
		if n := len(tc.names); len(f["env_orig"]) > n {
			f["env_orig"] = f["env_orig"][:n]
		}
		f["env_name"], f["env_value"] = tc.names, make([]string, len(tc.names))
		res := srv.PostForm(t, admin, "/servers/"+sv.ID, f)
		doc := page(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: got %d, want 422", tc.name, res.StatusCode)
			unchanged(tc.name, sv)
			continue
		}
		for _, k := range tc.refusedAt {
			if doc.Find("[data-testid='error-"+k+"']").Length() != 1 {
				t.Errorf("%s: no error at the row %s", tc.name, k)
			}
		}
		if got := rowsOf(doc); !slices.Equal(got, tc.rowsComeBack) {
			t.Errorf("%s: the form came back with rows %q, want what was typed %q", tc.name, got, tc.rowsComeBack)
		}
		unchanged(tc.name, sv)

		// The form as it came back, sent again as it is: still refused.
		again := browserForm(t, doc)
		res = srv.PostForm(t, admin, "/servers/"+sv.ID, again)
		res.Body.Close()
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s, sent again from the page that came back: got %d, want 422", tc.name, res.StatusCode)
		}
		unchanged(tc.name+", sent again", sv)
	}
}

// TestServerFormDuplicateRowName: a name on two rows is refused at the second, which
// used to win silently (an empty later row replacing the value typed above it).
func TestServerFormDuplicateRowName(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	f := httpForm("dup-rows", "")
	f.Set("type", registry.TypeStdio)
	f.Set("command", "/usr/bin/env")
	f.Del("enabled")
	f["env_name"], f["env_value"] = []string{"TOKEN", "", "TOKEN"}, []string{"abc", "", ""}
	res := srv.PostForm(t, admin, "/servers", f)
	doc := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("TOKEN on rows 1 and 3: got %d, want 422", res.StatusCode)
	}
	msg := doc.Find("[data-testid='error-env-row-3']")
	if msg.Length() != 1 {
		t.Errorf("no error at row 3 (errors: %q)", doc.Find(".error").Text())
	}
	t.Logf("row 3: %s", msg.Text())
	second := doc.Find("[data-testid=env-rows] > .secret-row").Eq(1).Find("input[name=env_name]")
	if second.AttrOr("aria-invalid", "") != "true" || second.AttrOr("aria-describedby", "") != "env-row-3-error" {
		t.Errorf("the second TOKEN row's name box: aria-invalid %q, aria-describedby %q", second.AttrOr("aria-invalid", ""), second.AttrOr("aria-describedby", ""))
	}
	if first := doc.Find("[data-testid=env-rows] > .secret-row").Eq(0).Find("input[name=env_name]"); first.AttrOr("aria-invalid", "") == "true" {
		t.Error("the first TOKEN row is marked invalid too")
	}
	if list, _, _ := srv.Registry.ListServers(context.Background(), registry.ListQuery{Q: "dup-rows"}); len(list) != 0 {
		t.Errorf("the refused form stored %d servers", len(list))
	}
}
