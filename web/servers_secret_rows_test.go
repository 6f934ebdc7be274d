package web_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestServerFormSecretRowsNotLost: the edit form never shows a stored secret, so a row
// that would save without one (a stored variable renamed with its value box left
// empty, a value typed without a name) is refused instead of losing the secret.
func TestServerFormSecretRowsNotLost(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ctx := context.Background()
	const secret = "rename-secret-4471"
	sv := mustCreate(t, srv, registry.Spec{Name: "renamed-env", Type: registry.TypeStdio, Command: "/usr/bin/env",
		Env: map[string]string{"API_KEY": secret}, Enabled: false})
	hv := mustCreate(t, srv, registry.Spec{Name: "renamed-hdr", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:9/mcp",
		Headers: map[string]string{"X-Key": secret}, Enabled: false})

	unchanged := func(what string) {
		t.Helper()
		if conn, _ := srv.Registry.Connection(ctx, sv.ID); len(conn.Env) != 1 || conn.Env["API_KEY"] != secret {
			t.Errorf("%s: stored env changed (API_KEY kept: %v, %d variables)", what, conn.Env["API_KEY"] == secret, len(conn.Env))
		}
		if conn, _ := srv.Registry.Connection(ctx, hv.ID); len(conn.Headers) != 1 || conn.Headers["X-Key"] != secret {
			t.Errorf("%s: stored headers changed (X-Key kept: %v, %d headers)", what, conn.Headers["X-Key"] == secret, len(conn.Headers))
		}
	}
	editForm := func(id string) map[string][]string {
		t.Helper()
		return browserForm(t, page(t, srv.Get(t, admin, "/servers/"+id+"/edit")))
	}

	cases := []struct {
		name, id, field string
		names, values   []string
		errKey          string // the row's error
		boxes           []string
	}{
		{"env renamed, value left empty", sv.ID, "env", []string{"API_TOKEN"}, []string{""}, "env/API_TOKEN", []string{"API_TOKEN"}},
		{"env value without a name", sv.ID, "env", []string{"API_KEY", " "}, []string{"", "typed-without-name"}, "env-row-2", []string{"API_KEY", ""}},
		{"header renamed, value left empty", hv.ID, "headers", []string{"X-Token"}, []string{""}, "headers/X-Token", []string{"X-Token"}},
	}
	for _, tc := range cases {
		f := editForm(tc.id)
		f[tc.field+"_name"], f[tc.field+"_value"] = tc.names, tc.values
		res := srv.PostForm(t, admin, "/servers/"+tc.id, f)
		doc := page(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: got %d, want 422", tc.name, res.StatusCode)
		}
		msg := doc.Find("[data-testid='error-" + tc.errKey + "']").Text()
		if msg == "" {
			t.Errorf("%s: no error at the row (%s)", tc.name, tc.errKey)
		}
		var boxes []string
		doc.Find("[data-testid=" + tc.field + "-rows] > .secret-row input[name=" + tc.field + "_name]").Each(func(_ int, s *goquery.Selection) {
			boxes = append(boxes, s.AttrOr("value", ""))
		})
		if !slices.Equal(boxes, tc.boxes) {
			t.Errorf("%s: the form came back with rows %q, want what was typed %q", tc.name, boxes, tc.boxes)
		}
		unchanged(tc.name)
		t.Logf("%s: %s", tc.name, strings.TrimSpace(msg))
	}

	// A new variable left empty beside the stored ones is no rename: it is saved empty.
	f := editForm(sv.ID)
	f["env_name"], f["env_value"] = []string{"API_KEY", "EMPTY_ONE"}, []string{"", ""}
	res := srv.PostForm(t, admin, "/servers/"+sv.ID, f)
	res.Body.Close()
	if conn, _ := srv.Registry.Connection(ctx, sv.ID); res.StatusCode != http.StatusSeeOther || len(conn.Env) != 2 ||
		conn.Env["API_KEY"] != secret || conn.Env["EMPTY_ONE"] != "" {
		t.Errorf("a new empty variable: got %d with %d variables (API_KEY kept: %v), want 303 with API_KEY and EMPTY_ONE",
			res.StatusCode, len(conn.Env), conn.Env["API_KEY"] == secret)
	}

	// A rename with the value typed again saves it under the new name.
	f = editForm(sv.ID)
	f["env_name"], f["env_value"] = []string{"API_TOKEN", "EMPTY_ONE"}, []string{secret, ""}
	res = srv.PostForm(t, admin, "/servers/"+sv.ID, f)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("rename with the value: got %d, want 303", res.StatusCode)
	}
	if conn, _ := srv.Registry.Connection(ctx, sv.ID); len(conn.Env) != 2 || conn.Env["API_TOKEN"] != secret {
		t.Errorf("after the rename with its value: API_TOKEN stored: %v, %d variables; want API_TOKEN and EMPTY_ONE", conn.Env["API_TOKEN"] == secret, len(conn.Env))
	}
}
