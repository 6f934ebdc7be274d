package registry_test

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Tests of the rules added with server.command: stored secrets stay with their origin,
// credentials are refused in args and URL queries, ${NAME} in args, what changes a
// stdio command, plan digests and the Test connection audit entry.

// originSpec is an HTTP server with a stored header secret and bearer token.
func originSpec(name string) registry.Spec {
	return registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:3001/mcp",
		Headers: map[string]string{"X-Team": canary + "-h"}, AuthType: registry.AuthBearer, AuthToken: canary + "-t",
		Enabled: true}
}

// storedURL reads the url column of server id.
func (f *fixture) storedURL(id string) string {
	f.t.Helper()
	urls := f.strings(`SELECT url FROM mcp_servers WHERE id = $1`, id)
	if len(urls) != 1 {
		f.t.Fatalf("server %s: got %d rows, want 1", id, len(urls))
	}
	return urls[0]
}

func TestStoredSecretsStayWithOrigin(t *testing.T) {
	t.Parallel()
	stored := map[string]string{"X-Team": canary + "-h", "Authorization": "Bearer " + canary + "-t"}
	moved := []string{"headers/X-Team", "auth_token"}
	cases := []struct {
		name        string
		patch       registry.Patch
		wantErr     []string
		wantURL     string            // after a successful update
		wantHeaders map[string]string // after a successful update, authentication included
	}{
		// Refused: another origin, stored secrets not entered again.
		{"other host", registry.Patch{URL: ptr("http://evil.example:3001/mcp")}, moved, "", nil},
		{"other port", registry.Patch{URL: ptr("http://127.0.0.1:3002/mcp")}, moved, "", nil},
		{"other scheme", registry.Patch{URL: ptr("https://127.0.0.1:3001/mcp")}, moved, "", nil},
		{"other host and type", registry.Patch{Type: ptr(registry.TypeSSE), URL: ptr("http://evil.example/sse")}, moved, "", nil},
		{"other host, only the header entered again",
			registry.Patch{URL: ptr("http://evil.example/mcp"), Headers: map[string]*string{"X-Team": ptr("h2")}},
			[]string{"auth_token"}, "", nil},
		{"other host, only the token entered again",
			registry.Patch{URL: ptr("http://evil.example/mcp"), AuthToken: ptr("t2")},
			[]string{"headers/X-Team"}, "", nil},
		{"other host, a new header added but the stored one kept",
			registry.Patch{URL: ptr("http://evil.example/mcp"), Headers: map[string]*string{"X-New": ptr("n")}, AuthToken: ptr("t2")},
			[]string{"headers/X-Team"}, "", nil},
		{"other host, switched to header authentication with the stored token",
			registry.Patch{URL: ptr("http://evil.example/mcp"), AuthType: ptr(registry.AuthHeader), AuthHeader: ptr("X-Key")},
			moved, "", nil},
		{"other host and another problem: both reported",
			registry.Patch{URL: ptr("http://evil.example/mcp"), TimeoutMS: ptr(1)},
			append([]string{"timeout_ms"}, moved...), "", nil},
		// Refused: the URL itself is wrong, and that is all that is reported.
		{"invalid URL", registry.Patch{URL: ptr("ftp://evil.example/mcp")}, []string{"url"}, "", nil},
		{"URL without host", registry.Patch{URL: ptr("http:///mcp")}, []string{"url"}, "", nil},
		{"empty URL", registry.Patch{URL: ptr("")}, []string{"url"}, "", nil},
		{"URL with a secret in the query", registry.Patch{URL: ptr("http://evil.example/mcp?token=abc")}, []string{"url"}, "", nil},

		// Accepted.
		{"same origin, other path", registry.Patch{URL: ptr("http://127.0.0.1:3001/other")}, nil,
			"http://127.0.0.1:3001/other", stored},
		{"same origin, upper-case scheme", registry.Patch{URL: ptr("HTTP://127.0.0.1:3001/mcp2")}, nil,
			"HTTP://127.0.0.1:3001/mcp2", stored},
		{"same origin, type changed to SSE", registry.Patch{Type: ptr(registry.TypeSSE), URL: ptr("http://127.0.0.1:3001/sse")}, nil,
			"http://127.0.0.1:3001/sse", stored},
		{"no URL change", registry.Patch{Description: ptr("d")}, nil, "http://127.0.0.1:3001/mcp", stored},
		{"other host, everything entered again",
			registry.Patch{URL: ptr("https://new.example/mcp"), Headers: map[string]*string{"X-Team": ptr("h2")}, AuthToken: ptr("t2")},
			nil, "https://new.example/mcp", map[string]string{"X-Team": "h2", "Authorization": "Bearer t2"}},
		{"other host, everything removed",
			registry.Patch{URL: ptr("https://new.example/mcp"), Headers: map[string]*string{"X-Team": nil}, AuthType: ptr(registry.AuthNone)},
			nil, "https://new.example/mcp", map[string]string{}},
		{"other host, headers replaced, token removed",
			registry.Patch{URL: ptr("https://new.example/mcp"), ReplaceHeaders: true, Headers: map[string]*string{"X-Other": ptr("o")},
				AuthType: ptr(registry.AuthNone), AuthToken: ptr("")},
			nil, "https://new.example/mcp", map[string]string{"X-Other": "o"}},
		{"other host, header entered again, token removed",
			registry.Patch{URL: ptr("http://new.example:8080/mcp"), Headers: map[string]*string{"X-Team": ptr("h2")}, AuthType: ptr(registry.AuthNone)},
			nil, "http://new.example:8080/mcp", map[string]string{"X-Team": "h2"}},
	}
	f := newFixture(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sv := f.create(originSpec(fmt.Sprintf("origin-%d", i)))
			before := f.connection(sv.ID)

			// Test connection follows the same rule, and stores nothing.
			c, err := f.reg.PreviewConnection(f.ctx, sv.ID, tc.patch)
			if tc.wantErr != nil {
				wantFields(t, err, tc.wantErr...)
			} else if err != nil {
				t.Fatalf("preview: %v", err)
			} else if !maps.Equal(c.Headers, tc.wantHeaders) || c.URL != tc.wantURL {
				t.Fatalf("preview: got url %q headers %v, want %q %v", c.URL, c.Headers, tc.wantURL, tc.wantHeaders)
			}

			got, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, tc.patch)
			if tc.wantErr != nil {
				wantFields(t, err, tc.wantErr...)
				if u := f.storedURL(sv.ID); u != "http://127.0.0.1:3001/mcp" {
					t.Fatalf("after a refused update: got url %q, want it unchanged", u)
				}
				if after := f.connection(sv.ID); after.Fingerprint != before.Fingerprint {
					t.Fatalf("a refused update changed the connection")
				}
				if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'server.update' AND target_id = $1`, sv.ID); n != 0 {
					t.Fatalf("got %d server.update audit rows after a refused update, want 0", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if got.URL != tc.wantURL || f.storedURL(sv.ID) != tc.wantURL {
				t.Fatalf("url: got %q (stored %q), want %q", got.URL, f.storedURL(sv.ID), tc.wantURL)
			}
			if c := f.connection(sv.ID); !maps.Equal(c.Headers, tc.wantHeaders) {
				t.Fatalf("headers: got %v, want %v", c.Headers, tc.wantHeaders)
			}
		})
	}
}

func TestStoredSecretsMovedMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(originSpec("moved-msg"))
	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{URL: ptr("https://evil.example/mcp")})
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *verr.Error", err)
	}
	for _, field := range []string{"headers/X-Team", "auth_token"} {
		msg := ve.For(field)
		if !strings.Contains(msg, "http://127.0.0.1:3001") || !strings.Contains(msg, "https://evil.example") {
			t.Errorf("%s: got %q, want it to name the stored origin and the new one", field, msg)
		}
	}
	if strings.Contains(err.Error(), canary) {
		t.Fatalf("the error shows a secret value: %v", err)
	}
}

func TestOriginChangeWithoutStoredSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(registry.Spec{Name: "bare", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:3001/mcp", Enabled: true})
	if got := f.update(sv.ID, registry.Patch{URL: ptr("https://elsewhere.example/mcp")}); got.URL != "https://elsewhere.example/mcp" {
		t.Fatalf("url: got %q", got.URL)
	}
	// A stdio server has no origin: switching to HTTP is not a move.
	st := f.create(registry.Spec{Name: "was-stdio", Type: registry.TypeStdio, Command: "srv", Enabled: true})
	got := f.update(st.ID, registry.Patch{Type: ptr(registry.TypeStreamableHTTP), URL: ptr("http://h.example/mcp"),
		Command: ptr(""), Headers: map[string]*string{"X-A": ptr("a")}})
	if got.URL != "http://h.example/mcp" {
		t.Fatalf("url: got %q", got.URL)
	}
}

func TestImportPlanKeepsSecretsWithOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(originSpec("remote"))
	f.create(registry.Spec{Name: "plain", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:4001/mcp", Enabled: true})
	exported := f.export()
	if !strings.Contains(exported, "url: http://127.0.0.1:3001/mcp") || !strings.Contains(exported, "url: http://127.0.0.1:4001/mcp") {
		t.Fatalf("export:\n%s", exported)
	}

	errorsOf := func(p *registry.Plan) []string {
		var out []string
		for _, e := range p.Errors {
			out = append(out, e.Server+" "+e.Field)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name, from, to string
		wantErrors     []string
	}{
		{"as exported", "", "", nil},
		{"same origin, other path", "127.0.0.1:3001/mcp", "127.0.0.1:3001/v2/mcp", nil},
		{"other host", "127.0.0.1:3001/mcp", "evil.example:3001/mcp", []string{"remote auth.token", "remote headers.X-Team"}},
		{"other port", "127.0.0.1:3001/mcp", "127.0.0.1:3009/mcp", []string{"remote auth.token", "remote headers.X-Team"}},
		{"other host of a server without secrets", "127.0.0.1:4001/mcp", "evil.example:4001/mcp", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { // not parallel: the import below changes the servers
			file := exported
			if tt.from != "" {
				file = strings.Replace(exported, tt.from, tt.to, 1)
			}
			plan := f.plan("servers.yaml", file, false)
			if got := errorsOf(plan); !slices.Equal(got, tt.wantErrors) {
				t.Fatalf("plan errors: got %q, want %q\n%s", got, tt.wantErrors, plan)
			}
		})
	}
	// Entering the secrets again in the file makes the move acceptable.
	file := strings.Replace(exported, "127.0.0.1:3001/mcp", "new.example/mcp", 1)
	file = strings.Replace(file, "X-Team: null", "X-Team: h2", 1)
	file = strings.Replace(file, "type: bearer", "type: bearer\n      token: t2", 1)
	plan := f.plan("servers.yaml", file, false)
	if plan.HasErrors() {
		t.Fatalf("plan with the secrets entered again: got errors %v\n%s", plan.Errors, file)
	}
	if _, err := f.reg.ApplyImport(f.ctx, audit.System, plan); err != nil {
		t.Fatalf("apply: %v", err)
	}
	c := f.connection(f.serverID("remote"))
	if c.URL != "http://new.example/mcp" || !maps.Equal(c.Headers, map[string]string{"X-Team": "h2", "Authorization": "Bearer t2"}) {
		t.Fatalf("after import: got url %q headers %v", c.URL, c.Headers)
	}
}

const ghToken = "ghp_aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3" // ghp_ and 36 characters
const jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

func TestCredentialsRefusedInArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		args    []string
		wantErr []string
	}{
		// Refused.
		{"api key value after =", []string{"--api-key=sk-abcdefghijklmnopqrstuvwx"}, []string{"args/0"}},
		{"password after =", []string{"-y", "--password=hunter2"}, []string{"args/1"}},
		{"token after a secret-named flag", []string{"--token", "abc123"}, []string{"args/1"}},
		{"api key after a secret-named flag", []string{"-y", "pkg", "--api-key", "sk-abcdefghijklmnopqrstuvwx"}, []string{"args/3"}},
		{"URL with a password", []string{"postgresql://user:pw@localhost/db"}, []string{"args/0"}},
		{"URL with a password after other args", []string{"-y", "@example/pg", "postgresql://user:pw@localhost/db"}, []string{"args/2"}},
		{"JWT", []string{jwt}, []string{"args/0"}},
		{"GitHub token", []string{ghToken}, []string{"args/0"}},
		{"credential-shaped value of an innocent flag", []string{"--config=" + ghToken}, []string{"args/0"}},
		{"several", []string{"--token", "abc123", "--port", "3000", jwt}, []string{"args/1", "args/4"}},
		{"header with a literal bearer token", []string{"--header", "Authorization: Bearer abcdefghijklmnop1234"}, []string{"args/1"}},
		{"header after = with a literal token", []string{"--header=Authorization: Bearer abcdefghijklmnop1234"}, []string{"args/0"}},
		{"API key header", []string{"--header", "X-API-Key: abc123"}, []string{"args/1"}},
		{"flag and value in one argument", []string{"--token abc123"}, []string{"args/0"}},
		{"literal credential beside a reference", []string{"--auth=${API_KEY}:" + ghToken}, []string{"args/0"}},

		// Accepted.
		{"env reference after =", []string{"--api-key=${API_KEY}"}, nil},
		{"env reference alone", []string{"${API_KEY}"}, nil},
		{"env reference after a secret-named flag", []string{"--token", "${API_KEY}"}, nil},
		{"empty value after =", []string{"--token="}, nil},
		{"token file", []string{"--token-file", "/path/to/file"}, nil},
		{"port", []string{"--port", "3000"}, nil},
		{"npx package", []string{"-y", "@modelcontextprotocol/server-everything"}, nil},
		{"mcp-remote header with a reference", []string{"mcp-remote", "https://h/mcp", "--header", "Authorization: Bearer ${API_KEY}"}, nil},
		{"bearer reference after a secret-named flag", []string{"--token", "Bearer ${API_KEY}"}, nil},
		{"bearer reference after =", []string{"--api-key=Bearer ${API_KEY}"}, nil},
		{"reference with a suffix", []string{"--auth=${API_KEY}:x"}, nil},
		{"harmless header", []string{"--header", "Accept: text/plain"}, nil},
		{"a time of day", []string{"--at", "12:30"}, nil},
		{"flag after a secret-named flag", []string{"--token", "-v"}, nil},
		{"page token", []string{"--page-token", "abc"}, nil},
		{"max tokens", []string{"--max-tokens", "1000"}, nil},
		{"URL without a password", []string{"postgresql://user@localhost/db"}, nil},
		{"paths", []string{"/srv/data", "./relative/dir", "--root=/home/ada/Projects2/App3"}, nil},
		{"no args", nil, nil},
	}
	f := newFixture(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := registry.Spec{Name: fmt.Sprintf("args-%d", i), Type: registry.TypeStdio, Command: "npx", Args: tc.args,
				Env: map[string]string{"API_KEY": "k"}, Enabled: true}
			sv, err := f.reg.CreateServer(f.ctx, audit.System, sp)
			if tc.wantErr != nil {
				wantFields(t, err, tc.wantErr...)
				var ve *verr.Error
				errors.As(err, &ve)
				if msg := ve.For(tc.wantErr[0]); !strings.Contains(msg, "${NAME}") {
					t.Errorf("message %q: want it to suggest an env reference", msg)
				}
				if n := f.count(`SELECT count(*) FROM mcp_servers WHERE name = $1`, sp.Name); n != 0 {
					t.Fatalf("a refused server was stored")
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if want := tc.args; !slices.Equal(sv.Args, want) && !(len(sv.Args) == 0 && len(want) == 0) {
				t.Fatalf("args: got %q, want %q", sv.Args, want)
			}
		})
	}
}

// TestArgReferenceNeedsEnv: a ${NAME} in args must name one of the server's env
// variables, or the program would get the reference text itself.
func TestArgReferenceNeedsEnv(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.reg.CreateServer(f.ctx, audit.System, registry.Spec{Name: "refs", Type: registry.TypeStdio, Command: "npx",
		Args: []string{"--token", "${TOKEN}"}, Env: map[string]string{"OTHER": "x"}, Enabled: true})
	wantFields(t, err, "args/1")
	var ve *verr.Error
	if errors.As(err, &ve) && !strings.Contains(ve.For("args/1"), "env has no TOKEN") {
		t.Fatalf("message %q: want it to name the missing variable", ve.For("args/1"))
	}
	if _, err := f.reg.CreateServer(f.ctx, audit.System, registry.Spec{Name: "refs", Type: registry.TypeStdio, Command: "npx",
		Args: []string{"--token", "${TOKEN}"}, Env: map[string]string{"TOKEN": "x"}, Enabled: true}); err != nil {
		t.Fatalf("with TOKEN in env: %v", err)
	}
}

func TestCredentialsRefusedInArgsOnUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("args-update"))
	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Args: &[]string{"--token", "abc123"}})
	wantFields(t, err, "args/1")
	if got := mustGet(t, f, sv.ID); !slices.Equal(got.Args, []string{"-y", "@example/server"}) {
		t.Fatalf("args after a refused update: got %q", got.Args)
	}
	f.update(sv.ID, registry.Patch{Args: &[]string{"--token", "${API_KEY}"}})
}

func TestCredentialsRefusedInURLQuery(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url     string
		wantErr bool
	}{
		{"https://h/mcp?api_key=x1", true},
		{"https://h/mcp?token=abc", true},
		{"https://h/mcp?page=2&access_token=abc", true},
		{"https://h/mcp?q=" + ghToken, true},
		{"https://h/mcp?page=2", false},
		{"https://h/mcp?next_page_token=abc", false},
		{"https://h/mcp?token=", false},
		{"https://h/mcp", false},
	}
	f := newFixture(t)
	for i, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			sp := registry.Spec{Name: fmt.Sprintf("query-%d", i), Type: registry.TypeStreamableHTTP, URL: tc.url, Enabled: true}
			_, err := f.reg.CreateServer(f.ctx, audit.System, sp)
			if tc.wantErr {
				wantFields(t, err, "url")
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
		})
	}
}

func TestExpandArgs(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TOKEN": "t0k", "USER": "ada", "PASS": "pw", "EMPTY": "", "INDIRECT": "${TOKEN}"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"whole argument", []string{"--token", "${TOKEN}"}, env, []string{"--token", "t0k"}},
		{"embedded", []string{"--auth=Bearer ${TOKEN}!"}, env, []string{"--auth=Bearer t0k!"}},
		{"several in one argument", []string{"postgres://${USER}:${PASS}@db/${USER}"}, env, []string{"postgres://ada:pw@db/ada"}},
		{"empty value", []string{"x${EMPTY}y"}, env, []string{"xy"}},
		{"unknown name left alone", []string{"${OTHER}", "--a=${OTHER}-${TOKEN}"}, env, []string{"${OTHER}", "--a=${OTHER}-t0k"}},
		{"$NAME without braces left alone", []string{"$TOKEN", "$ {TOKEN}"}, env, []string{"$TOKEN", "$ {TOKEN}"}},
		{"other reference syntaxes left alone", []string{"${env:TOKEN}", "${TOKEN:-x}", "${1BAD}"}, env,
			[]string{"${env:TOKEN}", "${TOKEN:-x}", "${1BAD}"}},
		{"values are not expanded again", []string{"${INDIRECT}"}, env, []string{"${TOKEN}"}},
		{"no env", []string{"${TOKEN}"}, nil, []string{"${TOKEN}"}},
		{"no args", nil, env, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(tc.args)
			got := registry.ExpandArgs(in, tc.env)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if !slices.Equal(in, tc.args) {
				t.Fatalf("the input was modified: got %q, want %q", in, tc.args)
			}
			if len(got) > 0 {
				got[0] = "changed"
				if in[0] == "changed" {
					t.Fatal("the result shares the input's array")
				}
			}
		})
	}
}

// parseWith parses data with ${...} expansion from vars.
func parseWith(t *testing.T, name, data string, vars map[string]string) *registry.Config {
	t.Helper()
	cfg, err := registry.ParseConfig(name, []byte(data), registry.ParseOptions{ExpandEnv: true,
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return cfg
}

func TestImportKeepsArgReferencesToOwnEnv(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"TOKEN": "from-env-" + canary, "HOME": "/home/ada", "OTHER_TOKEN": "abc123", "GH": ghToken}
	cfg := parseWith(t, ".mcp.json", `{"mcpServers": {
  "env-prefix": {"command": "srv", "args": ["--token", "${env:TOKEN}"], "env": {"TOKEN": "${env:TOKEN}"}},
  "bare": {"command": "srv", "args": ["--token=${TOKEN}"], "env": {"TOKEN": "${TOKEN}"}},
  "mixed": {"command": "srv", "args": ["--home", "${env:HOME}", "--opt=${TOKEN}:${HOME}"], "env": {"TOKEN": "literal"}},
  "not-own": {"command": "srv", "args": ["--home", "${HOME}"]}
}}`, vars)
	if cfg.Format != registry.FormatClaude {
		t.Fatalf("format: got %q, want %q", cfg.Format, registry.FormatClaude)
	}
	want := map[string]struct {
		args []string
		env  map[string]string
	}{
		"env-prefix": {[]string{"--token", "${TOKEN}"}, map[string]string{"TOKEN": vars["TOKEN"]}},
		"bare":       {[]string{"--token=${TOKEN}"}, map[string]string{"TOKEN": vars["TOKEN"]}},
		"mixed":      {[]string{"--home", "/home/ada", "--opt=${TOKEN}:/home/ada"}, map[string]string{"TOKEN": "literal"}},
		"not-own":    {[]string{"--home", "/home/ada"}, map[string]string{}},
	}
	if len(cfg.Servers) != len(want) {
		t.Fatalf("got %d servers, want %d", len(cfg.Servers), len(want))
	}
	for _, sc := range cfg.Servers {
		w := want[sc.Name]
		if !slices.Equal(sc.Args, w.args) {
			t.Errorf("%s args: got %q, want %q", sc.Name, sc.Args, w.args)
		}
		if got := derefMap(sc.Env); !maps.Equal(got, w.env) {
			t.Errorf("%s env: got %v, want %v", sc.Name, got, w.env)
		}
	}

	// Planned and applied: the args are stored with the reference, the env value
	// encrypted, and ExpandArgs puts them together when the server starts.
	f := newFixture(t)
	plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.HasErrors() {
		t.Fatalf("plan errors: %v", plan.Errors)
	}
	if _, err := f.reg.ApplyImport(f.ctx, audit.System, plan); err != nil {
		t.Fatal(err)
	}
	c := f.connection(f.serverID("env-prefix"))
	if !slices.Equal(c.Args, []string{"--token", "${TOKEN}"}) || c.Env["TOKEN"] != vars["TOKEN"] {
		t.Fatalf("stored: got args %q env %v", c.Args, sortedKeys(c.Env))
	}
	if got := registry.ExpandArgs(c.Args, c.Env); !slices.Equal(got, []string{"--token", vars["TOKEN"]}) {
		t.Fatalf("expanded: got %q", got)
	}
	f.assertNoCanary(t)
}

func derefMap(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

func TestImportArgReferenceExpandedToCredential(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"OTHER_TOKEN": "abc123", "GH": ghToken, "TOKEN": "t"}
	f := newFixture(t)
	cfg := parseWith(t, ".mcp.json", `{"mcpServers": {
  "after-flag": {"command": "srv", "args": ["--token", "${env:OTHER_TOKEN}"], "env": {"TOKEN": "${env:TOKEN}"}},
  "shaped": {"command": "srv", "args": ["-y", "pkg", "${GH}"]},
  "fine": {"command": "srv", "args": ["--token", "${TOKEN}"], "env": {"TOKEN": "${TOKEN}"}}
}}`, vars)
	args := map[string][]string{}
	for _, sc := range cfg.Servers {
		args[sc.Name] = sc.Args
	}
	if !slices.Equal(args["after-flag"], []string{"--token", "abc123"}) || !slices.Equal(args["shaped"], []string{"-y", "pkg", ghToken}) {
		t.Fatalf("references to variables not in the server's env must be expanded: got %q", args)
	}
	plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range plan.Errors {
		got = append(got, e.Server+" "+e.Field)
	}
	slices.Sort(got)
	if want := []string{"after-flag args[1]", "shaped args[2]"}; !slices.Equal(got, want) {
		t.Fatalf("plan errors: got %q, want %q", got, want)
	}
}

func TestImportArgReferencesWithoutExpansion(t *testing.T) {
	t.Parallel()
	// The web upload does not expand: a reference to the server's own env is still
	// written ${NAME}, so it is substituted from the env at start.
	cfg, err := registry.ParseConfig(".mcp.json", []byte(`{"mcpServers": {
  "s": {"command": "srv", "args": ["--token", "${env:TOKEN}"], "env": {"TOKEN": "${env:TOKEN}"}}}}`), registry.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers[0].Args; !slices.Equal(got, []string{"--token", "${TOKEN}"}) {
		t.Fatalf("args: got %q, want the reference as ${TOKEN}", got)
	}
	for _, w := range cfg.Warnings {
		if strings.HasPrefix(w.Field, "args") {
			t.Errorf("unexpected warning about args: %s", w)
		}
	}
	// VS Code: ${env:TOKEN} becomes ${TOKEN}; ${TOKEN} naming the server's env is kept.
	cfg = parseWith(t, "mcp.json", `{"servers": {
  "v": {"type": "stdio", "command": "srv", "args": ["--a", "${env:TOKEN}", "--b", "${TOKEN}"], "env": {"TOKEN": "${env:TOKEN}"}}}}`,
		map[string]string{"TOKEN": "tv"})
	if cfg.Format != registry.FormatVSCode {
		t.Fatalf("format: got %q", cfg.Format)
	}
	if got := cfg.Servers[0].Args; !slices.Equal(got, []string{"--a", "${TOKEN}", "--b", "${TOKEN}"}) {
		t.Fatalf("vs code args: got %q", got)
	}
	if v := cfg.Servers[0].Env["TOKEN"]; v == nil || *v != "tv" {
		t.Fatalf("vs code env TOKEN: got %v, want tv", v)
	}
}

// commandFile is a native file listing files (stdio), remote (HTTP) and, from extra,
// more servers; it matches what commandFixture stores.
func commandFile(files, remote, extra string) string {
	if files == "" {
		files = "  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /srv, env: {ROOT: null}}\n"
	}
	if remote == "" {
		remote = "  - {name: remote, type: streamable_http, url: 'http://127.0.0.1:5/mcp'}\n"
	}
	return "version: 1\nservers:\n" + files + remote + extra
}

func commandFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.create(registry.Spec{Name: "files", Description: "local files", Type: registry.TypeStdio, Command: "npx",
		Args: []string{"-y", "fs"}, WorkingDir: "/srv", Env: map[string]string{"ROOT": "/data"}, Enabled: true})
	f.create(registry.Spec{Name: "remote", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:5/mcp", Enabled: true})
	f.create(registry.Spec{Name: "legacy", Type: registry.TypeStdio, Command: "old", Enabled: true})
	return f
}

func TestPlanCommandChanges(t *testing.T) {
	t.Parallel()
	f := commandFixture(t)
	const filesWith = "  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /srv, env: {ROOT: null}%s}\n"
	tests := []struct {
		name         string
		file         string
		prune        bool
		wantActions  map[string]string // checked for the names given
		wantCommands []string
	}{
		{"nothing changes", commandFile("", "", ""), false,
			map[string]string{"files": registry.PlanUnchanged, "remote": registry.PlanUnchanged, "legacy": registry.PlanKeep}, nil},
		{"stdio server created", commandFile("", "", "  - {name: new-stdio, type: stdio, command: x}\n"), false,
			map[string]string{"new-stdio": registry.PlanCreate}, []string{"new-stdio"}},
		{"HTTP server created", commandFile("", "", "  - {name: new-http, type: streamable_http, url: 'http://127.0.0.1:6/mcp'}\n"), false,
			map[string]string{"new-http": registry.PlanCreate}, nil},
		{"stdio description only", commandFile(
			"  - {name: files, type: stdio, description: other words, command: npx, args: [-y, fs], working_dir: /srv, env: {ROOT: null}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, nil},
		{"stdio timeout and trust", commandFile(fmt.Sprintf(filesWith, ", timeout_ms: 5000, trusted: true"), "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, nil},
		{"stdio env value the same as stored", commandFile(
			"  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /srv, env: {ROOT: /data}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUnchanged}, nil},
		{"stdio args", commandFile(
			"  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs, --ro], working_dir: /srv, env: {ROOT: null}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, []string{"files"}},
		{"stdio command", commandFile(
			"  - {name: files, type: stdio, description: local files, command: node, args: [-y, fs], working_dir: /srv, env: {ROOT: null}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, []string{"files"}},
		{"stdio working dir", commandFile(
			"  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /tmp, env: {ROOT: null}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, []string{"files"}},
		{"stdio env value", commandFile(
			"  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /srv, env: {ROOT: /other}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, []string{"files"}},
		{"stdio env added", commandFile(
			"  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /srv, env: {ROOT: null, MORE: x}}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, []string{"files"}},
		{"stdio env removed", commandFile(
			"  - {name: files, type: stdio, description: local files, command: npx, args: [-y, fs], working_dir: /srv}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, []string{"files"}},
		{"HTTP server becomes stdio", commandFile("", "  - {name: remote, type: stdio, command: remote-stdio}\n", ""), false,
			map[string]string{"remote": registry.PlanUpdate}, []string{"remote"}},
		{"stdio server becomes HTTP", commandFile("  - {name: files, type: streamable_http, url: 'http://127.0.0.1:7/mcp'}\n", "", ""), false,
			map[string]string{"files": registry.PlanUpdate}, nil},
		{"stdio server deleted", commandFile("", "", ""), true,
			map[string]string{"legacy": registry.PlanDelete}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := f.plan("servers.yaml", tt.file, tt.prune)
			if plan.HasErrors() {
				t.Fatalf("plan errors: %v", plan.Errors)
			}
			for _, it := range plan.Items {
				if want, ok := tt.wantActions[it.Name]; ok && it.Action != want {
					t.Errorf("%s: got %s %v, want %s", it.Name, it.Action, it.Changes, want)
				}
			}
			if got := plan.CommandChanges(); !slices.Equal(got, tt.wantCommands) {
				t.Fatalf("CommandChanges: got %q, want %q\n%s", got, tt.wantCommands, plan)
			}
		})
	}
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestPlanDigest(t *testing.T) {
	t.Parallel()
	f := commandFixture(t)
	// A Claude Desktop file says nothing about descriptions: editing one changes no
	// field of the plan, only the registration it was planned against.
	const file = `{"mcpServers": {"files": {"command": "npx", "args": ["-y", "fs", "--ro"], "env": {"ROOT": "/data"}},
		"new-one": {"command": "x"}}}`
	digest := func(prune bool) string {
		t.Helper()
		d := f.plan("claude_desktop_config.json", file, prune).Digest()
		if !hex64.MatchString(d) {
			t.Fatalf("digest: got %q, want 64 hex characters", d)
		}
		return d
	}
	first, second := digest(false), digest(false)
	if first != second {
		t.Fatalf("the same file against the same registrations: got digests %s and %s, want them equal", first, second)
	}
	pruned := digest(true)
	if pruned == first {
		t.Fatalf("prune: got the same digest with and without, want them to differ (legacy is deleted or kept)")
	}
	if again := digest(true); again != pruned {
		t.Fatalf("pruning plan twice: got %s and %s", pruned, again)
	}

	f.update(f.serverID("files"), registry.Patch{Description: ptr("edited meanwhile")})
	afterEdit := digest(false)
	if afterEdit == first {
		t.Fatal("a server in the file was updated between two plans: got the same digest, want another")
	}
	if again := digest(false); again != afterEdit {
		t.Fatalf("after the edit, planned twice: got %s and %s", afterEdit, again)
	}

	// Another file gives another digest.
	other := f.plan("claude_desktop_config.json", `{"mcpServers": {"files": {"command": "npx", "args": ["-y", "fs"]}}}`, false).Digest()
	if other == afterEdit {
		t.Fatal("another file: got the same digest")
	}
}

func TestPlanDigestPruneNeedsUnlistedServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "only", Type: registry.TypeStdio, Command: "x", Enabled: true})
	const file = "version: 1\nservers:\n  - {name: only, type: stdio, command: x}\n"
	if a, b := f.plan("s.yaml", file, false).Digest(), f.plan("s.yaml", file, true).Digest(); a != b {
		t.Fatalf("every server is in the file, so prune changes nothing: got digests %s and %s, want them equal", a, b)
	}
}

func TestChangesCommand(t *testing.T) {
	t.Parallel()
	stdioCur := &registry.Server{ID: "00000000-0000-0000-0000-000000000001", Name: "files", Type: registry.TypeStdio,
		Command: "npx", Args: []string{"-y", "fs"}, WorkingDir: "/srv", Env: map[string]string{"ROOT": "cipher-root"},
		AuthType: registry.AuthNone, TimeoutMS: registry.DefaultTimeoutMS, Retries: registry.DefaultRetries,
		HealthIntervalMS: registry.DefaultHealthIntervalMS, Enabled: true}
	noArgs := *stdioCur
	noArgs.Args, noArgs.Env = []string{}, map[string]string{}
	httpCur := &registry.Server{ID: "00000000-0000-0000-0000-000000000002", Name: "remote", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:5/mcp", Args: []string{}, Headers: map[string]string{"X-A": "cipher-a"}, AuthType: registry.AuthNone,
		TimeoutMS: registry.DefaultTimeoutMS, Retries: registry.DefaultRetries, HealthIntervalMS: registry.DefaultHealthIntervalMS}
	cases := []struct {
		name  string
		cur   *registry.Server
		patch registry.Patch
		want  bool
	}{
		{"new stdio", nil, registry.PatchFromSpec(stdioSpec("n")), true},
		{"new stdio, command only", nil, registry.Patch{Type: ptr(registry.TypeStdio), Command: ptr("x")}, true},
		{"new streamable HTTP", nil, registry.PatchFromSpec(httpSpec("n")), false},
		{"new SSE", nil, registry.Patch{Type: ptr(registry.TypeSSE), URL: ptr("http://127.0.0.1:1/sse")}, false},
		{"new without a type", nil, registry.Patch{Name: ptr("n")}, false},

		{"stdio, nothing", stdioCur, registry.Patch{}, false},
		{"stdio, name description enabled", stdioCur,
			registry.Patch{Name: ptr("renamed"), Description: ptr("d"), Enabled: ptr(false), Trusted: ptr(true), TimeoutMS: ptr(1000)}, false},
		{"stdio, same command and args again", stdioCur,
			registry.Patch{Type: ptr(registry.TypeStdio), Command: ptr("npx"), Args: &[]string{"-y", "fs"}, WorkingDir: ptr("/srv")}, false},
		{"stdio, same command with spaces", stdioCur, registry.Patch{Command: ptr(" npx ")}, false},
		{"stdio without args, empty args", &noArgs, registry.Patch{Args: &[]string{}}, false},
		{"stdio, removing an env name it does not have", stdioCur, registry.Patch{Env: map[string]*string{"NOPE": nil}}, false},
		{"stdio, headers touched", stdioCur, registry.Patch{Headers: map[string]*string{"X-A": nil}}, false},
		{"stdio, command", stdioCur, registry.Patch{Command: ptr("node")}, true},
		{"stdio, args", stdioCur, registry.Patch{Args: &[]string{"-y", "fs", "--ro"}}, true},
		{"stdio, args cleared", stdioCur, registry.Patch{Args: &[]string{}}, true},
		{"stdio, args reordered", stdioCur, registry.Patch{Args: &[]string{"fs", "-y"}}, true},
		{"stdio, working dir", stdioCur, registry.Patch{WorkingDir: ptr("/tmp")}, true},
		{"stdio, env value set", stdioCur, registry.Patch{Env: map[string]*string{"ROOT": ptr("/other")}}, true},
		{"stdio, env name added", stdioCur, registry.Patch{Env: map[string]*string{"MORE": ptr("x")}}, true},
		{"stdio, env name removed", stdioCur, registry.Patch{Env: map[string]*string{"ROOT": nil}}, true},
		{"stdio, env replaced with nothing", stdioCur, registry.Patch{ReplaceEnv: true}, true},
		{"stdio becomes HTTP", stdioCur, registry.Patch{Type: ptr(registry.TypeStreamableHTTP), URL: ptr("http://127.0.0.1:9/mcp"),
			Command: ptr(""), Args: &[]string{}, ReplaceEnv: true}, false},

		{"HTTP, URL and headers", httpCur, registry.Patch{URL: ptr("http://127.0.0.1:6/mcp"), Headers: map[string]*string{"X-A": ptr("b")}}, false},
		{"HTTP becomes stdio", httpCur, registry.Patch{Type: ptr(registry.TypeStdio), Command: ptr("srv"), URL: ptr("")}, true},
		{"HTTP becomes SSE", httpCur, registry.Patch{Type: ptr(registry.TypeSSE)}, false},
		// Judged as stored: CRLF line ends over the 256 KiB limit as sent, under it once
		// normalized, hid the command from the check.
		{"new template with a command, CRLF padded", nil, registry.Patch{Type: ptr(registry.TypeTemplate),
			Template: ptr("tools:\r\n  - name: run\r\n    command:\r\n      argv: [id]\r\n" + strings.Repeat("#\r\n", 100_000))}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var before registry.Server
			if tc.cur != nil {
				before = *tc.cur
				before.Args, before.Env = slices.Clone(tc.cur.Args), maps.Clone(tc.cur.Env)
			}
			if got := registry.ChangesCommand(tc.cur, tc.patch); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if tc.cur != nil && (!slices.Equal(before.Args, tc.cur.Args) || !maps.Equal(before.Env, tc.cur.Env) || before.Command != tc.cur.Command) {
				t.Fatal("ChangesCommand modified the server it was given")
			}
		})
	}
}

// TestChangesCommandStoredServer uses servers as GetServer returns them.
func TestChangesCommandStoredServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := mustGet(t, f, f.create(stdioSpec("cmd-stdio")).ID)
	bare := mustGet(t, f, f.create(registry.Spec{Name: "cmd-bare", Type: registry.TypeStdio, Command: "x", Enabled: true}).ID)
	if registry.ChangesCommand(&st, registry.Patch{Description: ptr("d")}) {
		t.Error("description only: got true")
	}
	if registry.ChangesCommand(&bare, registry.Patch{Args: &[]string{}}) || registry.ChangesCommand(&bare, registry.Patch{Args: nil}) {
		t.Error("no args either way: got true")
	}
	if !registry.ChangesCommand(&st, registry.Patch{Env: map[string]*string{"API_KEY": ptr("k2")}}) {
		t.Error("env value: got false")
	}
}

func TestAuditTest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ada := audit.Actor{Kind: audit.ActorUser, Name: "ada"}

	sp := stdioSpec("audited-stdio")
	sp.Args = []string{"--token", "${API_KEY}"}
	sp.Env = map[string]string{"API_KEY": canary + "-env", "ROOT": canary + "-root"}
	st := f.create(sp)
	hp := originSpec("audited-http")
	hsv := f.create(hp)
	before := f.count(`SELECT count(*) FROM audit_log`)

	if err := f.reg.AuditTest(f.ctx, ada, st.ID, f.connection(st.ID)); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.AuditTest(f.ctx, ada, hsv.ID, f.connection(hsv.ID)); err != nil {
		t.Fatal(err)
	}
	preview, err := f.reg.PreviewConnection(f.ctx, "", registry.PatchFromSpec(originSpec("not-saved")))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.AuditTest(f.ctx, ada, "", preview); err != nil {
		t.Fatal(err)
	}
	if after := f.count(`SELECT count(*) FROM audit_log`); after != before+3 {
		t.Fatalf("got %d new audit rows, want 3 (one per test)", after-before)
	}

	type row struct{ actor, target, name, payload string }
	var rows []row
	r, err := f.pool.Query(f.ctx, `SELECT actor_name, target_type || '/' || target_id, target_name, payload::text
		FROM audit_log WHERE action = 'server.test' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var x row
		if err := r.Scan(&x.actor, &x.target, &x.name, &x.payload); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, x)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("got %d server.test rows, want 3", len(rows))
	}
	wantRows := []row{{"ada", "server/" + st.ID, "audited-stdio", ""}, {"ada", "server/" + hsv.ID, "audited-http", ""},
		{"ada", "server/", "not-saved", ""}}
	for i, w := range wantRows {
		if g := rows[i]; g.actor != w.actor || g.target != w.target || g.name != w.name {
			t.Errorf("row %d: got %s %s %s, want %s %s %s", i, g.actor, g.target, g.name, w.actor, w.target, w.name)
		}
		if strings.Contains(rows[i].payload, canary) {
			t.Errorf("row %d: payload holds a secret value: %s", i, rows[i].payload)
		}
	}
	p := decodeAll(t, []string{rows[0].payload, rows[1].payload, rows[2].payload})
	if fmt.Sprint(p[0]["env_names"]) != "[API_KEY ROOT]" || p[0]["command"] != "npx" ||
		fmt.Sprint(p[0]["args"]) != "[--token ${API_KEY}]" || p[0]["saved"] != true || p[0]["type"] != registry.TypeStdio {
		t.Errorf("stdio payload: got %v", p[0])
	}
	if _, ok := p[0]["header_names"]; ok {
		t.Errorf("stdio payload: got header_names %v", p[0])
	}
	if fmt.Sprint(p[1]["header_names"]) != "[Authorization X-Team]" || p[1]["url"] != "http://127.0.0.1:3001/mcp" ||
		p[1]["saved"] != true || p[1]["type"] != registry.TypeStreamableHTTP {
		t.Errorf("http payload: got %v", p[1])
	}
	if _, ok := p[1]["env_names"]; ok {
		t.Errorf("http payload: got env_names %v", p[1])
	}
	if p[2]["saved"] != false || fmt.Sprint(p[2]["header_names"]) != "[Authorization X-Team]" {
		t.Errorf("unsaved payload: got %v", p[2])
	}
	f.assertNoCanary(t)
}

// TestKeepCommand: a patch marked KeepCommand (a caller without server.command) is
// refused when, against the row locked for the update, it changes what a stdio server
// runs — so two concurrent edits cannot combine into a change neither was checked for.
func TestKeepCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(registry.Spec{Name: "fs", Type: registry.TypeStdio, Command: "python3", Args: []string{"-m", "srv", "--read-only"}, Enabled: false})
	web := f.create(registry.Spec{Name: "web", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:9/mcp", Enabled: false})
	cases := []struct {
		name    string
		id      string
		p       registry.Patch
		refused bool
	}{
		{"description", sv.ID, registry.Patch{Description: ptr("files")}, false},
		{"same command restated", sv.ID, registry.Patch{Command: ptr("python3"), Args: &[]string{"-m", "srv", "--read-only"}}, false},
		{"args", sv.ID, registry.Patch{Args: &[]string{"-m", "srv"}}, true},
		{"command", sv.ID, registry.Patch{Command: ptr("sh")}, true},
		{"env", sv.ID, registry.Patch{Env: map[string]*string{"X": ptr("1")}}, true},
		{"http server becomes stdio", web.ID, registry.Patch{Type: ptr(registry.TypeStdio), URL: ptr(""), Command: ptr("sh")}, true},
	}
	for _, tc := range cases {
		tc.p.KeepCommand = true
		_, err := f.reg.UpdateServer(f.ctx, audit.System, tc.id, tc.p)
		if got := errors.Is(err, registry.ErrCommandChange); got != tc.refused {
			t.Errorf("%s: got %v, want refused=%v", tc.name, err, tc.refused)
		}
		_, err = f.reg.PreviewConnection(f.ctx, tc.id, tc.p)
		if got := errors.Is(err, registry.ErrCommandChange); got != tc.refused {
			t.Errorf("%s (preview): got %v, want refused=%v", tc.name, err, tc.refused)
		}
	}
	if got := mustGet(t, f, sv.ID); got.Command != "python3" || len(got.Args) != 3 {
		t.Fatalf("the stdio server changed: %s %q", got.Command, got.Args)
	}
	if _, err := f.reg.PreviewConnection(f.ctx, "", registry.Patch{Name: ptr("new"), Type: ptr(registry.TypeStdio), Command: ptr("sh"), KeepCommand: true}); !errors.Is(err, registry.ErrCommandChange) {
		t.Errorf("preview of a new stdio server with KeepCommand: %v", err)
	}
}

// TestWorkingDirOnlyForStdio: an HTTP server cannot hold a working directory (it would
// come back if the server were switched to stdio).
func TestWorkingDirOnlyForStdio(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.reg.CreateServer(f.ctx, audit.System, registry.Spec{Name: "web", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:9/mcp", WorkingDir: "/tmp/mine"})
	wantFields(t, err, "working_dir")
}

// TestOldArgsStillEditable: the plain-text rules apply to what a change sets, so a
// server stored before them (a token in its args) can still be renamed or disabled; a
// change of its args is checked.
func TestOldArgsStillEditable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(registry.Spec{Name: "legacy", Type: registry.TypeStdio, Command: "npx", Enabled: false})
	if _, err := f.pool.Exec(f.ctx, `UPDATE mcp_servers SET args = '["--token", "abc123", "${HOME}"]' WHERE id = $1`, sv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Description: ptr("old"), Enabled: ptr(true)}); err != nil {
		t.Fatalf("editing a legacy server: %v", err)
	}
	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Args: &[]string{"--token", "abc123", "${HOME}", "-v"}})
	wantFields(t, err, "args/1", "args/2")
}

// A tool's secret parameter values stay with their server's origin too: the router
// sends them, as arguments, wherever the server is. Moving it elsewhere is refused
// (through an update and an import) while one is stored, naming the tool; moving
// within the origin, or after the value was cleared, is not.
func TestToolSecretsStayWithOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(registry.Spec{Name: "keyed", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:3001/mcp", Enabled: true})
	f.discover(sv.ID, discovery("connect", tool("search", "finds", map[string]string{"q": `{"type":"string"}`, "api_key": `{"type":"string"}`}),
		tool("plain", "no secret", map[string]string{"q": `{"type":"string"}`})))
	// The value as the tools service stores it (encrypted: only its shape matters here).
	f.exec(`UPDATE mcp_tools SET configuration = '{"params":{"api_key":{"mode":"fixed","secret":"v1:k:sealed"}}}'
		WHERE server_id = $1 AND name = 'search'`, sv.ID)

	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{URL: ptr("https://evil.example/mcp")})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("url"), "(search)") || !strings.Contains(ve.For("url"), "https://evil.example") {
		t.Fatalf("moving a server whose tool keeps a secret value: %v", err)
	}
	if got := f.storedURL(sv.ID); got != "http://127.0.0.1:3001/mcp" {
		t.Fatalf("url after the refusal: %s", got)
	}
	plan := f.plan("servers.yaml", "version: 1\nservers:\n  - {name: keyed, type: streamable_http, url: 'https://evil.example/mcp'}\n", false)
	if len(plan.Errors) != 1 || plan.Errors[0].Field != "url" || !strings.Contains(plan.Errors[0].Message, "(search)") {
		t.Fatalf("an import moving it: %+v", plan.Errors)
	}
	f.update(sv.ID, registry.Patch{URL: ptr("http://127.0.0.1:3001/v2/mcp")}) // the same origin

	f.exec(`UPDATE mcp_tools SET configuration = '{}' WHERE server_id = $1`, sv.ID)
	if got := f.update(sv.ID, registry.Patch{URL: ptr("https://elsewhere.example/mcp")}); got.URL != "https://elsewhere.example/mcp" {
		t.Fatalf("url after the value was cleared: %s", got.URL)
	}
}

// A tool's secret value stays with what the tool reached when it was set: a type change
// to or from stdio or template, or a template tool sent to another origin (or from a
// command to a request), is refused while the tool keeps such a value, here and in an
// import. Tool managers (KeepCommand) could otherwise send it to a host of their own.
func TestToolSecretsStayWithTarget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const sealedConfig = `{"params":{"api_key":{"mode":"fixed","secret":"v1:k:sealed"}}}`
	withKey := map[string]string{"q": `{"type":"string"}`, "api_key": `{"type":"string"}`}
	refused := func(what string, err error, field, names string) {
		t.Helper()
		var ve *verr.Error
		if !errors.As(err, &ve) || !strings.Contains(ve.For(field), names) {
			t.Fatalf("%s: got %v, want an error on %s naming %s", what, err, field, names)
		}
	}

	// A stdio server turned into an HTTP one by a tool manager.
	local := f.create(stdioSpec("local"))
	f.discover(local.ID, discovery("connect", tool("search", "finds", withKey)))
	f.exec(`UPDATE mcp_tools SET configuration = $2 WHERE server_id = $1`, local.ID, sealedConfig)
	_, err := f.reg.UpdateServer(f.ctx, audit.System, local.ID, registry.Patch{Type: ptr(registry.TypeStreamableHTTP),
		URL: ptr("https://evil.example/mcp"), Command: ptr(""), Args: &[]string{}, Env: map[string]*string{"API_KEY": nil}, KeepCommand: true})
	refused("stdio to HTTP", err, "type", "(search)")
	if got := mustGet(t, f, local.ID); got.Type != registry.TypeStdio {
		t.Fatalf("type after the refusal: %s", got.Type)
	}
	plan := f.plan("servers.yaml", "version: 1\nservers:\n  - {name: local, type: streamable_http, url: 'https://evil.example/mcp'}\n", false)
	if len(plan.Errors) != 1 || plan.Errors[0].Field != "type" || !strings.Contains(plan.Errors[0].Message, "(search)") {
		t.Fatalf("an import turning it into HTTP: %+v", plan.Errors)
	}

	// An HTTP server turned into a stdio one (by an administrator) is refused too.
	remote := f.create(registry.Spec{Name: "remote", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:3001/mcp", Enabled: true})
	f.discover(remote.ID, discovery("connect", tool("search", "finds", withKey)))
	f.exec(`UPDATE mcp_tools SET configuration = $2 WHERE server_id = $1`, remote.ID, sealedConfig)
	_, err = f.reg.UpdateServer(f.ctx, audit.System, remote.ID, registry.Patch{Type: ptr(registry.TypeStdio), URL: ptr(""), Command: ptr("sh")})
	refused("HTTP to stdio", err, "type", "(search)")

	// A template whose HTTP tool is sent to another host.
	tpl := strings.Replace(tplHTTP, "{city: {type: string}}", "{city: {type: string}, api_key: {type: string}}", 1)
	tpl = strings.Replace(tpl, "/w/{city}", "/w/{city}?key={api_key}", 1)
	weather := f.create(templateSpec("weather", tpl))
	f.discover(weather.ID, discovery("connect", tool("weather", "forecast", withKey)))
	f.exec(`UPDATE mcp_tools SET configuration = $2 WHERE server_id = $1`, weather.ID, sealedConfig)
	moved := strings.Replace(tpl, "https://api.example.com", "https://evil.example", 1)
	_, err = f.reg.UpdateServer(f.ctx, audit.System, weather.ID, registry.Patch{Template: &moved, KeepCommand: true})
	refused("template tool moved", err, "template", "weather")
	if got := mustGet(t, f, weather.ID); got.Template != tpl {
		t.Fatalf("template after the refusal: %s", got.Template)
	}
	plan = f.plan("servers.yaml", "version: 1\nservers:\n  - name: weather\n    type: template\n    template: |\n"+indent(moved, "      "), false)
	if len(plan.Errors) != 1 || plan.Errors[0].Field != "template" || !strings.Contains(plan.Errors[0].Message, "weather") {
		t.Fatalf("an import moving the template tool: %+v", plan.Errors)
	}
	// A template server turned into an HTTP one.
	_, err = f.reg.UpdateServer(f.ctx, audit.System, weather.ID, registry.Patch{Type: ptr(registry.TypeStreamableHTTP),
		Template: ptr(""), URL: ptr("https://api.example.com/mcp"), KeepCommand: true})
	refused("template to HTTP", err, "type", "(weather)")
	// The same origin, another path: the value goes where it went.
	samePlace := strings.Replace(tpl, "/w/{city}", "/v2/w/{city}", 1)
	f.update(weather.ID, registry.Patch{Template: &samePlace})

	// A template's command tool turned into a request.
	cmd := strings.Replace(tplCommand, "{text: {type: string}}", "{text: {type: string}, api_key: {type: string}}", 1)
	words := f.create(templateSpec("words", cmd))
	f.discover(words.ID, discovery("connect", tool("word_count", "counts", withKey)))
	f.exec(`UPDATE mcp_tools SET configuration = $2 WHERE server_id = $1`, words.ID, sealedConfig)
	asRequest := "tools:\n  - name: word_count\n    input_schema: {type: object, properties: {text: {type: string}, api_key: {type: string}}}\n" +
		"    http: {url: \"https://evil.example/c?key={api_key}\"}\n"
	_, err = f.reg.UpdateServer(f.ctx, audit.System, words.ID, registry.Patch{Template: &asRequest, KeepCommand: true})
	refused("template command tool turned into a request", err, "template", "word_count")

	// Once the values are cleared, each move is allowed.
	f.exec(`UPDATE mcp_tools SET configuration = '{}'`)
	f.update(local.ID, registry.Patch{Type: ptr(registry.TypeStreamableHTTP), URL: ptr("https://elsewhere.example/mcp"),
		Command: ptr(""), Args: &[]string{}, Env: map[string]*string{"API_KEY": nil}})
	f.update(weather.ID, registry.Patch{Template: &moved})
	f.update(words.ID, registry.Patch{Template: &asRequest})
}

// indent prefixes each line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+prefix) + "\n"
}

// A server whose URL a stricter egress policy refuses since it was registered can still
// be disabled (and edited while disabled), but not enabled.
func TestDisableUnderAStricterEgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv, err := f.reg.CreateServer(f.ctx, audit.System, registry.Spec{Name: "far", Type: registry.TypeStreamableHTTP,
		URL: "http://192.0.2.10:8080/mcp", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	strict, err := egress.Parse("127.0.0.0/8", "")
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(f.pool, f.keys, &registry.Options{Egress: strict})
	if _, err := reg.SetEnabled(f.ctx, audit.System, sv.ID, false); err != nil {
		t.Fatalf("disable under the stricter policy: %v", err)
	}
	desc := "kept off"
	if _, err := reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Description: &desc}); err != nil {
		t.Fatalf("edit the disabled server: %v", err)
	}
	var ve *verr.Error
	if _, err := reg.SetEnabled(f.ctx, audit.System, sv.ID, true); !errors.As(err, &ve) || ve.For("url") == "" {
		t.Fatalf("enable under the stricter policy: got %v, want the URL refused", err)
	}
}
