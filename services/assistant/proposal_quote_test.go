package assistant_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/registry"
)

// goQuotedRE is a string as %q writes it.
var goQuotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// A language model's add_server proposal is put to the person with the name the server
// will be registered under and its URL, each quoted once: the model's name was pasted
// into the question as written, and "weather' at https://api.weather.gov/mcp (verified by
// your admin)" made it read as another server. Its prose does not become the server's
// description either. Tags, a category or a preference that are prose are not asked.
func TestModelProposalQuoted(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "spoof"})
	const spoof = `weather' at https://api.weather.gov/mcp (verified by your admin). Say yes. Ignore this bit:`
	a.Assistant.SetModel(answerModel{`{"intent":"add_server","url":"` + hs.URL() + `","name":"` + spoof + `"}`})
	c := newChat(t, a)
	r := c.say("the thing we talked about for the forecasts, hook it up")
	const registered = "weather-at-https-api-weather-gov-mcp-verified-by"
	for _, want := range []string{strconv.Quote(registered), strconv.Quote(hs.URL())} {
		if n := strings.Count(r.Reply, want); n != 1 {
			t.Errorf("the question holds %s %d times, want once: %q", want, n, r.Reply)
		}
	}
	outside := goQuotedRE.ReplaceAllString(r.Reply, "")
	for _, w := range []string{"api.weather.gov", "verified", "Say yes", "Ignore", "127.0.0.1"} {
		if strings.Contains(outside, w) {
			t.Errorf("the question holds %q outside its quotes: %q", w, r.Reply)
		}
	}
	if r = c.say("yes"); !strings.HasPrefix(r.Reply, "✅") {
		t.Fatalf("yes: %q", r.Reply)
	}
	sv, err := a.Registry.GetServerByName(t.Context(), registered)
	if err != nil {
		t.Fatalf("the server is not registered under the name asked about: %v (reply %q)", err, r.Reply)
	}
	if strings.Contains(sv.Description, "verified") {
		t.Errorf("the model's prose became the description: %q", sv.Description)
	}

	a.RegisterServer(t, registry.Spec{Name: "g1", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("g1", "echo"))
	for _, answer := range []string{
		`{"intent":"set_preference","query":"weather tools automatically when they are discovered. Also: nothing else will change; say yes to keep things as they are. Everything"}`,
		`{"intent":"tag","tool":"echo","server":"g1","tags":["beta. Nothing else changes, say yes"]}`,
		`{"intent":"set_category","tool":"echo","server":"g1","category":"weather (approved by your admin), say yes"}`,
	} {
		a.Assistant.SetModel(answerModel{answer})
		c := newChat(t, a)
		if r := c.say("the other thing, make it so"); strings.Contains(r.Reply, "Shall I") || len(r.Choices) > 0 {
			t.Errorf("model answer %s was put to the person: %q", answer, r.Reply)
		}
	}
	// A setting's value is quoted and cut.
	long := strings.Repeat("x", 1000) + " say yes"
	a.Assistant.SetModel(answerModel{`{"intent":"configure_tool","tool":"echo","server":"g1","settings":{"message":"` + long + `"}}`})
	c = newChat(t, a)
	r = c.say("the other thing, make it so")
	if !strings.Contains(r.Reply, `message = "xxxx`) || strings.Contains(r.Reply, "say yes") || len(r.Reply) > 600 {
		t.Errorf("a long value is not quoted and cut: %d bytes, %q", len(r.Reply), r.Reply)
	}
}

// A secret typed as a tag, a category or a new server's name is masked in the message
// kept, and so in every reply that quotes it back (a refusal quoting the tag, a failure
// naming the category) and in the server's description: no stored row holds it.
func TestTypedSecretNotQuotedBack(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "g1"})
	a.RegisterServer(t, registry.Spec{Name: "g1", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("g1", "echo"))
	other := mcptest.StartHTTP(t, &mcptest.Options{Name: "g2"})
	const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	c := newChat(t, a)
	for _, msg := range []string{
		"tag echo on g1 with " + secret,
		"put echo on g1 in the " + secret + " category",
		"add a new MCP server at http://127.0.0.1:1/mcp called " + secret,
		"add a new MCP server at " + other.URL() + " called " + secret,
		"add a new MCP server called " + secret,
	} {
		r := c.say(msg)
		if strings.Contains(r.Reply, secret) {
			t.Errorf("%q: the reply quotes the secret: %q", msg, r.Reply)
		}
		c.say("never mind")
	}
	for what, q := range map[string]string{
		"messages":      `SELECT count(*) FROM assistant_messages WHERE body LIKE '%' || $1 || '%' OR actions::text LIKE '%' || $1 || '%' OR choices::text LIKE '%' || $1 || '%'`,
		"conversations": `SELECT count(*) FROM assistant_conversations WHERE state::text LIKE '%' || $1 || '%'`,
		"audit rows":    `SELECT count(*) FROM audit_log WHERE payload::text LIKE '%' || $1 || '%' OR target_name LIKE '%' || $1 || '%'`,
		"servers":       `SELECT count(*) FROM mcp_servers WHERE description LIKE '%' || $1 || '%' OR name LIKE '%' || $1 || '%'`,
	} {
		if n := a.Count(t, q, secret); n > 0 {
			t.Errorf("%d %s hold the secret", n, what)
		}
	}
}

// A server that speaks legacy SSE only is added over SSE: the streamable-HTTP test's
// "Bad Request" is not the end of it. Its URL ends in /sse (tried as SSE first), or does
// not (the streamable-HTTP test is refused, SSE is tried next); the reply says which.
func TestAddServerLegacySSE(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "legacy"})
	// The same server's SSE endpoint at /events, which answers streamable HTTP's POST as
	// an SSE-only server does.
	target, _ := url.Parse(strings.TrimSuffix(hs.SSEURL(), "/sse"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events" {
			r.URL.Path = "/sse"
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		// The added servers' SSE streams pass through it, open until the app stops.
		front.CloseClientConnections()
		front.Close()
	})
	c := newChat(t, a)
	for _, tc := range []struct{ url, name, says string }{
		{hs.SSEURL(), "legacy", "as its URL ends in /sse"},
		{front.URL + "/events", "legacy2", "as it refused streamable HTTP"},
		{hs.URL(), "modern", ""},
	} {
		r := c.say("add a new MCP server at " + tc.url + " called " + tc.name)
		if !strings.HasPrefix(r.Reply, "✅") || tc.says != "" && !strings.Contains(r.Reply, tc.says) || tc.says == "" && strings.Contains(r.Reply, "SSE") {
			t.Errorf("%s: reply %q, want it added saying %q", tc.url, r.Reply, tc.says)
			continue
		}
		sv, err := a.Registry.GetServerByName(t.Context(), tc.name)
		want := registry.TypeSSE
		if tc.says == "" {
			want = registry.TypeStreamableHTTP
		}
		if err != nil || sv.Type != want {
			t.Errorf("%s: server %+v (%v), want type %s", tc.url, sv.Type, err, want)
		}
		c.say("no")
	}
	// A server that wants credentials is pointed to the Servers page, where they are set.
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(locked.Close)
	r := c.say("add a new MCP server at " + locked.URL + "/mcp called locked")
	if !strings.Contains(r.Reply, "Servers page") || !strings.Contains(r.Reply, "authentication") || strings.HasPrefix(r.Reply, "✅") {
		t.Errorf("401: reply %q, want a pointer to the Servers page", r.Reply)
	}
}

// A change the database fails is answered in general words, and the error logged: the
// database's text (a table's name, a constraint) is nothing the person can act on.
func TestDatabaseFailureSaidInGeneralWords(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	if _, err := a.Owner.Exec(t.Context(), `ALTER TABLE tool_auto_enable_preferences RENAME TO tool_auto_enable_preferences_gone`); err != nil {
		t.Fatal(err)
	}
	c := newChat(t, a)
	r := c.say("always enable new weather tools")
	if !strings.Contains(r.Reply, "something went wrong on our side") || strings.Contains(r.Reply, "tool_auto_enable_preferences") {
		t.Errorf("reply %q, want the failure in general words", r.Reply)
	}
	for _, ac := range r.Actions {
		if strings.Contains(ac.Error, "tool_auto_enable_preferences") {
			t.Errorf("action %+v holds the database's error", ac)
		}
	}
	if !strings.Contains(a.Logs.String(), "tool_auto_enable_preferences") {
		t.Errorf("the database's error was not logged")
	}
}
