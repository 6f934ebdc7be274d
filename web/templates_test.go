package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// tplYAML is a template with a command tool (stdin), a command tool with an argument,
// and an HTTP tool to base, all read-only.
func tplYAML(base, countDescription string) string {
	return fmt.Sprintf(`tools:
  - name: word_count
    description: %s
    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    annotations: {readOnlyHint: true}
    command: {argv: [wc, -w], stdin: "{text}", timeout: 10s}
    parse_response: count
  - name: echo
    input_schema: {type: object, properties: {v: {type: string}}, required: [v]}
    annotations: {readOnlyHint: true}
    command: {argv: [printf, "%%s", "{v}"]}
  - name: lookup
    input_schema: {type: object, properties: {city: {type: string}}, required: [city]}
    annotations: {readOnlyHint: true}
    http: {url: "%s/weather/{city}?units=metric", headers: {Accept: application/json}}
    parse_response: temp
response_parsers:
  count: {type: regex, pattern: "(\\d+)", group: 1}
  temp:  {type: json, path: "$.temp"}
`, countDescription, base)
}

type tplTool struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Status         string `json:"status"`
	Version        string `json:"version"`
	DefinitionHash string `json:"definition_hash"`
	Available      bool   `json:"available"`
}

func (a svClient) tools(id string) map[string]tplTool {
	a.t.Helper()
	var out struct {
		Tools []tplTool `json:"tools"`
	}
	a.json(http.MethodGet, "/api/v1/servers/"+id+"/tools", nil, http.StatusOK, &out)
	m := map[string]tplTool{}
	for _, tl := range out.Tools {
		m[tl.Name] = tl
	}
	return m
}

func (a svClient) callText(tool string, args map[string]any) (string, bool) {
	a.t.Helper()
	var res struct {
		Content []struct{ Type, Text string } `json:"content"`
		IsError bool                          `json:"is_error"`
	}
	a.json(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": tool, "arguments": args}, http.StatusOK, &res)
	if len(res.Content) != 1 {
		a.t.Fatalf("%s: got %d content items", tool, len(res.Content))
	}
	return res.Content[0].Text, res.IsError
}

// A template server registered through the API is discovered and called through the
// router like any other; its arguments stay data all the way; an edit of its YAML
// re-discovers, and the changed tool gets a new version.
func TestTemplateServerAPI(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"temp": 21.5}`)
	}))
	defer up.Close()
	srv := webtest.Start(t, nil)
	api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}

	// Problems with the YAML come back under "template", each with its line.
	bad := strings.Replace(tplYAML(up.URL, "Count words"), `stdin: "{text}"`, `stdin: "{txt}"`, 1)
	status, raw := api.do(http.MethodPost, "/api/v1/servers", map[string]any{"name": "tpl", "type": "template", "template": bad})
	if status != http.StatusBadRequest || !strings.Contains(string(raw), `"path":"template","message":"line 6: unknown placeholder {txt}; input_schema has text"`) {
		t.Fatalf("bad template: got %d %s", status, raw)
	}

	var sv svServer
	api.json(http.MethodPost, "/api/v1/servers", map[string]any{"name": "tpl", "type": "template", "trusted": true,
		"template": tplYAML(up.URL, "Count words")}, http.StatusCreated, &sv)
	if sv.Type != registry.TypeTemplate {
		t.Fatalf("created: %+v", sv)
	}
	api.waitServer(sv.ID, "connected with 3 tools", connectedWith(3))
	for _, n := range []string{"word_count", "echo", "lookup"} {
		srv.App.Enable(t, "tpl__"+n)
	}
	if text, isErr := api.callText("tpl__word_count", map[string]any{"text": "one two three four"}); isErr || text != "4" {
		t.Fatalf("word_count: %q (error %v)", text, isErr)
	}
	for _, v := range []string{"$(id)", "`id`; rm -rf /", "a | b && c", "line\nbreak"} {
		if text, isErr := api.callText("tpl__echo", map[string]any{"v": v}); isErr || text != v {
			t.Errorf("echo %q: got %q (error %v)", v, text, isErr)
		}
	}
	if text, isErr := api.callText("tpl__echo", map[string]any{"v": "-n"}); !isErr || !strings.Contains(text, `argument "v" starts with '-'`) {
		t.Errorf("echo -n: got %q (error %v)", text, isErr)
	}
	if text, isErr := api.callText("tpl__lookup", map[string]any{"city": "a/b?x=1#y"}); isErr || text != "21.5" {
		t.Fatalf("lookup: %q (error %v)", text, isErr)
	}
	if text, isErr := api.callText("tpl__lookup", map[string]any{"city": "../admin"}); !isErr || !strings.Contains(text, `".."`) {
		t.Errorf("lookup of ../admin: %q (error %v); want it refused", text, isErr)
	}
	mu.Lock()
	if want := []string{"/weather/a%2Fb%3Fx=1%23y?units=metric"}; !slices.Equal(paths, want) {
		t.Errorf("the upstream saw %q, want %q", paths, want)
	}
	mu.Unlock()
	// The server page and the API say how its commands run.
	var live struct {
		Live struct {
			Confinement string `json:"confinement"`
		} `json:"live"`
		Template string `json:"template"`
	}
	api.json(http.MethodGet, "/api/v1/servers/"+sv.ID, nil, http.StatusOK, &live)
	if live.Live.Confinement == "" || live.Template != tplYAML(up.URL, "Count words") {
		t.Fatalf("GET server: %+v", live)
	}

	// An edit of the YAML re-discovers: a changed tool gets a new version, a new tool
	// appears, the others stay as they were.
	before := api.tools(sv.ID)
	edited := tplYAML(up.URL, "Count the words in a text") + `  # and one more
`
	edited = strings.Replace(edited, "response_parsers:", `  - name: lines
    input_schema: {type: object, properties: {text: {type: string}}}
    command: {argv: [wc, -l], stdin: "{text}"}
response_parsers:`, 1)
	api.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"template": edited}, http.StatusOK, nil)
	api.waitServer(sv.ID, "connected with 4 tools", connectedWith(4))
	var after map[string]tplTool
	webtest.WaitFor(t, svWait, func() bool {
		after = api.tools(sv.ID)
		return after["word_count"].DefinitionHash != before["word_count"].DefinitionHash
	},
		"word_count kept its definition after the edit")
	// Pinned as on any server: the changed tool waits for review.
	if before["word_count"].Status != "enabled" || after["word_count"].Status == "enabled" {
		t.Errorf("word_count status: before %q, after %q", before["word_count"].Status, after["word_count"].Status)
	}
	if after["word_count"].Version == before["word_count"].Version || after["word_count"].ID != before["word_count"].ID {
		t.Errorf("word_count: before %+v, after %+v", before["word_count"], after["word_count"])
	}
	if after["echo"].DefinitionHash != before["echo"].DefinitionHash || after["echo"].Status != before["echo"].Status {
		t.Errorf("echo changed: before %+v, after %+v", before["echo"], after["echo"])
	}
	if _, ok := after["lines"]; !ok {
		t.Errorf("no new tool: %v", after)
	}
	// The echo tool kept its approval and still runs, through the new session.
	if text, isErr := api.callText("tpl__echo", map[string]any{"v": "still here"}); isErr || text != "still here" {
		t.Errorf("echo after the edit: %q (error %v)", text, isErr)
	}

	// The export holds the YAML.
	res := srv.Get(t, api.clientOrToken(), "/api/v1/servers/export")
	if body := bodyString(t, res); !strings.Contains(body, "type: template\n    template: |\n      tools:\n") {
		t.Errorf("export:\n%s", body)
	}
}

// clientOrToken is a client sending the API token.
func (a svClient) clientOrToken() *http.Client {
	return &http.Client{Transport: bearerTransport(a.bearer)}
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// Templates whose tools run commands put programs on the host: only administrators
// register or change them; a tool manager may register HTTP-only templates.
func TestTemplateServerPermissions(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "tm", auth.RoleToolManager, "tool-manager-password-1")
	tm := svClient{t: t, srv: srv, bearer: svToken(t, srv, "tm")}
	withCommand := "tools:\n  - name: t\n    command: {argv: [id]}\n"
	httpOnly := "tools:\n  - name: h\n    http: {url: \"http://127.0.0.1:9/x\"}\n"
	api := tm.api()
	api.Error(http.MethodPost, "/api/v1/servers", map[string]any{"name": "cmd", "type": "template", "template": withCommand, "enabled": false},
		http.StatusForbidden, "forbidden")
	var sv svServer
	tm.json(http.MethodPost, "/api/v1/servers", map[string]any{"name": "web", "type": "template", "template": httpOnly, "enabled": false},
		http.StatusCreated, &sv)
	api.Error(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"template": withCommand}, http.StatusForbidden, "forbidden")
	tm.json(http.MethodPatch, "/api/v1/servers/"+sv.ID, map[string]any{"template": strings.Replace(httpOnly, "/x", "/y", 1)}, http.StatusOK, nil)

	// In the form, the refusal shows at the YAML box.
	c := srv.Login(t, "tm", "tool-manager-password-1")
	f := httpForm("cmd", "")
	f.Set("type", registry.TypeTemplate)
	f.Set("template", withCommand)
	res := srv.PostForm(t, c, "/servers", f)
	doc := page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(doc.Find("[data-testid=error-template]").Text(), "only administrators") {
		t.Fatalf("form: got %d, template error %q", res.StatusCode, doc.Find("[data-testid=error-template]").Text())
	}
}

// The add form has a YAML box for template servers; a template with problems comes
// back with each problem at its line; a good one is saved and shown on the server page.
func TestTemplateServerForm(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	doc := page(t, srv.Get(t, admin, "/servers/new"))
	if doc.Find("fieldset[data-for-type=template] textarea[name=template]").Length() != 1 ||
		doc.Find("select[name=type] option[value=template]").Length() != 1 {
		t.Fatal("the add form has no template box or type")
	}
	form := func(name, yaml string) url.Values {
		f := httpForm(name, "")
		f.Set("type", registry.TypeTemplate)
		f.Set("template", yaml)
		f.Set("enabled", "")
		return f
	}
	bad := "tools:\r\n  - name: t\r\n    input_schema: {type: object, properties: {a: {}}}\r\n    command: {argv: [echo, \"{b}\", \"{c}\"]}\r\n"
	res := srv.PostForm(t, admin, "/servers", form("tpl", bad))
	doc = page(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad template: got %d", res.StatusCode)
	}
	var lines []string
	doc.Find("[data-testid=error-template] li").Each(func(_ int, s *goquery.Selection) { lines = append(lines, s.Text()) })
	if want := []string{"line 4: unknown placeholder {b}; input_schema has a", "line 4: unknown placeholder {c}; input_schema has a"}; !slices.Equal(lines, want) {
		t.Fatalf("errors: got %q, want %q", lines, want)
	}
	if got := doc.Find("textarea[name=template]").Text(); got != strings.ReplaceAll(bad, "\r\n", "\n") {
		t.Fatalf("the box holds %q, want what was typed", got)
	}

	good := "\n# starts with a blank line\ntools:\n  - name: t\n    input_schema: {type: object, properties: {a: {}}}\n    command: {argv: [echo, \"{a}\"]}\n"
	// Test connection serves the template without saving it.
	res = srv.PostFormHeaders(t, admin, "/servers/test", form("tpl", good), map[string]string{"HX-Request": "true"})
	frag := settleTest(t, srv, admin, bodyString(t, res)) // the test runs in the background
	if doc, err := goquery.NewDocumentFromReader(strings.NewReader(frag)); err != nil || doc.Find("[data-testid=test-ok]").Length() != 1 ||
		!strings.Contains(doc.Text(), "t") {
		t.Fatalf("test connection: %v %s", err, frag)
	}
	res = srv.PostForm(t, admin, "/servers", form("tpl", strings.ReplaceAll(good, "\n", "\r\n")))
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("good template: got %d", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	doc = page(t, srv.Get(t, admin, loc))
	if got := doc.Find("[data-testid=server-template]").Text(); got != good {
		t.Fatalf("server page shows %q", got)
	}
	sv, err := srv.Registry.GetServerByName(t.Context(), "tpl")
	if err != nil || sv.Template != good {
		t.Fatalf("stored %q, %v", sv.Template, err)
	}
	doc = page(t, srv.Get(t, admin, loc+"/edit"))
	if got := doc.Find("textarea[name=template]").Text(); got != good {
		t.Fatalf("edit form holds %q", got)
	}
}
