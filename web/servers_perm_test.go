package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// These tests cover auth.PermServerCommand (only administrators set what a stdio server
// runs), the digest check of the import page, and the audit of "Test connection".

const (
	tmUser     = "tm"
	tmPassword = "tool-manager-password-77"
	// noSuchCmd is a stdio command that cannot start: trying it fails at once, and
	// nothing runs.
	noSuchCmd = "/nonexistent/toolwarden-perm-test"
)

// permFixture is a server with an administrator and a tool manager, each with an API
// token, and the tool manager also signed in with a session.
type permFixture struct {
	srv     *webtest.Server
	admin   svClient // bearer token
	tm      svClient // bearer token
	tmWeb   *http.Client
	adminWb *http.Client
}

func newPermFixture(t *testing.T) permFixture {
	t.Helper()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, tmUser, auth.RoleToolManager, tmPassword)
	return permFixture{
		srv:     srv,
		admin:   svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")},
		tm:      svClient{t: t, srv: srv, bearer: svToken(t, srv, tmUser)},
		tmWeb:   srv.Login(t, tmUser, tmPassword),
		adminWb: srv.Login(t, "admin", webtest.AdminPassword),
	}
}

// stdioBody is the JSON of a disabled stdio server that cannot start.
func stdioBody(name, secret string) map[string]any {
	return map[string]any{"name": name, "type": "stdio", "command": noSuchCmd, "args": []string{"serve", "--verbose"},
		"working_dir": "/tmp", "env": map[string]string{"API_KEY": secret}, "enabled": false}
}

// wantForbidden checks a 403 forbidden answer whose message says only administrators
// may do this.
func wantForbidden(t *testing.T, what string, status int, raw []byte) {
	t.Helper()
	var e apiErr
	_ = json.Unmarshal(raw, &e)
	if status != http.StatusForbidden || e.Error.Code != "forbidden" || !strings.Contains(e.Error.Message, "administrators") {
		t.Errorf("%s: got %d %s, want 403 forbidden with a message about administrators", what, status, raw)
	}
}

// stdioState is what a stdio server runs, for comparing before and after.
type stdioState struct {
	typ, command, workingDir string
	args, envNames           []string
	env                      map[string]string
}

func stdioStateOf(t *testing.T, srv *webtest.Server, id string) stdioState {
	t.Helper()
	ctx := context.Background()
	s, err := srv.Registry.GetServer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := srv.Registry.Connection(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return stdioState{typ: s.Type, command: s.Command, workingDir: s.WorkingDir, args: slices.Clone(s.Args),
		envNames: slices.Clone(s.EnvNames), env: conn.Env}
}

func (a stdioState) equal(b stdioState) bool {
	if a.typ != b.typ || a.command != b.command || a.workingDir != b.workingDir || !slices.Equal(a.args, b.args) ||
		!slices.Equal(a.envNames, b.envNames) || len(a.env) != len(b.env) {
		return false
	}
	for k, v := range a.env {
		if b.env[k] != v {
			return false
		}
	}
	return true
}

func TestServerCommandPermissionAPI(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, admin, tm := f.srv, f.admin, f.tm
	ctx := context.Background()
	const secret = "perm-api-secret-4471"

	if !auth.RoleAdmin.Can(auth.PermServerCommand) || auth.RoleToolManager.Can(auth.PermServerCommand) {
		t.Fatalf("server.command: admin %v, tool_manager %v; want only administrators",
			auth.RoleAdmin.Can(auth.PermServerCommand), auth.RoleToolManager.Can(auth.PermServerCommand))
	}

	// A tool manager cannot add a stdio server, but can add an HTTP one.
	status, raw := tm.do(http.MethodPost, "/api/v1/servers", stdioBody("tm-stdio", secret))
	wantForbidden(t, "tool manager creates a stdio server", status, raw)
	if _, err := srv.Registry.GetServerByName(ctx, "tm-stdio"); err == nil {
		t.Error("the refused stdio server was stored")
	}
	var httpSv svServer
	tm.json(http.MethodPost, "/api/v1/servers", map[string]any{"name": "tm-http", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false}, http.StatusCreated, &httpSv)
	if httpSv.Type != registry.TypeStreamableHTTP {
		t.Errorf("tool manager's HTTP server: got type %q", httpSv.Type)
	}
	// ...nor turn an HTTP server into a stdio one.
	status, raw = tm.do(http.MethodPatch, "/api/v1/servers/"+httpSv.ID, map[string]any{"type": "stdio", "command": noSuchCmd, "url": ""})
	wantForbidden(t, "tool manager makes an HTTP server stdio", status, raw)

	// An administrator's stdio server.
	var sv svServer
	admin.json(http.MethodPost, "/api/v1/servers", stdioBody("adm-stdio", secret), http.StatusCreated, &sv)
	before := stdioStateOf(t, srv, sv.ID)
	if before.command != noSuchCmd || before.env["API_KEY"] != secret {
		t.Fatalf("admin's stdio server: got %+v", before)
	}

	// The tool manager may edit what does not change what it runs.
	var patched svServer
	tm.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"description": "by the tool manager"}, http.StatusOK, &patched)
	if patched.Description != "by the tool manager" {
		t.Errorf("PATCH description: got %q", patched.Description)
	}
	// Sending the stored command and args again is not a change.
	tm.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"description": "same command",
		"command": noSuchCmd, "args": []string{"serve", "--verbose"}}, http.StatusOK, nil)

	// ...but not what it runs.
	refused := []struct {
		name string
		body map[string]any
	}{
		{"command", map[string]any{"command": "/bin/sh"}},
		{"args", map[string]any{"args": []string{"-c", "id"}}},
		{"no args", map[string]any{"args": []string{}}},
		{"working_dir", map[string]any{"working_dir": "/"}},
		{"env value", map[string]any{"env": map[string]any{"API_KEY": "replaced"}}},
		{"env added", map[string]any{"env": map[string]any{"LD_PRELOAD": "/tmp/x.so"}}},
		{"env removed", map[string]any{"env": map[string]any{"API_KEY": nil}}},
		{"command with a description", map[string]any{"description": "innocent", "command": "/bin/sh"}},
	}
	for _, tc := range refused {
		status, raw := tm.do(http.MethodPatch, "/api/v1/servers/"+sv.ID, tc.body)
		wantForbidden(t, "tool manager PATCHes "+tc.name, status, raw)
	}
	if got := stdioStateOf(t, srv, sv.ID); !got.equal(before) {
		t.Errorf("after refused PATCHes: got %+v, want %+v", got, before)
	}
	if s, _ := srv.Registry.GetServer(ctx, sv.ID); s.Description != "same command" {
		t.Errorf("after refused PATCHes: got description %q, want the last allowed one", s.Description)
	}

	// Testing: a stdio registration of the tool manager's own is refused, and so is a
	// changed command on the stored server; the stored server as it is may be tried.
	status, raw = tm.do(http.MethodPost, "/api/v1/servers/test", stdioBody("tm-probe", secret))
	wantForbidden(t, "tool manager tests a new stdio server", status, raw)
	status, raw = tm.do(http.MethodPost, "/api/v1/servers/"+sv.ID+"/test", map[string]any{"command": "/bin/sh"})
	wantForbidden(t, "tool manager tests the stored stdio server with another command", status, raw)
	status, raw = tm.do(http.MethodPost, "/api/v1/servers/"+sv.ID+"/test", map[string]any{})
	if status == http.StatusForbidden {
		t.Errorf("tool manager tests the stored stdio server unchanged: got 403 %s", raw)
	} else if status != http.StatusOK {
		t.Errorf("tool manager tests the stored stdio server unchanged: got %d %s, want 200 with the result", status, raw)
	}

	// The tool manager may turn it into an HTTP server (dropping its command and env).
	var moved svServer
	tm.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"type": "streamable_http", "url": "http://127.0.0.1:9/mcp",
		"command": "", "args": []string{}, "working_dir": "", "env": map[string]any{"API_KEY": nil}}, http.StatusOK, &moved)
	if moved.Type != registry.TypeStreamableHTTP {
		t.Errorf("PATCH type: got %q, want streamable_http", moved.Type)
	}
	// ...and not back.
	status, raw = tm.do(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"type": "stdio", "command": noSuchCmd, "url": ""})
	wantForbidden(t, "tool manager turns the server back into stdio", status, raw)
	if s, _ := srv.Registry.GetServer(ctx, sv.ID); s.Type != registry.TypeStreamableHTTP || s.Command != "" {
		t.Errorf("after the refused switch back: got type %q command %q", s.Type, s.Command)
	}

	// An administrator can do all of it.
	var sv2 svServer
	admin.json(http.MethodPost, "/api/v1/servers", stdioBody("adm-stdio-2", secret), http.StatusCreated, &sv2)
	for _, tc := range refused {
		admin.json(http.MethodPatch, "/api/v1/servers/"+sv2.ID, tc.body, http.StatusOK, nil)
	}
	got := stdioStateOf(t, srv, sv2.ID)
	if got.command != "/bin/sh" || got.workingDir != "/" || len(got.args) != 0 || !slices.Equal(got.envNames, []string{"LD_PRELOAD"}) {
		t.Errorf("after the admin's PATCHes: got %+v", got)
	}
	admin.json(http.MethodPost, "/api/v1/servers/test", stdioBody("adm-probe", secret), http.StatusOK, nil)
	admin.json(http.MethodPost, "/api/v1/servers/"+sv2.ID+"/test", map[string]any{"command": noSuchCmd}, http.StatusOK, nil)
	admin.json(http.MethodPatch, "/api/v1/servers/"+httpSv.ID, map[string]any{"type": "stdio", "command": noSuchCmd, "url": ""}, http.StatusOK, nil)
}

// browserForm is what a browser submits for the server form in doc: no disabled
// controls, nothing inside a disabled fieldset, checkboxes only when checked.
func browserForm(t *testing.T, doc *goquery.Document) url.Values {
	t.Helper()
	form := doc.Find("form[data-testid=server-form]")
	if form.Length() != 1 {
		t.Fatal("no server form on the page")
	}
	v := url.Values{}
	form.Find("input, textarea, select").Each(func(_ int, s *goquery.Selection) {
		name := s.AttrOr("name", "")
		if name == "" {
			return
		}
		if _, ok := s.Attr("disabled"); ok || s.ParentsFiltered("fieldset[disabled]").Length() > 0 {
			return
		}
		switch goquery.NodeName(s) {
		case "textarea":
			v.Add(name, s.Text())
		case "select":
			opt := s.Find("option[selected]").First()
			if opt.Length() == 0 {
				opt = s.Find("option").First()
			}
			v.Add(name, opt.AttrOr("value", opt.Text()))
		default:
			switch s.AttrOr("type", "text") {
			case "checkbox", "radio":
				if _, ok := s.Attr("checked"); ok {
					v.Add(name, s.AttrOr("value", "on"))
				}
			case "submit", "button", "file":
			default:
				v.Add(name, s.AttrOr("value", ""))
			}
		}
	})
	return v
}

func TestServerCommandPermissionForms(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, tm, admin := f.srv, f.tmWeb, f.adminWb
	ctx := context.Background()
	const secret = "perm-form-secret-5582"

	// The add form: the tool manager is told, starts on HTTP, and cannot pick stdio.
	res := srv.Get(t, tm, "/servers/new")
	doc := page(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/servers/new as tool manager: got %d", res.StatusCode)
	}
	if doc.Find("[data-testid=command-locked]").Length() != 1 {
		t.Error("/servers/new as tool manager: no command-locked hint")
	}
	if v := doc.Find("#type option[selected]").AttrOr("value", ""); v != registry.TypeStreamableHTTP {
		t.Errorf("/servers/new as tool manager: type %q selected, want streamable_http", v)
	}
	if doc.Find("#type option[value=stdio][disabled]").Length() != 1 {
		t.Error("/servers/new as tool manager: the stdio option is not disabled")
	}
	if n := doc.Find("fieldset[data-for-type=stdio][data-locked][disabled]").Length(); n != 2 {
		t.Errorf("/servers/new as tool manager: %d locked stdio fieldsets, want 2", n)
	}
	res = srv.Get(t, admin, "/servers/new")
	doc = page(t, res)
	if doc.Find("[data-testid=command-locked]").Length() != 0 || doc.Find("[data-locked]").Length() != 0 ||
		doc.Find("fieldset[disabled]").Length() != 0 || doc.Find("#type option[disabled]").Length() != 0 {
		t.Error("/servers/new as admin: shows the command lock")
	}
	if v := doc.Find("#type option[selected]").AttrOr("value", ""); v != registry.TypeStdio {
		t.Errorf("/servers/new as admin: type %q selected, want stdio", v)
	}

	// An administrator's stdio server.
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "form-stdio", Type: registry.TypeStdio,
		Command: noSuchCmd, Args: []string{"serve", "--verbose"}, WorkingDir: "/tmp",
		Env: map[string]string{"API_KEY": secret, "LOG_LEVEL": "debug"}, Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	before := stdioStateOf(t, srv, sv.ID)

	// Its edit form, for the tool manager: the stdio fields are shown but locked.
	res = srv.Get(t, tm, "/servers/"+sv.ID+"/edit")
	html := bodyString(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("edit form as tool manager: got %d", res.StatusCode)
	}
	if strings.Contains(html, secret) {
		t.Fatal("the edit form holds a stored env value")
	}
	doc, err = goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		t.Fatal(err)
	}
	if n := doc.Find("fieldset[data-for-type=stdio][data-locked][disabled]").Length(); n != 2 {
		t.Errorf("edit form as tool manager: %d locked stdio fieldsets, want 2", n)
	}
	if doc.Find("[data-testid=command-locked]").Length() != 1 {
		t.Error("edit form as tool manager: no command-locked hint")
	}
	if v := doc.Find("#command").AttrOr("value", ""); v != noSuchCmd {
		t.Errorf("edit form as tool manager: command box shows %q, want the stored command", v)
	}
	if doc.Find("#type option[value=stdio][selected]").Length() != 1 || doc.Find("#type option[value=stdio][disabled]").Length() != 0 {
		t.Error("edit form as tool manager: stdio is not the selected, enabled type")
	}

	// Saving it as a browser does: the locked fields are not sent.
	form := browserForm(t, doc)
	for _, k := range []string{"command", "args", "working_dir", "env_name", "env_value"} {
		if form.Has(k) {
			t.Errorf("the browser would send %s from a locked fieldset", k)
		}
	}
	form.Set("description", "edited by the tool manager")
	res = srv.PostForm(t, tm, "/servers/"+sv.ID, form)
	body := bodyString(t, res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/servers/"+sv.ID {
		t.Fatalf("save the locked edit form: got %d to %q, want 303 to /servers/%s (%.300s)", res.StatusCode, res.Header.Get("Location"), sv.ID, body)
	}
	if got := stdioStateOf(t, srv, sv.ID); !got.equal(before) {
		t.Errorf("after saving the locked form: got %+v, want what it runs unchanged %+v", got, before)
	}
	if s, _ := srv.Registry.GetServer(ctx, sv.ID); s.Description != "edited by the tool manager" {
		t.Errorf("after saving the locked form: got description %q", s.Description)
	}

	// A forged form with the stdio fields filled in changes nothing of what it runs.
	forged := browserForm(t, doc)
	forged.Set("description", "forged")
	forged.Set("command", "/bin/sh")
	forged.Set("args", "-c\nid")
	forged["env_name"] = []string{"LD_PRELOAD"}
	forged["env_value"] = []string{"/tmp/x.so"}
	res = srv.PostForm(t, tm, "/servers/"+sv.ID, forged)
	res.Body.Close()
	if got := stdioStateOf(t, srv, sv.ID); !got.equal(before) {
		t.Errorf("after a forged form (status %d): got %+v, want what it runs unchanged %+v", res.StatusCode, got, before)
	}

	// Adding a stdio server from the form: 422 on command, nothing stored.
	sf := httpForm("tm-stdio-form", "")
	sf.Set("type", registry.TypeStdio)
	sf.Set("command", "/bin/sh")
	res = srv.PostForm(t, tm, "/servers", sf)
	doc = page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("create a stdio server from the form as tool manager: got %d, want 422", res.StatusCode)
	}
	if e := doc.Find("[data-testid=error-command]"); e.Length() != 1 || !strings.Contains(e.Text(), "administrators") {
		t.Errorf("create a stdio server from the form as tool manager: command error %q, want one about administrators", e.Text())
	}
	if _, err := srv.Registry.GetServerByName(ctx, "tm-stdio-form"); err == nil {
		t.Error("the refused stdio form was stored")
	}
	// Trying one from the form is refused the same way.
	res = svPost(t, srv, tm, "/servers/test", sf, map[string]string{"HX-Request": "true"})
	frag := bodyString(t, res)
	if !strings.Contains(frag, `data-testid="test-form-problems"`) || !strings.Contains(frag, "administrators") {
		t.Errorf("test a stdio form as tool manager: got %d %.300s, want the form's problem about administrators", res.StatusCode, frag)
	}

	// The tool manager may turn a stdio server into an HTTP one from the form: with the
	// stdio fieldsets left out, its command and env go.
	sv2, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "form-stdio-2", Type: registry.TypeStdio,
		Command: noSuchCmd, Env: map[string]string{"API_KEY": secret}, Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	form = browserForm(t, page(t, srv.Get(t, tm, "/servers/"+sv2.ID+"/edit")))
	form.Set("type", registry.TypeStreamableHTTP)
	form.Set("url", "http://127.0.0.1:9/mcp")
	res = srv.PostForm(t, tm, "/servers/"+sv2.ID, form)
	body = bodyString(t, res)
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("tool manager switches a stdio server to HTTP from the form: got %d, want 303 (%.300s)", res.StatusCode, body)
	}
	if got := stdioStateOf(t, srv, sv2.ID); got.typ != registry.TypeStreamableHTTP || got.command != "" || len(got.env) != 0 {
		t.Errorf("after the switch to HTTP: got %+v, want streamable_http without command or env", got)
	}

	// The administrator sees no lock, and can change the command from the form.
	res = srv.Get(t, admin, "/servers/"+sv.ID+"/edit")
	doc = page(t, res)
	if doc.Find("[data-locked]").Length() != 0 || doc.Find("[data-testid=command-locked]").Length() != 0 {
		t.Error("edit form as admin: shows the command lock")
	}
	form = browserForm(t, doc)
	if form.Get("command") != noSuchCmd || !slices.Equal(slices.DeleteFunc(slices.Clone(form["env_name"]), func(n string) bool { return n == "" }), []string{"API_KEY", "LOG_LEVEL"}) {
		t.Errorf("edit form as admin: command %q env names %v, want the stored ones", form.Get("command"), form["env_name"])
	}
	form.Set("command", noSuchCmd+"-2")
	res = srv.PostForm(t, admin, "/servers/"+sv.ID, form)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin saves a new command: got %d, want 303", res.StatusCode)
	}
	got := stdioStateOf(t, srv, sv.ID)
	if got.command != noSuchCmd+"-2" || got.env["API_KEY"] != secret || !slices.Equal(got.args, before.args) {
		t.Errorf("after the admin's save: got %+v", got)
	}
}

// importYAML is a native import file with the given server entries (YAML list items).
func importYAML(entries ...string) string {
	return "version: 1\nservers:\n" + strings.Join(entries, "")
}

func httpEntry(name, u string) string {
	return "  - name: " + name + "\n    type: streamable_http\n    url: " + u + "\n    enabled: false\n"
}

func stdioEntry(name, description string) string {
	return "  - name: " + name + "\n    type: stdio\n    description: " + description + "\n    command: " + noSuchCmd +
		"\n    args: [serve, --verbose]\n    working_dir: /tmp\n    env:\n      API_KEY: null\n    enabled: false\n"
}

// importPage is the import page's plan, as shown.
type importPage struct {
	status          int
	items           map[string]string // server name → action
	errors, message string
	notApplied      string // what the plan names as not applied
	content         string // the paste box, as given back
	sealed, digest  string
	prune, apply    bool
}

func readImportPage(t *testing.T, res *http.Response) importPage {
	t.Helper()
	doc := page(t, res)
	p := importPage{status: res.StatusCode, items: map[string]string{}}
	doc.Find("[data-testid=plan-item]").Each(func(_ int, s *goquery.Selection) {
		p.items[s.AttrOr("data-server", "")] = s.AttrOr("data-action", "")
	})
	p.errors = doc.Find("[data-testid=import-plan-errors]").Text()
	p.message = doc.Find("[data-testid=import-error]").Text()
	p.notApplied = doc.Find("[data-testid=import-not-applied]").Text()
	p.content = doc.Find("textarea#content").Text()
	form := doc.Find("form[action='/servers/import/apply']")
	p.sealed = form.Find("input[name=sealed]").AttrOr("value", "")
	p.digest = form.Find("input[name=digest]").AttrOr("value", "")
	p.prune = form.Find("input[name=prune]").AttrOr("value", "") == "true"
	p.apply = doc.Find("[data-testid=apply-import]").Length() == 1
	return p
}

func TestImportCommandPermission(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, admin, tm := f.srv, f.admin, f.tm
	ctx := context.Background()
	const secret = "perm-import-secret-6693"

	// The API: a file that creates a stdio server is refused, naming it; nothing applied.
	file := importYAML(httpEntry("imp-http-1", "http://127.0.0.1:9/mcp"), stdioEntry("imp-stdio", "new"))
	status, raw := tm.do(http.MethodPost, "/api/v1/servers/import?filename=servers.yaml", file)
	wantForbidden(t, "tool manager imports a stdio server", status, raw)
	if !strings.Contains(string(raw), "imp-stdio") {
		t.Errorf("refused import: %s does not name imp-stdio", raw)
	}
	if list, _, _ := srv.Registry.ListServers(ctx, registry.ListQuery{}); len(list) != 0 {
		t.Errorf("after the refused import: %d servers stored, want 0", len(list))
	}
	// ...and so is a dry run of it.
	status, raw = tm.do(http.MethodPost, "/api/v1/servers/import?filename=servers.yaml&dry_run=true", file)
	wantForbidden(t, "tool manager dry-runs a stdio import", status, raw)

	// HTTP servers only: applied.
	var out struct {
		DryRun bool `json:"dry_run"`
		Result struct {
			Created []struct {
				Name string `json:"name"`
			} `json:"created"`
		} `json:"result"`
	}
	tm.json(http.MethodPost, "/api/v1/servers/import?filename=servers.yaml",
		importYAML(httpEntry("imp-http-1", "http://127.0.0.1:9/mcp"), httpEntry("imp-http-2", "http://127.0.0.1:9/other")), http.StatusOK, &out)
	if out.DryRun || len(out.Result.Created) != 2 {
		t.Errorf("tool manager's HTTP import: got %+v, want 2 created", out)
	}
	for _, n := range []string{"imp-http-1", "imp-http-2"} {
		if _, err := srv.Registry.GetServerByName(ctx, n); err != nil {
			t.Errorf("after the HTTP import: %s: %v", n, err)
		}
	}

	// An administrator's stdio server: the tool manager may import a file that lists it
	// as it is (with another description), but not one that changes what it runs.
	var sv svServer
	admin.json(http.MethodPost, "/api/v1/servers", stdioBody("adm-stdio", secret), http.StatusCreated, &sv)
	before := stdioStateOf(t, srv, sv.ID)
	tm.json(http.MethodPost, "/api/v1/servers/import?filename=servers.yaml",
		importYAML(stdioEntry("adm-stdio", "described-by-import")), http.StatusOK, nil)
	if s, _ := srv.Registry.GetServer(ctx, sv.ID); s.Description != "described-by-import" {
		t.Errorf("tool manager's import of the stdio server as it is: got description %q", s.Description)
	}
	changed := strings.Replace(stdioEntry("adm-stdio", "x"), noSuchCmd, "/bin/sh", 1)
	status, raw = tm.do(http.MethodPost, "/api/v1/servers/import?filename=servers.yaml", importYAML(changed))
	wantForbidden(t, "tool manager imports another command for a stdio server", status, raw)
	if got := stdioStateOf(t, srv, sv.ID); !got.equal(before) {
		t.Errorf("after the refused import: got %+v, want %+v", got, before)
	}

	// The import page: a plan error about administrators, and no Apply button.
	res := srv.PostForm(t, f.tmWeb, "/servers/import", url.Values{"content": {file}, "filename": {"servers.yaml"}})
	p := readImportPage(t, res)
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.errors, "administrators") ||
		!strings.Contains(p.errors, "imp-stdio") || p.apply || p.sealed != "" || p.digest != "" {
		t.Errorf("import page as tool manager with a stdio server: got %+v, want 422 with a plan error about administrators naming imp-stdio and no Apply", p)
	}
	if p.content != file {
		t.Errorf("the pasted file is not given back with the errors: got %q", p.content)
	}
	// Text that is not YAML: the error, and the text back to be fixed.
	broken := "servers:\n  - name: [unclosed\n"
	p = readImportPage(t, srv.PostForm(t, f.tmWeb, "/servers/import", url.Values{"content": {broken}, "filename": {"servers.yaml"}}))
	if p.status != http.StatusUnprocessableEntity || p.content != broken {
		t.Errorf("a paste that is not YAML: got %+v, want 422 with the paste given back", p)
	}
	// The administrator can apply the same file.
	res = srv.PostForm(t, f.adminWb, "/servers/import", url.Values{"content": {file}, "filename": {"servers.yaml"}})
	p = readImportPage(t, res)
	if p.status != http.StatusOK || p.errors != "" || !p.apply || p.items["imp-stdio"] != registry.PlanCreate {
		t.Errorf("import page as admin with a stdio server: got %+v, want 200 with imp-stdio to create and Apply", p)
	}
	if p.content != "" {
		t.Errorf("a preview without errors keeps the paste box filled: %q", p.content)
	}
	status, raw = admin.do(http.MethodPost, "/api/v1/servers/import?filename=servers.yaml", file)
	if status != http.StatusOK {
		t.Errorf("admin imports a stdio server: got %d %s, want 200", status, raw)
	}
}

func TestImportApplyChecksDigest(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, admin, web := f.srv, f.admin, f.adminWb
	ctx := context.Background()
	keep := mustCreate(t, srv, disabledSpec("keep-me"))

	file := importYAML(httpEntry("dig-a", "http://127.0.0.1:9/a"), httpEntry("dig-b", "http://127.0.0.1:9/b"))
	preview := func(prune bool) importPage {
		t.Helper()
		form := url.Values{"content": {file}, "filename": {"servers.yaml"}}
		if prune {
			form.Set("prune", "true")
		}
		p := readImportPage(t, srv.PostForm(t, web, "/servers/import", form))
		if p.status != http.StatusOK || p.sealed == "" || p.digest == "" || !p.apply {
			t.Fatalf("preview: got %+v, want 200 with sealed, digest and Apply", p)
		}
		return p
	}
	apply := func(form url.Values) *http.Response {
		t.Helper()
		return srv.PostForm(t, web, "/servers/import/apply", form)
	}

	p := preview(false)
	if p.items["dig-a"] != registry.PlanCreate || p.items["dig-b"] != registry.PlanCreate || p.items["keep-me"] != registry.PlanKeep || p.prune {
		t.Fatalf("preview: got %+v, want dig-a and dig-b created, keep-me kept, no prune", p)
	}
	// The same file previewed again gives the same digest.
	if again := preview(false); again.digest != p.digest {
		t.Errorf("the same plan twice: digests %s and %s differ", p.digest, again.digest)
	}

	// Meanwhile someone registers dig-a elsewhere: the plan is now an update.
	var a svServer
	admin.json(http.MethodPost, "/api/v1/servers", map[string]any{"name": "dig-a", "type": "streamable_http",
		"url": "http://127.0.0.1:9/elsewhere", "enabled": false}, http.StatusCreated, &a)

	res := apply(url.Values{"sealed": {p.sealed}, "digest": {p.digest}})
	p2 := readImportPage(t, res)
	if p2.status != http.StatusConflict {
		t.Fatalf("apply a stale plan: got %d, want 409 (%+v)", p2.status, p2)
	}
	if p2.items["dig-a"] != registry.PlanUpdate || p2.items["dig-b"] != registry.PlanCreate || p2.message == "" ||
		p2.digest == "" || p2.digest == p.digest || p2.sealed == "" || !p2.apply {
		t.Errorf("the 409 page: got %+v, want the new plan (dig-a updated), a message, a new digest and Apply", p2)
	}
	if s, _ := srv.Registry.GetServer(ctx, a.ID); s.URL != "http://127.0.0.1:9/elsewhere" {
		t.Errorf("after the refused apply: dig-a's url is %q, want it unchanged", s.URL)
	}
	if _, err := srv.Registry.GetServerByName(ctx, "dig-b"); err == nil {
		t.Error("after the refused apply: dig-b was created")
	}
	// A missing digest is refused too.
	res = apply(url.Values{"sealed": {p2.sealed}})
	res.Body.Close()
	if res.StatusCode != http.StatusConflict {
		t.Errorf("apply without a digest: got %d, want 409", res.StatusCode)
	}

	// Applying the plan now shown works.
	res = apply(url.Values{"sealed": {p2.sealed}, "digest": {p2.digest}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/servers" {
		t.Fatalf("apply the current plan: got %d to %q, want 303 to /servers", res.StatusCode, res.Header.Get("Location"))
	}
	if s, _ := srv.Registry.GetServer(ctx, a.ID); s.URL != "http://127.0.0.1:9/a" {
		t.Errorf("after apply: dig-a's url is %q, want the file's", s.URL)
	}
	if _, err := srv.Registry.GetServerByName(ctx, "dig-b"); err != nil {
		t.Errorf("after apply: dig-b: %v", err)
	}

	// Adding prune to a plan previewed without it: 409, nothing deleted.
	p = preview(false)
	if p.items["keep-me"] != registry.PlanKeep {
		t.Fatalf("preview: keep-me is %q, want keep", p.items["keep-me"])
	}
	res = apply(url.Values{"sealed": {p.sealed}, "digest": {p.digest}, "prune": {"true"}})
	p3 := readImportPage(t, res)
	if p3.status != http.StatusConflict || p3.items["keep-me"] != registry.PlanDelete || !p3.prune || p3.digest == p.digest {
		t.Errorf("apply with prune added: got %+v, want 409 showing keep-me to delete, with prune and a new digest", p3)
	}
	if _, err := srv.Registry.GetServer(ctx, keep.ID); err != nil {
		t.Errorf("after apply with prune added: keep-me: %v, want it kept", err)
	}
	// And dropping prune from a plan previewed with it.
	p = preview(true)
	res = apply(url.Values{"sealed": {p.sealed}, "digest": {p.digest}})
	res.Body.Close()
	if res.StatusCode != http.StatusConflict {
		t.Errorf("apply with prune dropped: got %d, want 409", res.StatusCode)
	}
	if _, err := srv.Registry.GetServer(ctx, keep.ID); err != nil {
		t.Errorf("after apply with prune dropped: keep-me: %v", err)
	}
}

func TestTestConnectionAudited(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, admin, tm := f.srv, f.admin, f.tm
	ctx := context.Background()
	const (
		headerSecret = "audit-test-header-secret-1001"
		tokenSecret  = "audit-test-token-secret-2002"
		envSecret    = "audit-test-env-secret-3003"
	)
	dead := refusedAddress(t)

	type testResult struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	var r testResult
	admin.json(http.MethodPost, "/api/v1/servers/test", map[string]any{"name": "probe-http", "type": "streamable_http",
		"url": dead, "headers": map[string]string{"X-Key": headerSecret}, "auth_type": "bearer", "auth_token": tokenSecret,
		"timeout_ms": 2000}, http.StatusOK, &r)
	if r.OK {
		t.Errorf("test of a dead address: got ok")
	}
	admin.json(http.MethodPost, "/api/v1/servers/test", map[string]any{"name": "probe-stdio", "type": "stdio",
		"command": noSuchCmd, "args": []string{"--token", "${API_KEY}"}, "env": map[string]string{"API_KEY": envSecret},
		"timeout_ms": 2000}, http.StatusOK, &r)
	if r.OK {
		t.Errorf("test of a command that does not exist: got ok")
	}
	// A saved server, tried with its stored secrets.
	var sv svServer
	admin.json(http.MethodPost, "/api/v1/servers", map[string]any{"name": "saved-http", "type": "streamable_http",
		"url": dead, "headers": map[string]string{"X-Key": headerSecret}, "enabled": false}, http.StatusCreated, &sv)
	admin.json(http.MethodPost, "/api/v1/servers/"+sv.ID+"/test", map[string]any{"auth_type": "bearer", "auth_token": tokenSecret}, http.StatusOK, nil)
	// The form's Test connection is audited as well.
	tf := httpForm("probe-form", dead)
	tf["headers_name"], tf["headers_value"] = []string{"X-Key"}, []string{headerSecret}
	res := svPost(t, srv, f.adminWb, "/servers/test", tf, map[string]string{"HX-Request": "true"})
	res.Body.Close()
	// Refused and invalid attempts are not tried, and not audited as tried.
	status, _ := tm.do(http.MethodPost, "/api/v1/servers/test", stdioBody("probe-refused", envSecret))
	if status != http.StatusForbidden {
		t.Errorf("tool manager's stdio test: got %d, want 403", status)
	}
	admin.json(http.MethodPost, "/api/v1/servers/test", map[string]any{"name": "probe-invalid", "type": "streamable_http"}, http.StatusBadRequest, nil)

	rows, err := srv.Pool.Query(ctx, `SELECT actor_name, target_type, target_name, COALESCE(target_id::text, ''), payload::text
		FROM audit_log WHERE action = 'server.test' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ actor, ttype, name, id, payload string }
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.actor, &r.ttype, &r.name, &r.id, &r.payload); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, id string
		payload  []string
	}{
		{"probe-http", "", []string{`"type":"streamable_http"`, `"X-Key"`, `"Authorization"`, `"saved":false`}},
		{"probe-stdio", "", []string{noSuchCmd, `"API_KEY"`, `${API_KEY}`, `"saved":false`}},
		{"saved-http", sv.ID, []string{`"X-Key"`, `"saved":true`}},
		{"probe-form", "", []string{`"X-Key"`}},
	}
	if len(got) != len(want) {
		t.Fatalf("server.test audit rows: got %d %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.actor != "admin" || g.ttype != "server" || g.name != w.name || g.id != w.id {
			t.Errorf("server.test row %d: got by %s on %s %q id %q, want by admin on server %q id %q", i, g.actor, g.ttype, g.name, g.id, w.name, w.id)
		}
		for _, p := range w.payload {
			if !strings.Contains(g.payload, p) {
				t.Errorf("server.test row %d (%s): payload %s lacks %s", i, w.name, g.payload, p)
			}
		}
		for _, s := range []string{headerSecret, tokenSecret, envSecret} {
			if strings.Contains(g.payload, s) {
				t.Errorf("server.test row %d (%s): payload %s holds a secret value", i, w.name, g.payload)
			}
		}
	}
}

// A tool manager can save an edit of a trusted server's other fields from the form: the
// form does not count as changing its credentials (an empty token for a server without
// authentication), while a change of where it points is still refused.
func TestTrustedServersFormEditByToolManager(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, tm := f.srv, f.tmWeb
	ctx := context.Background()
	for _, sp := range []registry.Spec{
		{Name: "trusted-stdio", Type: registry.TypeStdio, Command: noSuchCmd, Env: map[string]string{"API_KEY": "k1"}, Trusted: true},
		{Name: "trusted-http", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:9/mcp", Trusted: true},
		{Name: "trusted-tpl", Type: registry.TypeTemplate, Trusted: true,
			Template: "tools:\n  - name: weather\n    input_schema: {type: object, properties: {city: {type: string}}}\n    http: {url: \"https://api.example.com/w/{city}\"}\n"},
	} {
		sv, err := srv.Registry.CreateServer(ctx, audit.System, sp)
		if err != nil {
			t.Fatal(err)
		}
		form := browserForm(t, page(t, srv.Get(t, tm, "/servers/"+sv.ID+"/edit")))
		form.Set("description", "edited by the tool manager")
		res := srv.PostForm(t, tm, "/servers/"+sv.ID, form)
		body := bodyString(t, res)
		if res.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: save a new description as tool manager: got %d, want 303 (%.400s)", sp.Name, res.StatusCode, body)
			continue
		}
		got, err := srv.Registry.GetServer(ctx, sv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Description != "edited by the tool manager" || !got.Trusted || got.Command != sv.Command || got.URL != sv.URL ||
			got.Template != sv.Template || !slices.Equal(got.EnvNames, sv.EnvNames) {
			t.Errorf("%s after the save: %+v", sp.Name, got)
		}
	}
	// Pointing the trusted HTTP server elsewhere stays an administrator's call.
	sv, err := srv.Registry.GetServerByName(ctx, "trusted-http")
	if err != nil {
		t.Fatal(err)
	}
	form := browserForm(t, page(t, srv.Get(t, tm, "/servers/"+sv.ID+"/edit")))
	form.Set("url", "http://127.0.0.1:10/mcp")
	res := srv.PostForm(t, tm, "/servers/"+sv.ID, form)
	body := bodyString(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "only administrators can change what a trusted server runs") {
		t.Errorf("move the trusted server as tool manager: got %d, want 422 (%.400s)", res.StatusCode, body)
	}
}
