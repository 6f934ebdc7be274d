package registry_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

func TestCreateServerValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stdio := func(mod func(*registry.Spec)) registry.Spec {
		sp := stdioSpec("files")
		mod(&sp)
		return sp
	}
	http := func(mod func(*registry.Spec)) registry.Spec {
		sp := httpSpec("remote")
		mod(&sp)
		return sp
	}
	cases := []struct {
		name string
		spec registry.Spec
		want []string
	}{
		{"name empty", stdio(func(s *registry.Spec) { s.Name = "" }), []string{"name"}},
		{"name blank", stdio(func(s *registry.Spec) { s.Name = "   " }), []string{"name"}},
		{"name 49 chars", stdio(func(s *registry.Spec) { s.Name = strings.Repeat("a", 49) }), []string{"name"}},
		{"name upper case", stdio(func(s *registry.Spec) { s.Name = "Files" }), []string{"name"}},
		{"name underscore", stdio(func(s *registry.Spec) { s.Name = "files_prod" }), []string{"name"}},
		{"name dot", stdio(func(s *registry.Spec) { s.Name = "files.prod" }), []string{"name"}},
		{"name unicode", stdio(func(s *registry.Spec) { s.Name = "fïles" }), []string{"name"}},
		{"description too long", stdio(func(s *registry.Spec) { s.Description = strings.Repeat("d", registry.MaxDescription+1) }), []string{"description"}},
		{"type missing", stdio(func(s *registry.Spec) { s.Type = "" }), []string{"type"}},
		{"type unknown", stdio(func(s *registry.Spec) { s.Type = "http" }), []string{"type"}},
		{"type wrong case", stdio(func(s *registry.Spec) { s.Type = "STDIO" }), []string{"type"}},
		{"stdio without command", stdio(func(s *registry.Spec) { s.Command = "" }), []string{"command"}},
		{"stdio blank command", stdio(func(s *registry.Spec) { s.Command = "  \t" }), []string{"command"}},
		{"stdio command with NUL", stdio(func(s *registry.Spec) { s.Command = "np\x00x" }), []string{"command"}},
		{"stdio arg with NUL", stdio(func(s *registry.Spec) { s.Args = []string{"ok", "b\x00d"} }), []string{"args/1"}},
		{"stdio relative working_dir", stdio(func(s *registry.Spec) { s.WorkingDir = "srv/data" }), []string{"working_dir"}},
		{"stdio dot working_dir", stdio(func(s *registry.Spec) { s.WorkingDir = "./data" }), []string{"working_dir"}},
		{"env name starts with digit", stdio(func(s *registry.Spec) { s.Env = map[string]string{"1KEY": "v"} }), []string{"env/1KEY"}},
		{"env name with dash", stdio(func(s *registry.Spec) { s.Env = map[string]string{"API-KEY": "v"} }), []string{"env/API-KEY"}},
		{"env name with equals", stdio(func(s *registry.Spec) { s.Env = map[string]string{"A=B": "v"} }), []string{"env/A=B"}},
		{"env name empty", stdio(func(s *registry.Spec) { s.Env = map[string]string{"": "v"} }), []string{"env/"}},
		{"env value with NUL", stdio(func(s *registry.Spec) { s.Env = map[string]string{"API_KEY": "a\x00b"} }), []string{"env/API_KEY"}},
		{"headers on stdio", stdio(func(s *registry.Spec) { s.Headers = map[string]string{"X-Trace": "1"} }), []string{"headers"}},
		{"auth on stdio", stdio(func(s *registry.Spec) { s.AuthType, s.AuthToken = registry.AuthBearer, "t" }), []string{"auth_type"}},
		{"http without url", http(func(s *registry.Spec) { s.URL = "" }), []string{"url"}},
		{"url ftp scheme", http(func(s *registry.Spec) { s.URL = "ftp://127.0.0.1/mcp" }), []string{"url"}},
		{"url without scheme", http(func(s *registry.Spec) { s.URL = "127.0.0.1:3001/mcp" }), []string{"url"}},
		{"url file scheme", http(func(s *registry.Spec) { s.URL = "file:///etc/passwd" }), []string{"url"}},
		{"url without host", http(func(s *registry.Spec) { s.URL = "http:///mcp" }), []string{"url"}},
		{"url with credentials", http(func(s *registry.Spec) { s.URL = "http://user:pw@127.0.0.1:3001/mcp" }), []string{"url"}},
		{"url with user only", http(func(s *registry.Spec) { s.URL = "https://user@example.com/mcp" }), []string{"url"}},
		{"url with fragment", http(func(s *registry.Spec) { s.URL = "http://127.0.0.1:3001/mcp#frag" }), []string{"url"}},
		{"url unparsable", http(func(s *registry.Spec) { s.URL = "http://[::1/mcp" }), []string{"url"}},
		{"env on http", http(func(s *registry.Spec) { s.Env = map[string]string{"API_KEY": "v"} }), []string{"env"}},
		{"command on http", http(func(s *registry.Spec) { s.Command = "npx" }), []string{"command"}},
		{"args on http", http(func(s *registry.Spec) { s.Args = []string{"x"} }), []string{"command"}},
		{"reserved header content-type", http(func(s *registry.Spec) { s.Headers = map[string]string{"Content-Type": "text/plain"} }), []string{"headers/Content-Type"}},
		{"reserved header host", http(func(s *registry.Spec) { s.Headers = map[string]string{"host": "evil"} }), []string{"headers/host"}},
		{"reserved header session id", http(func(s *registry.Spec) { s.Headers = map[string]string{"Mcp-Session-Id": "x"} }), []string{"headers/Mcp-Session-Id"}},
		{"reserved header protocol version", http(func(s *registry.Spec) { s.Headers = map[string]string{"MCP-Protocol-Version": "x"} }), []string{"headers/MCP-Protocol-Version"}},
		{"header name with space", http(func(s *registry.Spec) { s.Headers = map[string]string{"Bad Header": "x"} }), []string{"headers/Bad Header"}},
		{"header name with colon", http(func(s *registry.Spec) { s.Headers = map[string]string{"X-A:b": "x"} }), []string{"headers/X-A:b"}},
		{"duplicate header names differing in case", http(func(s *registry.Spec) {
			s.Headers = map[string]string{"X-Api-Key": "a", "x-api-key": "b"}
		}), []string{"headers/x-api-key"}},
		{"header value with CRLF", http(func(s *registry.Spec) { s.Headers = map[string]string{"X-Trace": "1\r\nX-Injected: yes"} }), []string{"headers/X-Trace"}},
		{"header value with LF", http(func(s *registry.Spec) { s.Headers = map[string]string{"X-Trace": "1\nb"} }), []string{"headers/X-Trace"}},
		{"header value with CR", http(func(s *registry.Spec) { s.Headers = map[string]string{"X-Trace": "1\rb"} }), []string{"headers/X-Trace"}},
		{"auth type unknown", http(func(s *registry.Spec) { s.AuthType, s.AuthToken = "basic", "t" }), []string{"auth_type"}},
		{"bearer without token", http(func(s *registry.Spec) { s.AuthType = registry.AuthBearer }), []string{"auth_token"}},
		{"bearer token with CRLF", http(func(s *registry.Spec) { s.AuthType, s.AuthToken = registry.AuthBearer, "t\r\nX: y" }), []string{"auth_token"}},
		{"header auth without token", http(func(s *registry.Spec) { s.AuthType, s.AuthHeader = registry.AuthHeader, "X-Api-Key" }), []string{"auth_token"}},
		{"header auth without header name", http(func(s *registry.Spec) { s.AuthType, s.AuthToken = registry.AuthHeader, "t" }), []string{"auth_header"}},
		{"header auth blank header name", http(func(s *registry.Spec) { s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthHeader, "  ", "t" }), []string{"auth_header"}},
		{"header auth without either", http(func(s *registry.Spec) { s.AuthType = registry.AuthHeader }), []string{"auth_token", "auth_header"}},
		{"header auth invalid header name", http(func(s *registry.Spec) { s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthHeader, "X Key", "t" }), []string{"auth_header"}},
		{"header auth reserved header name", http(func(s *registry.Spec) {
			s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthHeader, "Content-Type", "t"
		}), []string{"auth_header"}},
		{"header auth conflicts with a header", http(func(s *registry.Spec) {
			s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthHeader, "X-API-Key", "t"
			s.Headers = map[string]string{"x-api-key": "other"}
		}), []string{"headers/x-api-key"}},
		{"bearer and explicit Authorization header", http(func(s *registry.Spec) {
			s.AuthType, s.AuthToken = registry.AuthBearer, "t"
			s.Headers = map[string]string{"Authorization": "Bearer other"}
		}), []string{"headers/Authorization"}},
		{"bearer and lower-case authorization header", http(func(s *registry.Spec) {
			s.AuthType, s.AuthToken = registry.AuthBearer, "t"
			s.Headers = map[string]string{"authorization": "Bearer other"}
		}), []string{"headers/authorization"}},
		{"timeout below minimum", stdio(func(s *registry.Spec) { s.TimeoutMS = registry.MinTimeoutMS - 1 }), []string{"timeout_ms"}},
		{"timeout above maximum", stdio(func(s *registry.Spec) { s.TimeoutMS = registry.MaxTimeoutMS + 1 }), []string{"timeout_ms"}},
		{"timeout negative", stdio(func(s *registry.Spec) { s.TimeoutMS = -1 }), []string{"timeout_ms"}},
		{"retries negative", stdio(func(s *registry.Spec) { s.Retries = ptr(-1) }), []string{"retries"}},
		{"retries above maximum", stdio(func(s *registry.Spec) { s.Retries = ptr(registry.MaxRetries + 1) }), []string{"retries"}},
		{"health interval below minimum", stdio(func(s *registry.Spec) { s.HealthIntervalMS = registry.MinHealthIntervalMS - 1 }), []string{"health_interval_ms"}},
		{"health interval above maximum", stdio(func(s *registry.Spec) { s.HealthIntervalMS = registry.MaxHealthIntervalMS + 1 }), []string{"health_interval_ms"}},
		{"several problems at once", registry.Spec{Name: "Bad Name", Type: registry.TypeStdio, TimeoutMS: 1, Retries: ptr(99)},
			[]string{"name", "command", "timeout_ms", "retries"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sv, err := f.reg.CreateServer(f.ctx, audit.System, tc.spec)
			wantFields(t, err, tc.want...)
			if sv.ID != "" {
				t.Errorf("got server id %q with the error, want none", sv.ID)
			}
			// The same rules apply before a save (Test connection).
			_, err = f.reg.PreviewConnection(f.ctx, "", registry.PatchFromSpec(tc.spec))
			wantFields(t, err, tc.want...)
			// Nothing is ever stored in this database: every case is invalid.
			if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
				t.Errorf("got %d servers, want 0", n)
			}
			if n := f.count(`SELECT count(*) FROM audit_log`); n != 0 {
				t.Errorf("got %d audit rows, want 0", n)
			}
			if n := f.count(`SELECT count(*) FROM events`); n != 0 {
				t.Errorf("got %d events, want 0", n)
			}
		})
	}
}

// TestCreateServerValidBoundaries checks that the edges of every rule are accepted and
// that defaults and normalisation apply.
func TestCreateServerValidBoundaries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name  string
		spec  registry.Spec
		check func(t *testing.T, sv registry.Server)
	}{
		{"name 48 chars", func() registry.Spec { s := stdioSpec(strings.Repeat("a", 48)); return s }(), nil},
		{"name digits and dashes, trimmed", func() registry.Spec { s := stdioSpec("  0-files-9  "); return s }(),
			func(t *testing.T, sv registry.Server) {
				if sv.Name != "0-files-9" {
					t.Errorf("name: got %q, want %q", sv.Name, "0-files-9")
				}
			}},
		{"defaults", registry.Spec{Name: "defaults", Type: registry.TypeStdio, Command: "srv"},
			func(t *testing.T, sv registry.Server) {
				if sv.TimeoutMS != registry.DefaultTimeoutMS || sv.Retries != registry.DefaultRetries || sv.HealthIntervalMS != registry.DefaultHealthIntervalMS {
					t.Errorf("got timeout %d retries %d health %d, want the defaults", sv.TimeoutMS, sv.Retries, sv.HealthIntervalMS)
				}
				if sv.AuthType != registry.AuthNone || sv.Enabled || sv.Status != registry.StatusDisconnected {
					t.Errorf("got auth %q enabled %v status %q, want none, false, disconnected", sv.AuthType, sv.Enabled, sv.Status)
				}
				if sv.Args == nil || len(sv.Args) != 0 {
					t.Errorf("args: got %#v, want an empty slice", sv.Args)
				}
			}},
		{"lower bounds", func() registry.Spec {
			s := stdioSpec("lower")
			s.TimeoutMS, s.Retries, s.HealthIntervalMS = registry.MinTimeoutMS, ptr(0), registry.MinHealthIntervalMS
			return s
		}(), func(t *testing.T, sv registry.Server) {
			if sv.TimeoutMS != registry.MinTimeoutMS || sv.Retries != 0 || sv.HealthIntervalMS != registry.MinHealthIntervalMS {
				t.Errorf("got timeout %d retries %d health %d, want the minimums", sv.TimeoutMS, sv.Retries, sv.HealthIntervalMS)
			}
		}},
		{"upper bounds", func() registry.Spec {
			s := stdioSpec("upper")
			s.TimeoutMS, s.Retries, s.HealthIntervalMS = registry.MaxTimeoutMS, ptr(registry.MaxRetries), registry.MaxHealthIntervalMS
			s.Description = strings.Repeat("é", registry.MaxDescription)
			return s
		}(), nil},
		{"absolute working dir and env names", func() registry.Spec {
			s := stdioSpec("envs")
			s.WorkingDir = "/srv/data"
			s.Env = map[string]string{"_X": "1", "lower_case9": "2", "A": ""}
			return s
		}(), func(t *testing.T, sv registry.Server) {
			if got := strings.Join(sv.EnvNames, ","); got != "A,_X,lower_case9" {
				t.Errorf("env names: got %q, want %q", got, "A,_X,lower_case9")
			}
		}},
		{"https with query, sse", func() registry.Spec {
			s := httpSpec("sse")
			s.Type, s.URL = registry.TypeSSE, "https://example.com:8443/sse?tenant=a"
			return s
		}(), nil},
		{"header auth", func() registry.Spec {
			s := httpSpec("header-auth")
			s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthHeader, " X-Api-Key ", "t"
			return s
		}(), func(t *testing.T, sv registry.Server) {
			if sv.AuthHeader != "X-Api-Key" || !sv.AuthConfigured {
				t.Errorf("got auth header %q configured %v, want %q true", sv.AuthHeader, sv.AuthConfigured, "X-Api-Key")
			}
		}},
		{"bearer drops auth header", func() registry.Spec {
			s := httpSpec("bearer")
			s.AuthType, s.AuthHeader, s.AuthToken = registry.AuthBearer, "X-Ignored", "t"
			return s
		}(), func(t *testing.T, sv registry.Server) {
			if sv.AuthHeader != "" || sv.AuthType != registry.AuthBearer {
				t.Errorf("got auth %q header %q, want bearer and no header", sv.AuthType, sv.AuthHeader)
			}
		}},
		{"auth none drops token", func() registry.Spec {
			s := httpSpec("none")
			s.AuthToken, s.AuthHeader = "leftover", "X-A"
			return s
		}(), func(t *testing.T, sv registry.Server) {
			if sv.AuthConfigured || sv.AuthToken != "" || sv.AuthHeader != "" {
				t.Errorf("got configured %v token %q header %q, want no authentication stored", sv.AuthConfigured, sv.AuthToken, sv.AuthHeader)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sv, err := f.reg.CreateServer(f.ctx, audit.System, tc.spec)
			if err != nil {
				t.Fatalf("create: got %v, want success", err)
			}
			if sv.Args == nil {
				t.Errorf("args: got nil, want a slice")
			}
			// Saving the same spec again (as an import does) works too.
			if _, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.PatchFromSpec(tc.spec)); err != nil {
				t.Fatalf("update with PatchFromSpec: got %v, want success", err)
			}
			if tc.check != nil {
				tc.check(t, sv)
			}
			got, err := f.reg.GetServer(f.ctx, sv.ID)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if got.Name != sv.Name || got.Type != tc.spec.Type {
				t.Errorf("stored: got %q/%q, want %q/%q", got.Name, got.Type, sv.Name, tc.spec.Type)
			}
		})
	}
}

func TestDuplicateName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.create(stdioSpec("alpha"))
	b := f.create(httpSpec("beta"))

	_, err := f.reg.CreateServer(f.ctx, audit.System, httpSpec("alpha"))
	wantFields(t, err, "name")
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 2 {
		t.Fatalf("got %d servers, want 2", n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'server.create'`); n != 2 {
		t.Fatalf("got %d server.create audit rows, want 2", n)
	}

	_, err = f.reg.UpdateServer(f.ctx, audit.System, b.ID, registry.Patch{Name: ptr("alpha"), Description: ptr("renamed")})
	wantFields(t, err, "name")
	got, err := f.reg.GetServer(f.ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "beta" || got.Description != "remote tools" {
		t.Fatalf("after the failed rename: got %q %q, want beta unchanged", got.Name, got.Description)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'server.update'`); n != 0 {
		t.Fatalf("got %d server.update audit rows, want 0", n)
	}
	// Renaming to itself and to a free name works.
	f.update(a.ID, registry.Patch{Name: ptr("alpha")})
	if sv := f.update(b.ID, registry.Patch{Name: ptr("gamma")}); sv.Name != "gamma" {
		t.Fatalf("rename: got %q, want gamma", sv.Name)
	}
	if _, err := f.reg.GetServerByName(f.ctx, "beta"); err != registry.ErrNotFound {
		t.Fatalf("old name: got %v, want ErrNotFound", err)
	}
}

// A credential in a URL's path (Zapier's /mcp/sk-ak-…/sse, a webhook URL) is refused
// as one in its query is: URLs are stored and shown in plain text.
func TestCredentialsRefusedInURLPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i, tc := range []struct {
		url     string
		refused bool
	}{
		{"https://actions.zapier.com/mcp/sk-ak-" + strings.Repeat("a1B2c3D4", 4) + "/sse", true},
		{"https://hooks.slack.com/services/T000/B000/XXXXXXXX", true},
		{"https://h.example/mcp/q8Xv2LpR7tN0zYb4KcW1mHs9DfJ6uGe3/sse", true},
		{"https://h.example/v1/550e8400-e29b-41d4-a716-446655440000/mcp", false},
		{"https://h.example/api/v2/mcp", false},
	} {
		sp := registry.Spec{Name: fmt.Sprintf("path-%d", i), Type: registry.TypeStreamableHTTP, URL: tc.url, Enabled: true}
		_, err := f.reg.CreateServer(f.ctx, audit.System, sp)
		if !tc.refused {
			if err != nil {
				t.Errorf("%s: %v", tc.url, err)
			}
			continue
		}
		wantFields(t, err, "url")
		var ve *verr.Error
		if errors.As(err, &ve) && !strings.Contains(ve.For("url"), "header") {
			t.Errorf("%s: message %q, want it to say where the credential goes instead", tc.url, ve.For("url"))
		}
		if strings.Contains(err.Error(), "sk-ak-") {
			t.Errorf("the error repeats the credential: %v", err)
		}
	}
}
