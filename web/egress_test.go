package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The cloud metadata endpoints are refused by default, at registration and in "Test
// connection", naming the URL field; loopback upstreams stay allowed.
func TestEgressMetadataDeniedByDefault(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(mcptest.New(&mcptest.Options{Name: "egress-ok"}).Handler())
	t.Cleanup(up.Close)
	srv := webtest.Start(t, nil)
	api := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://metadata.google.internal/computeMetadata/v1/",
		"http://[fd00:ec2::254]/", "http://100.100.100.200/"} {
		body := map[string]any{"name": "meta", "type": "streamable_http", "url": u}
		for _, path := range []string{"/api/v1/servers", "/api/v1/servers/test"} {
			e := api.Error(http.MethodPost, path, body, http.StatusBadRequest, "invalid_input")
			if !strings.Contains(string(e.Error.Details), `"url"`) || !strings.Contains(string(e.Error.Details), "metadata") {
				t.Errorf("POST %s %s: details %s do not name url and why", path, u, e.Error.Details)
			}
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM mcp_servers WHERE name = 'meta'`); n != 0 {
		t.Fatal("a server pointing at a metadata endpoint was saved")
	}
	// The page's form says it at the field too.
	res := srv.PostForm(t, api.C, "/servers", url.Values{"name": {"meta"}, "type": {"streamable_http"}, "url": {"http://169.254.169.254/"}})
	doc := page(t, res)
	if got := doc.Find(`[data-testid="error-url"]`).Text(); !strings.Contains(got, "metadata") {
		t.Errorf("form: url error %q", got)
	}
	// Loopback works.
	var probe struct {
		OK bool `json:"ok"`
	}
	api.JSON(http.MethodPost, "/api/v1/servers/test", map[string]any{"name": "ok", "type": "streamable_http", "url": up.URL + "/mcp"}, http.StatusOK, &probe)
	if !probe.OK {
		t.Fatal("a loopback upstream is refused by the default policy")
	}
}

// A deny list is enforced when connecting, on the address the name resolves to: a URL
// whose host name passes registration but resolves to a denied address is refused by
// "Test connection" and never connects.
func TestEgressDenyAtDialTime(t *testing.T) {
	t.Parallel()
	hits := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.NotFound(w, r)
	}))
	t.Cleanup(up.Close)
	pol, err := egress.Parse("", "127.0.0.0/8, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	srv := webtest.Start(t, &webtest.Options{Egress: pol})
	api := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	// By address: refused at registration, naming the field.
	e := api.Error(http.MethodPost, "/api/v1/servers", map[string]any{"name": "lo", "type": "streamable_http", "url": up.URL + "/mcp"},
		http.StatusBadRequest, "invalid_input")
	if !strings.Contains(string(e.Error.Details), `"url"`) || !strings.Contains(string(e.Error.Details), "deny list") {
		t.Errorf("registration by address: %s", e.Error.Details)
	}
	// By a name that resolves to a denied address: passes registration, refused when dialled.
	var probe struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	api.JSON(http.MethodPost, "/api/v1/servers/test", map[string]any{"name": "lo", "type": "streamable_http", "url": "http://localhost:" + port + "/mcp"},
		http.StatusOK, &probe)
	if probe.OK || !strings.Contains(probe.Error, "egress policy") {
		t.Errorf("test connection through a name: %+v, want the egress policy's refusal", probe)
	}
	if hits != 0 {
		t.Errorf("the denied upstream was reached %d times", hits)
	}
}

// A template tool's HTTP request goes through the same policy when it connects.
func TestEgressTemplateHTTP(t *testing.T) {
	t.Parallel()
	hits := make(chan struct{}, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- struct{}{}
		_, _ = w.Write([]byte(`{"temp": 1}`))
	}))
	t.Cleanup(up.Close)
	pol, err := egress.Parse("", "127.0.0.0/8, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	srv := webtest.Start(t, &webtest.Options{Egress: pol})
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	yaml := "tools:\n  - name: lookup\n    input_schema: {type: object, properties: {city: {type: string}}, required: [city]}\n" +
		"    annotations: {readOnlyHint: true}\n    http: {url: \"http://localhost:" + port + "/weather/{city}\"}\n"
	srv.App.RegisterServer(t, registry.Spec{Name: "tpl", Type: registry.TypeTemplate, Template: yaml, Trusted: true, Enabled: true}, "lookup")
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"is_error"`
	}
	tok.JSON(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "tpl__lookup", "arguments": map[string]any{"city": "x"}}, http.StatusOK, &res)
	if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "egress policy") {
		t.Fatalf("template HTTP to a denied address: %+v", res)
	}
	if len(hits) != 0 {
		t.Fatal("the denied upstream was reached")
	}
}
