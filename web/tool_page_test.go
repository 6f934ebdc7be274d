package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// The tool page, /tools/:id, against tools discovered from the in-repo MCP test server.

// tdConfigSchema is the input schema of the "configurable" tool: one parameter of every
// form input kind, a secret one and a nested object.
const tdConfigSchema = `{"type":"object","properties":{
	"api_key":{"type":"string","description":"The key of the weather service."},
	"count":{"type":"integer","minimum":1,"maximum":10,"description":"How many days to forecast."},
	"units":{"type":"string","enum":["metric","imperial"],"description":"Units of the forecast."},
	"verbose":{"type":"boolean","description":"Whether to explain the forecast."},
	"ratio":{"type":"number","description":"A scale factor."},
	"options":{"type":"object","description":"Extra options.","properties":{"depth":{"type":"integer","description":"How deep to look."}}},
	"location":{"type":"string","description":"Where to forecast for."}},
	"required":["location"]}`

// tdSneakyDescription is untrusted text that must never reach the page as markup.
const tdSneakyDescription = "Reads notes.\n<script>alert('owned')</script>\n<b>bold</b> & more"

// tdEnv is a running Toolwarden with the test server "td" registered and discovered.
type tdEnv struct {
	srv   *webtest.Server
	up    *mcptest.HTTPServer
	admin *http.Client
	sv    string            // server id
	ids   map[string]string // tool name → id
}

func tdStart(t *testing.T) *tdEnv {
	t.Helper()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "td"})
	up.Server().SetTool(mcptest.ToolSpec{Name: "configurable", Title: "Weather forecast", Description: "Forecasts the weather.",
		InputSchema: json.RawMessage(tdConfigSchema)})
	up.Server().SetTool(mcptest.ToolSpec{Name: "sneaky", Description: tdSneakyDescription})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := svClient{t: t, srv: srv, c: admin}
	var created svServer
	api.json(http.MethodPost, "/api/v1/servers", map[string]any{"name": "td", "type": "streamable_http",
		"url": up.URL(), "enabled": true, "trusted": true}, http.StatusCreated, &created)
	api.waitServer(created.ID, "connected with 7 tools", connectedWith(7))
	page, err := srv.Tools.List(context.Background(), tools.Query{Server: "td", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	e := &tdEnv{srv: srv, up: up, admin: admin, sv: created.ID, ids: map[string]string{}}
	for _, it := range page.Items {
		e.ids[it.Name] = it.ID
	}
	for _, name := range []string{"echo", "configurable", "sneaky"} {
		if e.ids[name] == "" {
			t.Fatalf("tool %s was not discovered (got %v)", name, e.ids)
		}
	}
	return e
}

// get fetches a page as admin and parses it, checking the status.
func (e *tdEnv) get(t *testing.T, c *http.Client, path string, want int) (*goquery.Document, string) {
	t.Helper()
	if c == nil {
		c = e.admin
	}
	res := e.srv.Get(t, c, path)
	html := bodyString(t, res)
	if res.StatusCode != want {
		t.Fatalf("GET %s: got %d, want %d: %.400s", path, res.StatusCode, want, html)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		t.Fatal(err)
	}
	return doc, html
}

// post posts a form as admin and returns the response (body unread).
func (e *tdEnv) post(t *testing.T, path string, form url.Values) *http.Response {
	t.Helper()
	return e.srv.PostForm(t, e.admin, path, form)
}

func (e *tdEnv) item(t *testing.T, name string) tools.Item {
	t.Helper()
	it, err := e.srv.Tools.Get(context.Background(), e.ids[name])
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func TestToolPageTabs(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["configurable"]

	for _, tab := range []string{"overview", "schema", "configuration", "usage", "logs", "history"} {
		doc, _ := e.get(t, nil, "/tools/"+id+"?tab="+tab, http.StatusOK)
		head := doc.Find("#tool-head-" + id)
		if head.Length() != 1 || head.AttrOr("data-testid", "") != "tool-head" {
			t.Errorf("%s: got %d heads with id tool-head-%s, want 1", tab, head.Length(), id)
		}
		if got := head.Find("[data-testid=tool-qualified-name]").Text(); got != "td__configurable" {
			t.Errorf("%s: head names %q, want td__configurable", tab, got)
		}
		// Only the selected tab's panel is rendered, and the tab says it is selected.
		if doc.Find("[role=tabpanel]").Length() != 1 || doc.Find("[data-testid=panel-"+tab+"]").Length() != 1 {
			t.Errorf("%s: want exactly the %s panel", tab, tab)
		}
		var selected []string
		doc.Find("[role=tablist] [role=tab]").Each(func(_ int, s *goquery.Selection) {
			if s.AttrOr("aria-selected", "") == "true" {
				selected = append(selected, s.AttrOr("id", ""))
			}
			if s.AttrOr("href", "") == "" {
				t.Errorf("%s: tab %s is not a link", tab, s.Text())
			}
		})
		if !slices.Equal(selected, []string{"tab-" + tab}) {
			t.Errorf("%s: selected tabs %v, want [tab-%s]", tab, selected, tab)
		}
		// (Approvers' pages also follow "executions", for the navigation's count.)
		if topics := strings.Split(doc.Find("[data-topics]").AttrOr("data-topics", ""), ","); topics[0] != "tools" {
			t.Errorf("%s: the page follows %v, not the tools topic first", tab, topics)
		}
	}

	// Overview: facts, annotations in words, risk and the validation result.
	doc, _ := e.get(t, nil, "/tools/"+e.ids["echo"], http.StatusOK)
	if got := doc.Find("[data-testid=definition-hash]").Text(); got != e.item(t, "echo").DefinitionHash {
		t.Errorf("overview: hash %q, want the pinned one", got)
	}
	if txt := doc.Find("[data-testid=annotations]").Text(); !strings.Contains(txt, "Yes: it only reads") {
		t.Errorf("overview: annotations %q do not say read-only in words", txt)
	}
	if got := doc.Find("#tool-head-"+e.ids["echo"]+" [data-testid=risk-badge]").AttrOr("data-risk", ""); got != "low" {
		t.Errorf("overview: echo on a trusted server is %q risk, want low", got)
	}
	if doc.Find("[data-testid=no-findings], [data-testid=findings]").Length() != 1 {
		t.Error("overview: no validation result shown")
	}
	// The test panel has no route yet (issue #5): no Test control points at nothing.
	if doc.Find("[data-testid=tool-test-link]").Length() != 0 {
		t.Error("a Test link is shown, but there is no test panel yet")
	}

	// Schema: the readable table with the nested parameter indented, raw JSON, docs, example.
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=schema", http.StatusOK)
	rows := map[string]string{}
	doc.Find("[data-testid=param]").Each(func(_ int, s *goquery.Selection) {
		rows[s.AttrOr("data-param", "")] = s.AttrOr("data-depth", "")
	})
	for arg, depth := range map[string]string{"api_key": "0", "count": "0", "options": "0", "options.depth": "1", "location": "0"} {
		if rows[arg] != depth {
			t.Errorf("schema: parameter %s at depth %q, want %q (rows %v)", arg, rows[arg], depth, rows)
		}
	}
	if txt := doc.Find("[data-param=count]").Text(); !strings.Contains(txt, "≥ 1") || !strings.Contains(txt, "≤ 10") {
		t.Errorf("schema: count row %q does not show its bounds", txt)
	}
	if txt := doc.Find("[data-param=location]").Text(); !strings.Contains(txt, "required") {
		t.Errorf("schema: location row %q is not marked required", txt)
	}
	var example struct {
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(doc.Find("[data-testid=example-call]").Text()), &example); err != nil ||
		example.Tool != "td__configurable" || example.Arguments["location"] == nil {
		t.Errorf("schema: example call %+v (%v), want td__configurable with a location", example, err)
	}
	if !strings.Contains(doc.Find("[data-testid=input-schema]").Text(), `"api_key": {`) {
		t.Error("schema: the raw input schema is not pretty-printed")
	}
	if md := doc.Find("[data-testid=tool-markdown]").Text(); !strings.Contains(md, "# Weather forecast") || !strings.Contains(md, "| `count` |") {
		t.Errorf("schema: markdown %q lacks the title or the parameter table", md)
	}
}

func TestToolPageEscapesUntrustedText(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["sneaky"]
	for _, tab := range []string{"overview", "schema"} {
		doc, html := e.get(t, nil, "/tools/"+id+"?tab="+tab, http.StatusOK)
		if strings.Contains(html, "<script>alert") || strings.Contains(html, "<b>bold</b>") {
			t.Errorf("%s: the description reached the page as markup", tab)
		}
		if !strings.Contains(html, "&lt;script&gt;alert(") {
			t.Errorf("%s: the description is not shown escaped", tab)
		}
		if tab == "overview" {
			if got := doc.Find("[data-testid=tool-description]").Text(); got != tdSneakyDescription {
				t.Errorf("overview: description %q, want it as written (%q)", got, tdSneakyDescription)
			}
		} else if md := doc.Find("pre[data-testid=tool-markdown]").Text(); !strings.Contains(md, "<script>alert('owned')</script>") {
			t.Errorf("schema: the markdown %q does not show the description as text", md)
		}
	}
}

func TestToolConfigure(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	ctx := context.Background()
	id := e.ids["configurable"]
	const secret = "wx-secret-7f3a9c-do-not-show"
	base := func() url.Values {
		return url.Values{
			"param.api_key.mode": {"fixed"}, "param.api_key.value": {secret},
			"param.count.mode": {"default"}, "param.count.value": {"3"},
			"param.units.mode": {"default"}, "param.units.value": {"metric"},
			"param.verbose.mode": {"none"}, "param.verbose.value": {""},
			"param.ratio.mode": {"none"}, "param.location.mode": {"none"}, "param.options.mode": {"none"},
			"risk": {""}, "timeout_ms": {""}, "category": {""}, "tags": {"weather, daily"}, "reason": {"first setup"},
		}
	}

	// The form is generated from the schema: an input per kind, the secret as a password.
	doc, _ := e.get(t, nil, "/tools/"+id+"?tab=configuration", http.StatusOK)
	kinds := map[string]string{}
	doc.Find("[data-testid=config-param]").Each(func(_ int, s *goquery.Selection) {
		in := s.Find("[data-testid=param-value]")
		kinds[s.AttrOr("data-param", "")] = goquery.NodeName(in) + ":" + in.AttrOr("type", "") + ":" + in.AttrOr("step", "")
	})
	want := map[string]string{"api_key": "input:password:", "count": "input:number:1", "units": "select::",
		"verbose": "select::", "ratio": "input:number:any", "options": "textarea::", "location": "input:text:"}
	for name, k := range want {
		if kinds[name] != k {
			t.Errorf("configuration form: %s rendered as %q, want %q", name, kinds[name], k)
		}
	}

	// Bad input: 422, each error next to its field, nothing saved.
	bad := []struct {
		name  string
		edit  func(url.Values)
		field string
	}{
		{"count not a number", func(f url.Values) { f.Set("param.count.value", "many") }, "params.count"},
		{"count out of range", func(f url.Values) { f.Set("param.count.value", "99") }, "params.count"},
		{"bad risk", func(f url.Values) { f.Set("risk", "extreme") }, "risk"},
		{"timeout not a number", func(f url.Values) { f.Set("timeout_ms", "soon") }, "timeout_ms"},
		{"timeout too short", func(f url.Values) { f.Set("timeout_ms", "5") }, "timeout_ms"},
		{"unknown category", func(f url.Values) { f.Set("category", "nope") }, "category"},
		{"bad tag", func(f url.Values) { f.Set("tags", "Not A Tag!") }, "tags"},
	}
	for _, tc := range bad {
		f := base()
		tc.edit(f)
		res := e.post(t, "/tools/"+id+"/configure", f)
		html := bodyString(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: got %d, want 422", tc.name, res.StatusCode)
			continue
		}
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(html))
		if doc.Find("[data-testid=panel-configuration]").Length() != 1 {
			t.Errorf("%s: the configuration tab is not shown again", tc.name)
		}
		errEl := doc.Find(`[data-testid="error-` + tc.field + `"]`)
		if errEl.Length() != 1 {
			t.Errorf("%s: no error shown for %s", tc.name, tc.field)
		}
		if strings.HasPrefix(tc.field, "params.") {
			name := strings.TrimPrefix(tc.field, "params.")
			if errEl.Closest(`[data-testid=config-param]`).AttrOr("data-param", "") != name {
				t.Errorf("%s: the error is not next to %s", tc.name, name)
			}
		}
		if strings.Contains(html, secret) {
			t.Errorf("%s: the typed secret came back in the page", tc.name)
		}
		if got := doc.Find(`[data-param=units] select[data-testid=param-value] option[selected]`).AttrOr("value", ""); got != "metric" {
			t.Errorf("%s: the form lost what was typed (units %q)", tc.name, got)
		}
		if it := e.item(t, "configurable"); it.ConfigVersion != 0 {
			t.Fatalf("%s: saved version %d, want nothing saved", tc.name, it.ConfigVersion)
		}
	}
	// A credential typed into an ordinary parameter is not shown back either.
	leak := base()
	const token = "ghp_R4nd0mT0k3nV4lu3Th4tL00ksR34l1234567"
	leak.Set("param.location.mode", "default")
	leak.Set("param.location.value", token)
	leak.Set("param.count.value", "many")
	if html := bodyString(t, e.post(t, "/tools/"+id+"/configure", leak)); strings.Contains(html, token) {
		t.Error("a token typed into an ordinary parameter came back in the page after an error")
	}

	// A good form: saved as version 1, a flash, and the secret never in the page.
	res := e.post(t, "/tools/"+id+"/configure", base())
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/tools/"+id+"?tab=configuration" {
		t.Fatalf("save: got %d to %q, want 303 to the configuration tab", res.StatusCode, res.Header.Get("Location"))
	}
	it := e.item(t, "configurable")
	if it.ConfigVersion != 1 || !slices.Equal(it.Tags, []string{"daily", "weather"}) || it.Status != "configured" {
		t.Fatalf("after save: version %d tags %v status %s, want 1, [daily weather], configured", it.ConfigVersion, it.Tags, it.Status)
	}
	cfg, err := e.srv.Tools.Configuration(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := e.srv.Tools.Resolve(id, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(resolved.Fixed["api_key"]) != `"`+secret+`"` || string(resolved.Defaults["count"]) != "3" {
		t.Fatalf("stored configuration: fixed %s defaults %s", resolved.Fixed, resolved.Defaults)
	}
	doc, html := e.get(t, nil, "/tools/"+id+"?tab=configuration", http.StatusOK)
	if strings.Contains(html, secret) {
		t.Fatal("the configuration tab shows the stored secret")
	}
	if !strings.Contains(doc.Find("[data-testid=flash]").Text(), "version 1") {
		t.Errorf("flash %q, want it to name version 1", doc.Find("[data-testid=flash]").Text())
	}
	key := doc.Find("[data-param=api_key]")
	if key.Find("[data-testid=secret-stored]").Length() != 1 || key.Find("input").AttrOr("value", "") != "" {
		t.Error("the secret parameter does not say stored, or its box is not empty")
	}
	if got := doc.Find("[data-param=count] input").AttrOr("value", ""); got != "3" {
		t.Errorf("count box holds %q, want 3", got)
	}
	if got := doc.Find("[data-param=api_key] select option[selected]").AttrOr("value", ""); got != "fixed" {
		t.Errorf("api_key mode %q, want fixed", got)
	}
	if n := doc.Find("[data-testid=config-version-row]").Length(); n != 1 {
		t.Errorf("configuration history: %d rows, want 1", n)
	}
	if txt := doc.Find("[data-testid=config-version-row]").Text(); !strings.Contains(txt, "admin") || !strings.Contains(txt, "first setup") {
		t.Errorf("configuration history row %q, want the actor and the reason", txt)
	}

	// Saving with the secret box blank keeps the stored value; a timeout is saved.
	f := base()
	f.Set("param.api_key.value", "")
	f.Set("timeout_ms", "2500")
	f.Set("risk", "high")
	res = e.post(t, "/tools/"+id+"/configure", f)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save with a blank secret: got %d", res.StatusCode)
	}
	it = e.item(t, "configurable")
	cfg, _ = e.srv.Tools.Configuration(ctx, id)
	resolved, _ = e.srv.Tools.Resolve(id, cfg)
	if it.ConfigVersion != 2 || string(resolved.Fixed["api_key"]) != `"`+secret+`"` || it.TimeoutMS == nil || *it.TimeoutMS != 2500 ||
		tdDeref(it.RiskOverride) != "high" {
		t.Fatalf("after the second save: version %d, key kept %v, timeout %v, risk %v", it.ConfigVersion,
			string(resolved.Fixed["api_key"]) == `"`+secret+`"`, it.TimeoutMS, it.RiskOverride)
	}
	doc, _ = e.get(t, nil, "/tools/"+id, http.StatusOK)
	if got := doc.Find("#tool-head-"+id+" [data-testid=risk-badge]").AttrOr("data-risk", ""); got != "high" {
		t.Errorf("overview after the risk override: %q, want high", got)
	}

	// Reset to defaults: the form asks first, then params, risk and timeout go.
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=configuration", http.StatusOK)
	if doc.Find("[data-testid=reset-form]").AttrOr("data-confirm", "") == "" {
		t.Error("the reset form does not ask for confirmation")
	}
	res = e.post(t, "/tools/"+id+"/reset", nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/tools/"+id+"?tab=configuration" {
		t.Fatalf("reset: got %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	it = e.item(t, "configurable")
	cfg, _ = e.srv.Tools.Configuration(ctx, id)
	if it.ConfigVersion != 3 || len(cfg.Params) != 0 || it.RiskOverride != nil || it.TimeoutMS != nil {
		t.Errorf("after reset: version %d, %d params, risk %v, timeout %v; want 3 and nothing set", it.ConfigVersion,
			len(cfg.Params), it.RiskOverride, it.TimeoutMS)
	}
	doc, html = e.get(t, nil, "/tools/"+id+"?tab=configuration", http.StatusOK)
	if strings.Contains(html, secret) || doc.Find("[data-testid=config-version-row]").Length() != 3 {
		t.Errorf("after reset: %d history rows (want 3), secret shown %v", doc.Find("[data-testid=config-version-row]").Length(),
			strings.Contains(html, secret))
	}

	// Unknown tools are 404 for the page and each action.
	for _, p := range []string{"/tools/" + uuid.NewString(), "/tools/not-a-uuid"} {
		e.get(t, nil, p, http.StatusNotFound)
		for _, action := range []string{"/configure", "/reset", "/validate"} {
			res := e.post(t, p+action, base())
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Errorf("POST %s%s: got %d, want 404", p, action, res.StatusCode)
			}
		}
	}
}

// The tool's rate limit in the Configuration tab: saved from the form as a new
// configuration version with its audit row, shown again on reload and by the API;
// bad values are refused next to the field and change nothing.
func TestToolConfigureRateLimit(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	ctx := context.Background()
	id := e.ids["echo"]
	api := svClient{t: t, srv: e.srv, c: e.admin}
	form := func(limit string) url.Values {
		return url.Values{"configuration_version": {fmt.Sprint(e.item(t, "echo").ConfigVersion)}, "param.message.mode": {"none"},
			"risk": {""}, "timeout_ms": {""}, "rate_limit": {limit}, "category": {""}, "tags": {""}, "reason": {"limit " + limit}}
	}
	apiLimit := func() *int {
		var got struct {
			RateLimit *int `json:"rate_limit"`
		}
		api.json(http.MethodGet, "/api/v1/tools/"+id, nil, http.StatusOK, &got)
		return got.RateLimit
	}
	audited := func() []string { // the changed fields of each tool.configure audit row, oldest first
		rows, err := e.srv.Pool.Query(ctx, `SELECT payload->>'changed' FROM audit_log
			WHERE action = 'tool.configure' AND target_id = $1 ORDER BY id`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	doc, _ := e.get(t, nil, "/tools/"+id+"?tab=configuration", http.StatusOK)
	in := doc.Find(`[data-testid=config-form] input[name=rate_limit][data-testid=cfg-rate-limit]`)
	if in.Length() != 1 || in.AttrOr("value", "x") != "" || in.AttrOr("type", "") != "number" {
		t.Fatalf("the configuration form has no empty rate limit input: %d found", in.Length())
	}
	if in.Closest(".inline-fields").Find("[data-testid=cfg-timeout]").Length() != 1 {
		t.Error("the rate limit is not next to the timeout")
	}

	// Set through the form: a new version, audited, shown on reload and by the API.
	res := e.post(t, "/tools/"+id+"/configure", form("30"))
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save a rate limit: got %d, want 303", res.StatusCode)
	}
	it := e.item(t, "echo")
	if it.RateLimit == nil || *it.RateLimit != 30 || it.ConfigVersion != 1 {
		t.Fatalf("after saving 30: rate limit %v, version %d; want 30 and version 1", it.RateLimit, it.ConfigVersion)
	}
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=configuration", http.StatusOK)
	if got := doc.Find("[data-testid=cfg-rate-limit]").AttrOr("value", ""); got != "30" {
		t.Errorf("after reload the rate limit box holds %q, want 30", got)
	}
	if row := doc.Find("[data-testid=config-version-row][data-version=\"1\"]"); !strings.Contains(row.Text(), `"rate_limit": 30`) ||
		!strings.Contains(row.Text(), "limit 30") {
		t.Errorf("configuration history row 1 %q, want the rate limit and the reason", strings.Join(strings.Fields(row.Text()), " "))
	}
	if got := apiLimit(); got == nil || *got != 30 {
		t.Errorf("GET /api/v1/tools/:id rate_limit = %v, want 30", got)
	}
	if got := audited(); len(got) != 1 || !strings.Contains(got[0], `"rate_limit"`) {
		t.Errorf("tool.configure audit rows: %q, want one naming rate_limit", got)
	}

	// Bad values: 422, the error next to the field, the typed value kept, nothing changed.
	for _, bad := range []string{"-5", "lots", "2.5", "1000001"} {
		res := e.post(t, "/tools/"+id+"/configure", form(bad))
		html := bodyString(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("rate limit %q: got %d, want 422", bad, res.StatusCode)
			continue
		}
		doc, _ := goquery.NewDocumentFromReader(strings.NewReader(html))
		errEl := doc.Find(`[data-testid="error-rate_limit"]`)
		if errEl.Length() != 1 || errEl.Closest(".field").Find("[data-testid=cfg-rate-limit]").Length() != 1 {
			t.Errorf("rate limit %q: no error next to the field (%d errors shown)", bad, errEl.Length())
		}
		if got := doc.Find("[data-testid=cfg-rate-limit]"); got.AttrOr("value", "") != bad || got.AttrOr("aria-invalid", "") != "true" {
			t.Errorf("rate limit %q: the box holds %q (aria-invalid %q), want what was typed, marked invalid", bad,
				got.AttrOr("value", ""), got.AttrOr("aria-invalid", ""))
		}
		if doc.Find("[data-testid=config-errors]").Length() != 1 {
			t.Errorf("rate limit %q: no \"nothing was saved\" summary", bad)
		}
		if it := e.item(t, "echo"); it.ConfigVersion != 1 || it.RateLimit == nil || *it.RateLimit != 30 {
			t.Fatalf("rate limit %q: version %d, limit %v; want nothing changed", bad, it.ConfigVersion, it.RateLimit)
		}
	}
	if got := apiLimit(); got == nil || *got != 30 {
		t.Errorf("after the refused values the API says rate_limit = %v, want 30", got)
	}
	if got := audited(); len(got) != 1 {
		t.Errorf("refused values were audited: %d tool.configure rows, want 1", len(got))
	}

	// A form without the field (rendered before it existed) leaves the limit alone.
	f := form("")
	f.Del("rate_limit")
	f.Set("timeout_ms", "2500")
	res = e.post(t, "/tools/"+id+"/configure", f)
	res.Body.Close()
	if it := e.item(t, "echo"); res.StatusCode != http.StatusSeeOther || it.ConfigVersion != 2 || it.RateLimit == nil || *it.RateLimit != 30 {
		t.Fatalf("a form without rate_limit: got %d, version %d, limit %v; want 303, version 2, 30 kept", res.StatusCode, it.ConfigVersion, it.RateLimit)
	}

	// Empty removes it, as 0 does through the API.
	res = e.post(t, "/tools/"+id+"/configure", form(""))
	res.Body.Close()
	if it := e.item(t, "echo"); res.StatusCode != http.StatusSeeOther || it.ConfigVersion != 3 || it.RateLimit != nil {
		t.Fatalf("empty rate limit: got %d, version %d, limit %v; want 303, version 3, none", res.StatusCode, it.ConfigVersion, it.RateLimit)
	}
	if got := apiLimit(); got != nil {
		t.Errorf("after removing it the API says rate_limit = %v, want null", *got)
	}
	if got := audited(); len(got) != 3 || !strings.Contains(got[2], `"rate_limit"`) {
		t.Errorf("tool.configure audit rows: %q, want 3, the last naming rate_limit", got)
	}
}

func TestToolPagePermissions(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["configurable"]
	e.srv.CreateUser(t, "viewer", auth.RoleToolUser, "viewer-password-123")
	viewer := e.srv.Login(t, "viewer", "viewer-password-123")

	doc, _ := e.get(t, viewer, "/tools/"+id+"?tab=configuration", http.StatusOK)
	if doc.Find("[data-testid=config-form] fieldset[disabled]").Length() == 0 || doc.Find("[data-testid=config-save]").Length() != 0 {
		t.Error("a tool user sees an editable configuration form")
	}
	if doc.Find("[data-testid=tab-logs]").Length() != 0 {
		t.Error("a tool user sees the Logs tab")
	}
	e.get(t, viewer, "/tools/"+id+"?tab=logs", http.StatusForbidden)
	for _, action := range []string{"/configure", "/reset", "/validate"} {
		res := e.srv.PostForm(t, viewer, "/tools/"+id+action, url.Values{"risk": {"low"}})
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("tool user POST %s: got %d, want 403", action, res.StatusCode)
		}
	}
	if it := e.item(t, "configurable"); it.ConfigVersion != 0 {
		t.Errorf("a refused action saved version %d", it.ConfigVersion)
	}
	// A tool user sees how a tool does (Usage); a guest, who only sees which tools
	// exist, does not.
	e.get(t, viewer, "/tools/"+id+"?tab=usage", http.StatusOK)
	e.srv.CreateUser(t, "guest", auth.RoleGuest, "guest-password-123")
	guest := e.srv.Login(t, "guest", "guest-password-123")
	if doc, _ := e.get(t, guest, "/tools/"+id, http.StatusOK); doc.Find("[data-testid=tab-usage]").Length() != 0 {
		t.Error("a guest sees the Usage tab")
	}
	e.get(t, guest, "/tools/"+id+"?tab=usage", http.StatusForbidden)
}

func TestToolValidateAndHistory(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["echo"]

	res := e.post(t, "/tools/"+id+"/validate", url.Values{"back": {"/tools/" + id + "?tab=history"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/tools/"+id+"?tab=history" {
		t.Fatalf("validate: got %d to %q, want 303 back to the history tab", res.StatusCode, res.Header.Get("Location"))
	}
	// Enabling a validated tool directly skips testing; the history says so.
	res = e.post(t, "/tools/"+id+"/enable", url.Values{"back": {"/tools/" + id + "?tab=history"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("enable: got %d", res.StatusCode)
	}
	doc, _ := e.get(t, nil, "/tools/"+id+"?tab=history", http.StatusOK)
	if !strings.Contains(doc.Find("[data-testid=flash]").Text(), "Enabled") {
		t.Errorf("flash after enabling: %q", doc.Find("[data-testid=flash]").Text())
	}
	var moves []string
	doc.Find("[data-testid=history-row]").Each(func(_ int, s *goquery.Selection) {
		moves = append(moves, s.AttrOr("data-from", "")+">"+s.AttrOr("data-to", ""))
	})
	// Newest first: the enable, the revalidation, then discovery's validation.
	wantMoves := []string{"validated>enabled", "validating>validated", "validated>validating", "validating>validated",
		"discovered>validating", ">discovered"}
	if !slices.Equal(moves, wantMoves) {
		t.Fatalf("history: got %v, want %v", moves, wantMoves)
	}
	first := doc.Find("[data-testid=history-row]").First()
	if !strings.Contains(first.Text(), "admin") || first.Find("[data-testid=history-note]").Text() != "Testing was skipped" {
		t.Errorf("enable row %q: want the actor and 'Testing was skipped'", strings.Join(strings.Fields(first.Text()), " "))
	}
	if got := doc.Find("#tool-head-"+id).AttrOr("data-status", ""); got != "enabled" {
		t.Errorf("head status %q, want enabled", got)
	}
	if doc.Find("#tool-head-"+id+" [data-testid=tool-enable-toggle]").AttrOr("aria-checked", "") != "true" {
		t.Error("the head's toggle does not show enabled")
	}
}

// A long history comes a page at a time: a tool whose server changes it often has
// thousands of changes.
func TestToolHistoryPages(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["configurable"]
	if _, err := e.srv.Pool.Exec(context.Background(), `INSERT INTO tool_state_history (tool_id, from_status, to_status, reason, actor)
		SELECT $1, 'enabled', 'disabled', 'toggle ' || g, 'admin' FROM generate_series(1, 110) g`, id); err != nil {
		t.Fatal(err)
	}
	seen := 0
	path := "/tools/" + id + "?tab=history"
	for page := 0; ; page++ {
		doc, _ := e.get(t, nil, path, http.StatusOK)
		n := doc.Find("[data-testid=history-row]").Length()
		if n == 0 || n > 50 {
			t.Fatalf("page %d: %d rows, want 1 to 50", page+1, n)
		}
		if page > 0 && doc.Find("[data-testid=history-newest]").Length() != 1 {
			t.Errorf("page %d: no link back to the newest", page+1)
		}
		seen += n
		older, ok := doc.Find("[data-testid=history-older]").Attr("href")
		if !ok {
			break
		}
		path = older
	}
	var total int
	if err := e.srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tool_state_history WHERE tool_id = $1`, id).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if seen != total {
		t.Fatalf("the pages showed %d changes, want all %d", seen, total)
	}
	e.get(t, nil, "/tools/"+id+"?tab=history&before=x", http.StatusBadRequest)
	// An id past 2^31 is an id like another (no page older than it but this one).
	if doc, _ := e.get(t, nil, "/tools/"+id+"?tab=history&before=3000000000", http.StatusOK); doc.Find("[data-testid=history-row]").Length() != 50 {
		t.Error("before=3000000000: want the newest 50 changes")
	}
}

func TestToolOverrideForm(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	ctx := context.Background()
	// A tool with a broken schema is invalid: the head explains and offers an override.
	e.up.Server().SetTool(mcptest.ToolSpec{Name: "broken", Description: "Has a broken schema.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"strin"}}}`)})
	api := svClient{t: t, srv: e.srv, c: e.admin}
	api.json(http.MethodPost, "/api/v1/servers/"+e.sv+"/discover", nil, http.StatusOK, nil)
	page, err := e.srv.Tools.List(ctx, tools.Query{Server: "td", Q: "broken"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("broken tool: %v %d", err, len(page.Items))
	}
	it := page.Items[0]
	if it.Status != "invalid" {
		t.Fatalf("broken tool is %s, want invalid", it.Status)
	}
	doc, _ := e.get(t, nil, "/tools/"+it.ID, http.StatusOK)
	form := doc.Find("#tool-head-" + it.ID + " [data-testid=override-form]")
	if form.AttrOr("action", "") != "/tools/"+it.ID+"/enable" || form.AttrOr("data-perm", "") != "tool.override" ||
		form.Find("input[name=override]").AttrOr("value", "") != "1" || form.Find("textarea[name=reason][required]").Length() != 1 {
		t.Fatal("the invalid tool has no proper override form")
	}
	if doc.Find("[data-testid=finding][data-severity=error]").Length() == 0 {
		t.Error("the overview does not list the error findings that block the tool")
	}
	res := e.post(t, "/tools/"+it.ID+"/enable", url.Values{"override": {"1"}, "reason": {"reviewed: the type is a typo we accept"},
		"back": {"/tools/" + it.ID}})
	res.Body.Close()
	doc, _ = e.get(t, nil, "/tools/"+it.ID+"?tab=history", http.StatusOK)
	if got := doc.Find("#tool-head-"+it.ID).AttrOr("data-status", ""); got != "enabled" {
		t.Fatalf("after the override: status %q, want enabled", got)
	}
	if !strings.Contains(doc.Find("[data-testid=history-row]").First().Find("[data-testid=history-note]").Text(), "Override") {
		t.Error("the history does not show the override")
	}
	if !strings.Contains(doc.Find("[data-testid=override-note]").Text(), "the type is a typo") {
		t.Error("the head does not show the override reason")
	}

	// The findings and the override's reason are for those who may inspect tools
	// (tool.inspect): a guest sees neither, on the page or in the API.
	e.srv.CreateUser(t, "guest", auth.RoleGuest, "guest-password-123")
	guest := e.srv.Login(t, "guest", "guest-password-123")
	for _, who := range []struct {
		name    string
		c       *http.Client
		inspect bool
	}{{"admin", e.admin, true}, {"guest", guest, false}} {
		doc, html := e.get(t, who.c, "/tools/"+it.ID, http.StatusOK)
		if got := doc.Find("[data-testid=findings]").Length() == 1; got != who.inspect {
			t.Errorf("%s: the overview lists the findings: %v, want %v", who.name, got, who.inspect)
		}
		if got := strings.Contains(doc.Find("[data-testid=override-reason]").Text(), "the type is a typo"); got != who.inspect {
			t.Errorf("%s: the overview shows the override reason: %v, want %v", who.name, got, who.inspect)
		}
		if !who.inspect && strings.Contains(html, "the type is a typo") {
			t.Errorf("%s: the page has the override reason somewhere", who.name)
		}
		for _, path := range []string{"/api/v1/tools?server=td&q=broken", "/api/v1/tools/" + it.ID} {
			res := e.srv.Get(t, who.c, path)
			var out struct {
				Tools []map[string]json.RawMessage `json:"tools"`
			}
			raw := bodyString(t, res)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s: GET %s: %d %s", who.name, path, res.StatusCode, raw)
			}
			if err := json.Unmarshal([]byte(raw), &out); err != nil || out.Tools == nil {
				var one map[string]json.RawMessage
				if err := json.Unmarshal([]byte(raw), &one); err != nil {
					t.Fatal(err)
				}
				out.Tools = []map[string]json.RawMessage{one}
			}
			if len(out.Tools) != 1 {
				t.Fatalf("%s: GET %s: %d tools, want the broken one", who.name, path, len(out.Tools))
			}
			if _, got := out.Tools[0]["enable_override"]; got != who.inspect {
				t.Errorf("%s: GET %s has enable_override: %v, want %v", who.name, path, got, who.inspect)
			}
		}
	}
}

func TestToolDefinitionDiff(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["configurable"]
	before := e.item(t, "configurable")
	// The server changes the tool: "ratio" goes (breaking), "days" arrives.
	changed := strings.Replace(tdConfigSchema, `"ratio":{"type":"number","description":"A scale factor."},`,
		`"days":{"type":"integer","description":"How many days."},`, 1)
	e.up.Server().SetTool(mcptest.ToolSpec{Name: "configurable", Title: "Weather forecast", Description: "Forecasts the weather.",
		InputSchema: json.RawMessage(changed)})
	api := svClient{t: t, srv: e.srv, c: e.admin}
	deadline := time.Now().Add(svWait)
	for e.item(t, "configurable").DefinitionHash == before.DefinitionHash {
		if time.Now().After(deadline) {
			t.Fatal("the changed definition was never discovered")
		}
		api.json(http.MethodPost, "/api/v1/servers/"+e.sv+"/discover", nil, http.StatusOK, nil)
	}
	after := e.item(t, "configurable")
	if after.Version() != "2.0" {
		t.Fatalf("after a breaking change: version %s, want 2.0", after.Version())
	}

	// Without a choice the page compares the previous version with the current one.
	doc, _ := e.get(t, nil, "/tools/"+id+"?tab=schema", http.StatusOK)
	var versions []string
	doc.Find("[data-testid=version]").Each(func(_ int, s *goquery.Selection) {
		versions = append(versions, s.AttrOr("data-hash", "")+":"+s.AttrOr("data-breaking", ""))
	})
	if want := []string{after.DefinitionHash + ":true", before.DefinitionHash + ":false"}; !slices.Equal(versions, want) {
		t.Fatalf("versions %v, want %v", versions, want)
	}
	var breaking []string
	doc.Find("[data-testid=change][data-breaking=true]").Each(func(_ int, s *goquery.Selection) {
		breaking = append(breaking, strings.Join(strings.Fields(s.Text()), " "))
	})
	if len(breaking) != 1 || !strings.Contains(breaking[0], `"ratio" was removed`) {
		t.Errorf("breaking changes %v, want the removal of ratio", breaking)
	}
	check := func(doc *goquery.Document, wantAdded, wantRemoved string) {
		t.Helper()
		var added, removed []string
		doc.Find("[data-testid=diff-line]").Each(func(_ int, s *goquery.Selection) {
			txt := s.Find(".diff-text").Text()
			switch s.AttrOr("data-op", "") {
			case "+":
				added = append(added, txt)
			case "-":
				removed = append(removed, txt)
			}
		})
		if !slices.ContainsFunc(added, func(l string) bool { return strings.Contains(l, wantAdded) }) ||
			!slices.ContainsFunc(removed, func(l string) bool { return strings.Contains(l, wantRemoved) }) {
			t.Errorf("diff: added %q, removed %q; want %q added and %q removed", added, removed, wantAdded, wantRemoved)
		}
		if slices.ContainsFunc(added, func(l string) bool { return strings.Contains(l, `"location"`) }) {
			t.Errorf("diff: an unchanged line is marked added: %q", added)
		}
	}
	check(doc, `"days": {`, `"ratio": {`)

	// The other way round, chosen in the query.
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=schema&from="+after.DefinitionHash+"&to="+before.DefinitionHash, http.StatusOK)
	check(doc, `"ratio": {`, `"days": {`)
	if got := doc.Find("#diff-from option[selected]").AttrOr("value", ""); got != after.DefinitionHash {
		t.Errorf("the from select shows %q, want the chosen version", got)
	}
	// A hash that is not one of the tool's versions: said so, no diff.
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=schema&from=abc&to="+before.DefinitionHash, http.StatusOK)
	if doc.Find("[data-testid=diff-error]").Length() != 1 || doc.Find("[data-testid=diff-line]").Length() != 0 {
		t.Error("an unknown version: want an explanation and no diff")
	}

	// The history links the definition change to the same comparison.
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=history", http.StatusOK)
	link := doc.Find("[data-testid=history-diff]").First().AttrOr("href", "")
	if !strings.Contains(link, "from="+before.DefinitionHash) || !strings.Contains(link, "to="+after.DefinitionHash) {
		t.Errorf("history diff link %q, want from the old to the new hash", link)
	}
}

func TestToolUsageAndLogs(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	ctx := context.Background()
	id := e.ids["echo"]

	// No calls: the empty state.
	doc, _ := e.get(t, nil, "/tools/"+id+"?tab=usage", http.StatusOK)
	if doc.Find("[data-testid=usage-empty]").Length() != 1 {
		t.Error("usage without calls: no empty state")
	}
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=logs", http.StatusOK)
	if doc.Find("[data-testid=logs-empty]").Length() != 1 {
		t.Error("logs without calls: no empty state")
	}

	// 55 calls in the last hours (every fifth failed), one 3 days ago.
	const leaked = "sk-live-0123456789abcdefghijklmnop"
	var entries []usage.Entry
	now := time.Now()
	for i := range 55 {
		d := float64(10 + i)
		entries = append(entries, usage.Entry{ToolID: id, Actor: "admin", Source: "api", UsedAt: now.Add(-time.Duration(i) * time.Minute),
			DurationMS: &d, Success: i%5 != 0, ErrorCode: map[bool]string{true: "", false: "upstream_error"}[i%5 != 0],
			Request:  json.RawMessage(fmt.Sprintf(`{"message":"call %d","api_key":%q}`, i, leaked)),
			Response: json.RawMessage(`{"content":[{"type":"text","text":"<script>x</script>"}]}`)})
	}
	d := 5.0
	entries = append(entries, usage.Entry{ToolID: id, Actor: "bot", Source: "gateway", UsedAt: now.Add(-72 * time.Hour), DurationMS: &d,
		Success: true, Request: json.RawMessage(`{"message":"old"}`)})
	if err := usage.Insert(ctx, e.srv.Pool, entries); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		rng, calls, success string
	}{
		{"", "55", "80%"},
		{"24h", "55", "80%"},
		{"7d", "56", "80.4%"},
		{"30d", "56", "80.4%"},
	}
	for _, tc := range cases {
		doc, _ := e.get(t, nil, "/tools/"+id+"?tab=usage&range="+tc.rng, http.StatusOK)
		if got := doc.Find("[data-testid=usage-calls]").Text(); got != tc.calls {
			t.Errorf("range %q: %q calls, want %s", tc.rng, got, tc.calls)
		}
		if got := doc.Find("[data-testid=usage-success]").Text(); got != tc.success {
			t.Errorf("range %q: success %q, want %s", tc.rng, got, tc.success)
		}
		if doc.Find("[data-testid=usage-p50]").Text() == "—" || doc.Find("[data-testid=usage-p95]").Text() == "—" {
			t.Errorf("range %q: no latency percentiles", tc.rng)
		}
		if n := doc.Find("[data-testid=usage-calls-chart] svg rect.chart-bar").Length(); n == 0 {
			t.Errorf("range %q: the calls chart has no bars", tc.rng)
		}
		if n := doc.Find("[data-testid=usage-latency-chart] svg polyline, [data-testid=usage-latency-chart] svg circle").Length(); n == 0 {
			t.Errorf("range %q: the latency chart has no line", tc.rng)
		}
		want := tc.rng
		if want == "" {
			want = "24h"
		}
		if doc.Find("[data-testid=range-"+want+"]").AttrOr("aria-current", "") != "true" {
			t.Errorf("range %q: the period picker does not mark %s", tc.rng, want)
		}
	}

	// Logs: newest first, 50 a page, redacted, escaped; "Older" pages on.
	doc, html := e.get(t, nil, "/tools/"+id+"?tab=logs", http.StatusOK)
	rows := doc.Find("[data-testid=log-row]")
	if rows.Length() != 50 {
		t.Fatalf("logs: %d rows, want 50", rows.Length())
	}
	if strings.Contains(html, leaked) || strings.Contains(html, "<script>x") {
		t.Fatal("logs: a secret or markup reached the page")
	}
	if got := rows.First().Find("td").Eq(2).Text(); got != "JSON API" {
		t.Errorf("logs: a call's source reads %q, want it in words (JSON API)", got)
	}
	if !strings.Contains(rows.First().Find("[data-testid=log-request]").Text(), `"message": "call 0"`) {
		t.Errorf("logs: first row %q, want the newest call", rows.First().Find("[data-testid=log-request]").Text())
	}
	if rows.First().AttrOr("data-success", "") != "false" || !strings.Contains(rows.First().Text(), "upstream_error") {
		t.Error("logs: the failed newest call does not show as failed with its error code")
	}
	older := doc.Find("[data-testid=logs-older]").AttrOr("href", "")
	if !strings.Contains(older, "tab=logs") || !strings.Contains(older, "before=") {
		t.Fatalf("logs: older link %q", older)
	}
	doc, _ = e.get(t, nil, older, http.StatusOK)
	if n := doc.Find("[data-testid=log-row]").Length(); n != 6 || doc.Find("[data-testid=logs-older]").Length() != 0 ||
		doc.Find("[data-testid=logs-newest]").Length() != 1 {
		t.Errorf("logs page 2: %d rows (want 6), older link %d, newest link %d", n,
			doc.Find("[data-testid=logs-older]").Length(), doc.Find("[data-testid=logs-newest]").Length())
	}
	if !strings.Contains(doc.Find("[data-testid=log-row]").Last().Text(), "gateway") {
		t.Error("logs page 2: the oldest call is not last")
	}
	e.get(t, nil, "/tools/"+id+"?tab=logs&before=nope", http.StatusBadRequest)

	// Days rolled up are read from their rollups by the 7-day chart too: with their
	// calls gone from the log, the call of 3 days ago still has its bar.
	if _, err := analytics.New(e.srv.Pool).RollUp(ctx, now); err != nil {
		t.Fatal(err)
	}
	if tag, err := e.srv.Pool.Exec(ctx, `DELETE FROM tool_usage_logs WHERE tool_id = $1
		AND used_at < (SELECT max(day) + 1 FROM usage_daily_done)::timestamp AT TIME ZONE 'UTC'`, id); err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("delete the rolled-up calls: %v rows, %v", tag.RowsAffected(), err)
	}
	doc, _ = e.get(t, nil, "/tools/"+id+"?tab=usage&range=7d", http.StatusOK)
	var charted int
	doc.Find("[data-testid=usage-series] tbody tr").Each(func(_ int, tr *goquery.Selection) {
		n, _ := strconv.Atoi(strings.ReplaceAll(tr.Find("td").Eq(1).Text(), ",", ""))
		charted += n
	})
	if got := doc.Find("[data-testid=usage-calls]").Text(); got != "56" || charted != 56 {
		t.Errorf("7 days with the old day rolled up: %s calls, %d in the chart; want 56 in both", got, charted)
	}
}

func tdDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
