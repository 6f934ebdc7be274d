package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
)

// An import that prunes a server shows, on the page, the compensations and per-user
// rules that go with it; and whoever may not lift a per-user refusal among them (a
// tool manager, an administrator's API token) gets it as an error of the plan, dry run
// included, rather than a clean plan that applying refuses.
func TestImportPruneShowsAndChecksWhatGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	hs := srv.LiveServer(t, "pa", false, "echo")
	srv.LiveServer(t, "pb", false, "echo", "add")
	srv.CreateUser(t, "pm", auth.RoleToolManager, "pm-password-12345")
	srv.CreateUser(t, "pbob", auth.RoleToolUser, "pbob-password-1234")
	if err := srv.Executions.SetCompensation(ctx, audit.System, "pa__echo", "pb__add", map[string]executions.MappedArgument{}); err != nil {
		t.Fatal(err)
	}
	no := false
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "pb__echo"), "pbob", &no); err != nil {
		t.Fatal(err)
	}
	file := "version: 1\nservers:\n  - name: pa\n    type: streamable_http\n    url: " + hs.URL() + "\n    enabled: true\n"

	tm := webtest.API{T: t, Srv: srv, C: srv.Login(t, "pm", "pm-password-12345")}
	adminToken := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	for _, tc := range []struct {
		who  string
		as   webtest.API
		path string
		say  string
	}{
		{"tool manager", tm, "/api/v1/servers/import", "only an administrator"},
		{"admin's token", adminToken, "/api/v1/import", "sign in"},
	} {
		e := tc.as.Error(http.MethodPost, tc.path+"?filename=servers.yaml&dry_run=true&prune=true", file, http.StatusBadRequest, "invalid_input")
		var fields []struct{ Path, Message string }
		if err := json.Unmarshal(e.Error.Details, &fields); err != nil {
			t.Fatalf("%s: details %s: %v", tc.who, e.Error.Details, err)
		}
		if len(fields) != 1 || fields[0].Path != "servers/pb" || !strings.Contains(fields[0].Message, "pbob on pb__echo") ||
			!strings.Contains(fields[0].Message, tc.say) {
			t.Errorf("%s: details %s, want one on servers/pb naming pbob's refusal and saying %q", tc.who, e.Error.Details, tc.say)
		}
	}

	res := srv.PostForm(t, srv.Login(t, "admin", webtest.AdminPassword), "/servers/import",
		url.Values{"content": {file}, "filename": {"servers.yaml"}, "prune": {"true"}})
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("admin's preview: %d\n%s", res.StatusCode, body)
	}
	for _, want := range []string{
		"removes the compensation of pa__echo: its undo tool pb__add goes with this server",
		"removes the per-user rule on pb__echo refusing it to pbob",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the preview does not say %q", want)
		}
	}
}
