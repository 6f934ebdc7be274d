package registry_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// cfgCanary is a secret value no export, plan, audit row or event may contain.
const cfgCanary = "cfg-canary-7d3e"

// cfgServers are registrations covering every exported field, in no particular order.
func cfgServers() []registry.Spec {
	return []registry.Spec{
		{Name: "zeta-http", Type: registry.TypeStreamableHTTP, URL: "https://mcp.example.com/mcp",
			Headers: map[string]string{"X-Team": cfgCanary + "-h"}, AuthType: registry.AuthBearer,
			AuthToken: cfgCanary + "-token", Enabled: true, Trusted: true, TimeoutMS: 5000, Retries: ptr(0)},
		{Name: "alpha-files", Description: "local files", Type: registry.TypeStdio, Command: "npx",
			Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/data"}, WorkingDir: "/srv",
			Env: map[string]string{"API_KEY": cfgCanary + "-env", "LOG_LEVEL": cfgCanary + "-env2"}, Enabled: true},
		{Name: "mid-sse", Type: registry.TypeSSE, URL: "http://127.0.0.1:3001/sse", AuthType: registry.AuthHeader,
			AuthHeader: "X-API-Key", AuthToken: cfgCanary + "-key", HealthIntervalMS: 60000, Enabled: false},
	}
}

// cfgExport is what Export writes for cfgServers.
const cfgExport = `# Toolwarden MCP servers: written by 'toolwarden export', read by 'toolwarden import'.
#
# Secret values are never exported. env and headers list each secret by name with a
# null value, and an auth block never holds its token. On import:
#   - a null value keeps the value already stored for that name;
#   - a name that is not stored yet is skipped with a warning: set it after import;
#   - a value written here replaces the stored one; 'toolwarden import' expands
#     ${env:NAME} and ${NAME} from its environment, so secrets can come from CI;
#   - a name removed from the file removes that secret.
version: 1
servers:
  - name: alpha-files
    type: stdio
    description: local files
    command: npx
    args: [-y, '@modelcontextprotocol/server-filesystem', /srv/data]
    working_dir: /srv
    env:
      API_KEY: null
      LOG_LEVEL: null
    timeout_ms: 30000
    retries: 3
    health_interval_ms: 30000
    enabled: true
    trusted: false
  - name: mid-sse
    type: sse
    url: http://127.0.0.1:3001/sse
    auth:
      type: header
      header: X-API-Key
    timeout_ms: 30000
    retries: 3
    health_interval_ms: 60000
    enabled: false
    trusted: false
  - name: zeta-http
    type: streamable_http
    url: https://mcp.example.com/mcp
    headers:
      X-Team: null
    auth:
      type: bearer
    timeout_ms: 5000
    retries: 0
    health_interval_ms: 30000
    enabled: true
    trusted: true
`

func (f *fixture) export() string {
	f.t.Helper()
	out, err := f.reg.Export(f.ctx)
	if err != nil {
		f.t.Fatalf("export: %v", err)
	}
	return string(out)
}

func (f *fixture) plan(name, data string, prune bool) *registry.Plan {
	f.t.Helper()
	cfg, err := registry.ParseConfig(name, []byte(data), registry.ParseOptions{})
	if err != nil {
		f.t.Fatalf("parse %s: %v", name, err)
	}
	plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{Prune: prune, CompareSecrets: true})
	if err != nil {
		f.t.Fatalf("plan %s: %v", name, err)
	}
	return plan
}

func TestExport(t *testing.T) {
	t.Parallel()
	specs := cfgServers()
	tests := []struct {
		name  string
		order []int
	}{
		{"in order", []int{0, 1, 2}},
		{"reversed", []int{2, 1, 0}},
		{"shuffled", []int{1, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			for _, i := range tt.order {
				f.create(specs[i])
			}
			first, second := f.export(), f.export()
			if first != second {
				t.Fatalf("two exports differ:\n%s\n---\n%s", first, second)
			}
			if first != cfgExport {
				t.Fatalf("got export\n%s\nwant\n%s", first, cfgExport)
			}
			if strings.Contains(first, cfgCanary) {
				t.Fatalf("export holds a secret value:\n%s", first)
			}
			for _, name := range []string{"API_KEY", "LOG_LEVEL", "X-Team"} {
				if !strings.Contains(first, name+": null") {
					t.Errorf("export: got no %q: null, want every secret named", name)
				}
			}
		})
	}
}

func TestExportEmpty(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.export()
	if !strings.HasSuffix(got, "version: 1\nservers: []\n") {
		t.Fatalf("export of an empty registry: got\n%s", got)
	}
	plan := f.plan("servers.yaml", got, true)
	if len(plan.Items) != 0 || plan.HasErrors() || len(plan.Warnings) != 0 {
		t.Fatalf("plan of an empty export: got %+v", plan)
	}
}

// TestExportRoundTrip imports an export into the database it came from: nothing changes.
func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, sp := range cfgServers() {
		f.create(sp)
	}
	before := f.count(`SELECT count(*) FROM audit_log`)
	plan := f.plan("servers.yaml", f.export(), true)
	if plan.HasErrors() || len(plan.Warnings) > 0 {
		t.Fatalf("round trip: got errors %v, warnings %v; want none", plan.Errors, plan.Warnings)
	}
	for _, it := range plan.Items {
		if it.Action != registry.PlanUnchanged {
			t.Errorf("round trip: %s: got %s %v, want unchanged", it.Name, it.Action, it.Changes)
		}
	}
	if got := plan.Count(registry.PlanUnchanged); got != 3 {
		t.Fatalf("round trip: got %d unchanged, want 3", got)
	}
	res, err := f.reg.ApplyImport(f.ctx, audit.System, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created)+len(res.Updated)+len(res.Deleted) != 0 || res.Unchanged != 3 {
		t.Fatalf("apply round trip: got %s, want 3 unchanged", res)
	}
	if after := f.count(`SELECT count(*) FROM audit_log`); after != before {
		t.Fatalf("apply round trip wrote %d audit entries, want 0", after-before)
	}
	c := f.connection(f.serverID("zeta-http"))
	if c.Headers["Authorization"] != "Bearer "+cfgCanary+"-token" || c.Headers["X-Team"] != cfgCanary+"-h" {
		t.Fatalf("secrets after round trip: got %v", c.Headers)
	}
}

// TestExportToFreshDatabase imports an export into another database: servers are
// created, secrets named without value are skipped with a warning, and a bearer token
// that was not exported is an error that says how to give it.
func TestExportToFreshDatabase(t *testing.T) {
	t.Parallel()
	src, dst := newFixture(t), newFixture(t)
	for _, sp := range cfgServers() {
		src.create(sp)
	}
	plan := dst.plan("servers.yaml", src.export(), false)
	if got := plan.Count(registry.PlanCreate); got != 3 {
		t.Fatalf("got %d creates, want 3:\n%s", got, plan)
	}
	var warned []string
	for _, w := range plan.Warnings {
		warned = append(warned, w.Server+" "+w.Field)
		if !strings.Contains(w.Message, "after import") {
			t.Errorf("warning %q: want it to say to set the value after import", w)
		}
	}
	slices.Sort(warned)
	if want := []string{"alpha-files env.API_KEY", "alpha-files env.LOG_LEVEL", "zeta-http headers.X-Team"}; !slices.Equal(warned, want) {
		t.Errorf("warnings: got %q, want %q", warned, want)
	}
	var errs []string
	for _, e := range plan.Errors {
		errs = append(errs, e.Server+" "+e.Field)
		if e.File != "servers.yaml" || !strings.Contains(e.Message, "${env:") {
			t.Errorf("error %q: want it to name the file and suggest ${env:NAME}", e)
		}
	}
	slices.Sort(errs)
	if want := []string{"mid-sse auth.token", "zeta-http auth.token"}; !slices.Equal(errs, want) {
		t.Fatalf("errors: got %q, want %q", errs, want)
	}
	if _, err := dst.reg.ApplyImport(dst.ctx, audit.System, plan); !errors.Is(err, registry.ErrInvalidPlan) {
		t.Fatalf("apply a plan with errors: got %v, want ErrInvalidPlan", err)
	}
	if n := dst.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("a refused plan created %d servers", n)
	}
}

func (f *fixture) serverID(name string) string {
	f.t.Helper()
	sv, err := f.reg.GetServerByName(f.ctx, name)
	if err != nil {
		f.t.Fatalf("server %q: %v", name, err)
	}
	return sv.ID
}

func TestParseClientFormats(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GH_TOKEN": "ghp_from_env", "HOME": "/home/ada"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s := func(v string) *string { return &v }
	tests := []struct {
		name, file, data string
		expand           bool
		format           string
		want             []registry.ServerConfig
		warnings         []string // "server field: substring"
	}{
		{
			name: "claude desktop", file: "claude_desktop_config.json", format: registry.FormatClaude,
			data: `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "GitHub Server": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
                      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_literal", "PORT": 3000}}
  }
}`,
			want: []registry.ServerConfig{
				{Name: "filesystem", Type: registry.TypeStdio, Command: "npx",
					Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/tmp"},
					Env:  map[string]*string{}, Headers: map[string]*string{}},
				{Name: "github-server", Type: registry.TypeStdio, Command: "docker",
					Args: []string{"run", "-i", "--rm", "ghcr.io/github/github-mcp-server"},
					Env:  map[string]*string{"GITHUB_PERSONAL_ACCESS_TOKEN": s("ghp_literal"), "PORT": s("3000")}, Headers: map[string]*string{}},
			},
			warnings: []string{`GitHub Server name: "GitHub Server" → "github-server"`},
		},
		{
			name: ".mcp.json with remote servers, expanded", file: ".mcp.json", expand: true, format: registry.FormatClaude,
			data: `{"mcpServers": {
  "remote": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}},
  "events": {"type": "sse", "url": "${BASE_URL:-http://127.0.0.1:9000}/sse"},
  "streamy": {"type": "streamable-http", "url": "http://127.0.0.1:9001/mcp", "headers": {"X-Home": "${env:HOME}"}},
  "local": {"command": "${HOME}/bin/server", "args": ["--verbose"], "disabled": true, "cwd": "/opt"}
}}`,
			want: []registry.ServerConfig{
				{Name: "events", Type: registry.TypeSSE, URL: "http://127.0.0.1:9000/sse", Env: map[string]*string{}, Headers: map[string]*string{}},
				{Name: "local", Type: registry.TypeStdio, Command: "/home/ada/bin/server", Args: []string{"--verbose"},
					Enabled: ptr(false), WorkingDir: s("/opt"), Env: map[string]*string{}, Headers: map[string]*string{}},
				{Name: "remote", Type: registry.TypeStreamableHTTP, URL: "https://api.example.com/mcp",
					Env: map[string]*string{}, Headers: map[string]*string{"Authorization": s("Bearer ghp_from_env")}},
				{Name: "streamy", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:9001/mcp",
					Env: map[string]*string{}, Headers: map[string]*string{"X-Home": s("/home/ada")}},
			},
		},
		{
			name: ".mcp.json not expanded (web upload)", file: ".mcp.json", format: registry.FormatClaude,
			data: `{"mcpServers": {"remote": {"type": "http", "url": "https://api.example.com/mcp",
				"headers": {"Authorization": "Bearer ${GH_TOKEN}"}}}}`,
			want: []registry.ServerConfig{
				{Name: "remote", Type: registry.TypeStreamableHTTP, URL: "https://api.example.com/mcp",
					Env: map[string]*string{}, Headers: map[string]*string{"Authorization": s("Bearer ${GH_TOKEN}")}},
			},
			warnings: []string{"remote headers.Authorization: kept literally"},
		},
		{
			name: "vs code with inputs and comments", file: "mcp.json", expand: true, format: registry.FormatVSCode,
			data: `{
  // Inputs are prompted for by VS Code.
  "inputs": [
    {"type": "promptString", "id": "github-token", "description": "GitHub Personal Access Token", "password": true},
  ],
  "servers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
               "headers": {"Authorization": "Bearer ${input:github-token}"}},
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch", "${workspaceFolder}"],
              "env": {"TOKEN": "${input:github-token}", "HOME_DIR": "${env:HOME}"}, "envFile": "${workspaceFolder}/.env"},
    "legacy": {"type": "sse", "url": "http://localhost:8000/sse", /* old */ },
  },
}`,
			want: []registry.ServerConfig{
				{Name: "fetch", Type: registry.TypeStdio, Command: "uvx", Args: []string{"mcp-server-fetch", "${workspaceFolder}"},
					Env: map[string]*string{"TOKEN": nil, "HOME_DIR": s("/home/ada")}, Headers: map[string]*string{}},
				{Name: "github", Type: registry.TypeStreamableHTTP, URL: "https://api.githubcopilot.com/mcp/",
					Env: map[string]*string{}, Headers: map[string]*string{"Authorization": nil}},
				{Name: "legacy", Type: registry.TypeSSE, URL: "http://localhost:8000/sse", Env: map[string]*string{}, Headers: map[string]*string{}},
			},
			warnings: []string{
				`fetch args[1]: ${workspaceFolder} cannot be resolved`,
				`fetch env.TOKEN: "GitHub Personal Access Token"`,
				`fetch env.TOKEN: set env TOKEN after import`,
				`fetch envFile: not read by Toolwarden`,
				`github headers.Authorization: set headers Authorization after import`,
			},
		},
		{
			name: "vs code settings.json", file: "settings.json", format: registry.FormatVSCode,
			data: `{"editor.fontSize": 14, "mcp": {"servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}}`,
			want: []registry.ServerConfig{
				{Name: "time", Type: registry.TypeStdio, Command: "uvx", Args: []string{"mcp-server-time"},
					Env: map[string]*string{}, Headers: map[string]*string{}},
			},
		},
		{
			name: "detected by content, not name", file: "backup.txt", format: registry.FormatClaude,
			data: `{"mcpServers": {"My.Tool_v2!": {"command": "tool"}}}`,
			want: []registry.ServerConfig{
				{Name: "my-tool-v2", Type: registry.TypeStdio, Command: "tool", Args: []string{},
					Env: map[string]*string{}, Headers: map[string]*string{}},
			},
			warnings: []string{`My.Tool_v2! name: "My.Tool_v2!" → "my-tool-v2"`},
		},
		{
			name: "empty claude config", file: "claude_desktop_config.json", format: registry.FormatClaude,
			data: `{"globalShortcut": ""}`, warnings: []string{" mcpServers: is missing"},
		},
		{
			name: "native yaml with env reference", file: "servers.yml", expand: true, format: registry.FormatToolwarden,
			data: "version: 1\nservers:\n  - name: gh\n    type: http\n    url: https://x.example/mcp\n    auth: {type: bearer, token: '${env:GH_TOKEN}'}\n",
			want: []registry.ServerConfig{
				{Name: "gh", Type: registry.TypeStreamableHTTP, URL: "https://x.example/mcp", Description: s(""), WorkingDir: s(""),
					Env: map[string]*string{}, Headers: map[string]*string{},
					Auth:      &registry.AuthConfig{Type: registry.AuthBearer, Token: s("ghp_from_env")},
					TimeoutMS: ptr(registry.DefaultTimeoutMS), Retries: ptr(registry.DefaultRetries),
					HealthIntervalMS: ptr(registry.DefaultHealthIntervalMS), Enabled: ptr(true), Trusted: ptr(false)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := registry.ParseConfig(tt.file, []byte(tt.data), registry.ParseOptions{ExpandEnv: tt.expand, LookupEnv: lookup})
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if cfg.Format != tt.format {
				t.Errorf("format: got %q, want %q", cfg.Format, tt.format)
			}
			if len(cfg.Servers) != len(tt.want) {
				t.Fatalf("got %d servers %+v, want %d", len(cfg.Servers), cfg.Servers, len(tt.want))
			}
			for i, got := range cfg.Servers {
				if g, w := showServer(got), showServer(tt.want[i]); g != w {
					t.Errorf("server %d:\n got %s\nwant %s", i, g, w)
				}
			}
			var warnings []string
			for _, w := range cfg.Warnings {
				if w.File != tt.file {
					t.Errorf("warning %q: want it to name the file %s", w, tt.file)
				}
				warnings = append(warnings, w.Server+" "+w.Field+": "+w.Message)
			}
			for _, want := range tt.warnings {
				if !slices.ContainsFunc(warnings, func(w string) bool {
					srvField, sub, _ := strings.Cut(want, ": ")
					return strings.HasPrefix(w, srvField+": ") && strings.Contains(w, sub)
				}) {
					t.Errorf("warnings %q: want one like %q", warnings, want)
				}
			}
			if len(tt.warnings) == 0 && len(warnings) > 0 {
				t.Errorf("got warnings %q, want none", warnings)
			}
		})
	}
}

// showServer renders a ServerConfig with its pointers followed, for comparisons.
func showServer(sc registry.ServerConfig) string {
	opt := func(p any) string {
		switch v := p.(type) {
		case *string:
			if v != nil {
				return *v
			}
		case *int:
			if v != nil {
				return strconv.Itoa(*v)
			}
		case *bool:
			if v != nil {
				if *v {
					return "true"
				}
				return "false"
			}
		}
		return "<nil>"
	}
	secrets := func(m map[string]*string) string {
		var parts []string
		for _, k := range sortedKeys(m) {
			parts = append(parts, k+"="+opt(m[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	auth := "<nil>"
	if sc.Auth != nil {
		auth = sc.Auth.Type + "/" + sc.Auth.Header + "/" + opt(sc.Auth.Token)
	}
	args := sc.Args
	if args == nil {
		args = []string{}
	}
	return strings.Join([]string{sc.Name, sc.Type, "desc=" + opt(sc.Description), sc.Command, "[" + strings.Join(args, " ") + "]",
		"wd=" + opt(sc.WorkingDir), sc.URL, "env" + secrets(sc.Env), "headers" + secrets(sc.Headers), "auth=" + auth,
		"timeout=" + opt(sc.TimeoutMS), "retries=" + opt(sc.Retries), "health=" + opt(sc.HealthIntervalMS),
		"enabled=" + opt(sc.Enabled), "trusted=" + opt(sc.Trusted)}, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, data string
		expand           bool
		want             []string // substrings, each in the error
	}{
		{"bad json", "claude_desktop_config.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",,}\n  }\n}",
			false, []string{"claude_desktop_config.json: is not valid JSON: line 3, column 27: invalid character '}'"}},
		{"trailing data", ".mcp.json", "{\"mcpServers\": {}}\n}", false, []string{".mcp.json: is not valid JSON: line 2, column 1: unexpected data"}},
		{"truncated json", ".mcp.json", `{"mcpServers": {"a": {"command": "x"}`, false, []string{".mcp.json: is not valid JSON"}},
		{"bad yaml", "servers.yaml", "version: 1\nservers:\n  - name: a\n   type: stdio\n", false, []string{"servers.yaml: is not valid YAML: line"}},
		{"duplicate yaml key", "servers.yaml", "version: 1\nversion: 1\nservers: []\n", false, []string{`servers.yaml: is not valid YAML: line 2: key "version" appears twice`}},
		{"empty", "servers.yaml", " \n", false, []string{"servers.yaml: is empty"}},
		{"unknown shape", "x.json", `{"tools": []}`, false, []string{"x.json: is not a server configuration"}},
		{"not a mapping", "x.yaml", "- a\n- b\n", false, []string{"x.yaml: must hold a mapping"}},
		{"slug collision", "claude_desktop_config.json", `{"mcpServers": {"My Server": {"command": "a"}, "my_server": {"command": "b"}}}`,
			false, []string{`claude_desktop_config.json: server "my_server": name: becomes "my-server", the name of server "My Server" too`}},
		{"unsluggable", ".mcp.json", `{"mcpServers": {"!!!": {"command": "a"}}}`, false, []string{`.mcp.json: server "!!!": name: cannot be made`}},
		{"bad type", ".mcp.json", `{"mcpServers": {"a": {"type": "websocket", "url": "ws://x"}}}`, false, []string{`.mcp.json: server "a": type: "websocket" is not a server type`}},
		{"no command or url", ".mcp.json", `{"mcpServers": {"a": {"args": []}}}`, false, []string{`.mcp.json: server "a": type: is missing`}},
		{"args not a list", ".mcp.json", `{"mcpServers": {"a": {"command": "x", "args": "-v"}}}`, false, []string{`.mcp.json: server "a": args: must be a list`}},
		{"env not strings", ".mcp.json", `{"mcpServers": {"a": {"command": "x", "env": {"K": ["v"]}}}}`, false, []string{`.mcp.json: server "a": env.K: must be a string or null`}},
		{"missing variable", ".mcp.json", `{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE_NOT_SET}"}}}}`, true,
			[]string{`.mcp.json: server "a": env.K: environment variable NOPE_NOT_SET is not set`}},
		{"native without version", "servers.yaml", "servers: []\n", false, []string{"servers.yaml: version: is missing"}},
		{"native wrong version", "servers.yaml", "version: 2\nservers: []\n", false, []string{"servers.yaml: version: 2 is not a version"}},
		{"native unknown field, all errors at once", "servers.yaml",
			"version: 1\nservers:\n  - name: a\n    type: stdio\n    command: x\n    comand: y\n  - name: b\n    type: stdio\n    command: x\n    timeout_ms: soon\n    enabled: maybe\n  - type: stdio\n    command: x\n  - name: a\n    type: stdio\n    command: z\n",
			false, []string{`servers.yaml: server "a": comand: is not a field`, `servers.yaml: server "b": timeout_ms: must be a whole number, not "soon"`,
				`servers.yaml: server "b": enabled: must be true or false`, `servers.yaml: server "#3": name: is required`, `servers.yaml: server "a": name: appears twice`}},
		{"native bad auth", "servers.yaml", "version: 1\nservers:\n  - name: a\n    url: http://x\n    auth: {kind: bearer}\n", false,
			[]string{`servers.yaml: server "a": auth.type: is required`, `servers.yaml: server "a": auth.kind: is not a field`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := registry.ParseConfig(tt.file, []byte(tt.data), registry.ParseOptions{ExpandEnv: tt.expand,
				LookupEnv: func(string) (string, bool) { return "", false }})
			if err == nil {
				t.Fatalf("got %+v, want an error", cfg)
			}
			var ce *registry.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %T %v, want a *registry.ConfigError", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestSlugify(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"GitHub Server":                "github-server",
		"my_server.v2":                 "my-server-v2",
		"Ünïcode & co":                 "ncode--co",
		"__x__":                        "x",
		"ok-name":                      "ok-name",
		"!!!":                          "",
		strings.Repeat("ab", 30):       strings.Repeat("ab", 24),
		strings.Repeat("a", 47) + " b": strings.Repeat("a", 47),
	}
	for in, want := range tests {
		if got := registry.Slugify(in); got != want {
			t.Errorf("Slugify(%q): got %q, want %q", in, got, want)
		}
	}
}

// planText renders p, checking that rendering is deterministic.
func planText(t *testing.T, p *registry.Plan) string {
	t.Helper()
	s := p.String()
	if s != p.String() {
		t.Fatal("Plan.String is not deterministic")
	}
	return s
}

func TestPlanAndApplyImport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "same", Type: registry.TypeStdio, Command: "same-cmd", Enabled: true})
	f.create(registry.Spec{Name: "changed", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:1/mcp", Enabled: true})
	f.create(registry.Spec{Name: "legacy", Type: registry.TypeStdio, Command: "old", Enabled: true})
	sec := f.create(registry.Spec{Name: "secrets", Type: registry.TypeStdio, Command: "s", Enabled: true,
		Env: map[string]string{"KEPT": cfgCanary + "-kept", "REPLACED": cfgCanary + "-old", "SAME": cfgCanary + "-same", "GONE": cfgCanary + "-gone"}})
	file := `version: 1
servers:
  - name: same
    type: stdio
    command: same-cmd
  - name: changed
    type: streamable_http
    url: http://127.0.0.1:2/mcp
    timeout_ms: 5000
    description: now described
    headers:
      X-New: ` + cfgCanary + `-xnew
  - name: secrets
    type: stdio
    command: s
    env:
      KEPT: null
      REPLACED: ` + cfgCanary + `-new
      SAME: ` + cfgCanary + `-same
      ADDED: ` + cfgCanary + `-added
      UNKNOWN: null
  - name: brand-new
    type: stdio
    command: npx
    args: [-y, pkg]
    env:
      TOKEN: null
`
	tests := []struct {
		prune     bool
		legacy    string
		legacyOut string
	}{
		{false, registry.PlanKeep, "  kept legacy (not in file)\n"},
		{true, registry.PlanDelete, "- delete legacy (stdio)\n"},
	}
	for _, tt := range tests {
		plan := f.plan("servers.yaml", file, tt.prune)
		if plan.HasErrors() {
			t.Fatalf("prune=%v: unexpected errors %v", tt.prune, plan.Errors)
		}
		actions := map[string]string{}
		for _, it := range plan.Items {
			actions[it.Name] = it.Action
		}
		want := map[string]string{"same": registry.PlanUnchanged, "changed": registry.PlanUpdate, "secrets": registry.PlanUpdate,
			"brand-new": registry.PlanCreate, "legacy": tt.legacy}
		for k, v := range want {
			if actions[k] != v {
				t.Errorf("prune=%v: %s: got %q, want %q", tt.prune, k, actions[k], v)
			}
		}
		text := planText(t, plan)
		for _, line := range []string{
			"+ create brand-new (stdio)\n    command: \"npx\"\n    args: [\"-y\", \"pkg\"]\n",
			"~ update changed (streamable_http)\n    description: \"\" → \"now described\"\n    url: \"http://127.0.0.1:1/mcp\" → \"http://127.0.0.1:2/mcp\"\n    timeout_ms: 30000 → 5000\n    headers X-New: set\n",
			"= unchanged same\n",
			"~ update secrets (stdio)\n    env ADDED: set\n    env REPLACED: replaced\n    env GONE: removed\n",
			tt.legacyOut,
			`! servers.yaml: server "brand-new": env.TOKEN: has no value in the file and none is stored: it is skipped; set env TOKEN after import`,
			`! servers.yaml: server "secrets": env.UNKNOWN: has no value`,
		} {
			if !strings.Contains(text, line) {
				t.Errorf("prune=%v: plan\n%s\nwant it to contain\n%s", tt.prune, text, line)
			}
		}
		if strings.Contains(text, cfgCanary) {
			t.Fatalf("the plan shows a secret value:\n%s", text)
		}
	}

	// Apply the pruning plan.
	plan := f.plan("servers.yaml", file, true)
	lastEvent := f.count(`SELECT coalesce(max(id), 0)::int FROM events`)
	res, err := f.reg.ApplyImport(f.ctx, audit.Actor{Kind: audit.ActorUser, Name: "ada"}, plan)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.String() != "1 created, 2 updated, 1 deleted, 1 unchanged, 0 kept" {
		t.Fatalf("apply: got %s", res)
	}
	if res.Created[0].Name != "brand-new" || res.Created[0].ID == "" || res.Deleted[0].Name != "legacy" {
		t.Fatalf("apply: got %+v", res)
	}
	c := f.connection(sec.ID)
	wantEnv := map[string]string{"KEPT": cfgCanary + "-kept", "REPLACED": cfgCanary + "-new", "SAME": cfgCanary + "-same", "ADDED": cfgCanary + "-added"}
	if len(c.Env) != len(wantEnv) {
		t.Errorf("env after import: got names %v, want %v", sortedKeys(c.Env), sortedKeys(wantEnv))
	}
	for k, v := range wantEnv {
		if c.Env[k] != v {
			t.Errorf("env %s after import: got %q, want %q", k, c.Env[k], v)
		}
	}
	if _, err := f.reg.GetServerByName(f.ctx, "legacy"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("legacy after a pruning import: got %v, want ErrNotFound", err)
	}
	nw := f.connection(f.serverID("brand-new"))
	if len(nw.Env) != 0 || nw.Command != "npx" {
		t.Errorf("brand-new: got %+v env %v, want command npx and no env", nw, sortedKeys(nw.Env))
	}

	// One audit entry per server, naming secrets but never their values.
	for action, n := range map[string]int{"server.import.create": 1, "server.import.update": 2, "server.import.delete": 1} {
		if got := f.count(`SELECT count(*) FROM audit_log WHERE action = $1 AND actor_name = 'ada'`, action); got != n {
			t.Errorf("audit %s: got %d entries, want %d", action, got, n)
		}
	}
	payloads := f.strings(`SELECT payload::text FROM audit_log WHERE action LIKE 'server.import.%'`)
	for _, p := range payloads {
		if strings.Contains(p, cfgCanary) {
			t.Fatalf("audit payload holds a secret value: %s", p)
		}
	}
	if !slices.ContainsFunc(payloads, func(p string) bool { return strings.Contains(p, "env/REPLACED: replaced") }) {
		t.Errorf("audit payloads %q: want the replaced secret named", payloads)
	}
	events := f.strings(`SELECT kind || ' ' || (payload->>'name') FROM events WHERE topic = 'servers' AND id > $1 ORDER BY id`, lastEvent)
	if len(events) != 4 {
		t.Errorf("events: got %q, want one per created, updated or deleted server", events)
	}
	for _, want := range []string{"server.changed brand-new", "server.changed changed", "server.changed secrets", "server.deleted legacy"} {
		if !slices.Contains(events, want) {
			t.Errorf("events %q: want %q", events, want)
		}
	}
	for _, e := range f.strings(`SELECT payload::text FROM events`) {
		if strings.Contains(e, cfgCanary) {
			t.Fatalf("event holds a secret value: %s", e)
		}
	}

	// The same file again: nothing left to do.
	again := f.plan("servers.yaml", file, true)
	for _, it := range again.Items {
		if it.Action != registry.PlanUnchanged {
			t.Errorf("second import: %s: got %s %v, want unchanged", it.Name, it.Action, it.Changes)
		}
	}
}

// TestImportClientKeepsUnstatedFields: a Claude Desktop file says nothing about
// descriptions, trust or timeouts, so importing it leaves them as they are.
func TestImportClientKeepsUnstatedFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "files", Description: "curated", Type: registry.TypeStdio, Command: "npx",
		Args: []string{"-y", "fs"}, Env: map[string]string{"ROOT": "/data"}, TimeoutMS: 9000, Trusted: true, Enabled: true})
	f.create(registry.Spec{Name: "remote", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:5/mcp",
		AuthType: registry.AuthBearer, AuthToken: "tok", Enabled: true})
	plan := f.plan("claude_desktop_config.json", `{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "fs"], "env": {"ROOT": "/data"}},
		"remote": {"type": "http", "url": "http://127.0.0.1:5/mcp"}}}`, false)
	for _, it := range plan.Items {
		if it.Action != registry.PlanUnchanged {
			t.Errorf("%s: got %s %v, want unchanged", it.Name, it.Action, it.Changes)
		}
	}
	plan = f.plan("claude_desktop_config.json", `{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "fs", "--ro"]},
		"remote": {"command": "remote-stdio"}}}`, false)
	text := planText(t, plan)
	for _, want := range []string{
		"~ update files (stdio)\n    args: [\"-y\", \"fs\"] → [\"-y\", \"fs\", \"--ro\"]\n    env ROOT: removed\n",
		"~ update remote (stdio)\n    type: \"streamable_http\" → \"stdio\"\n    command: \"\" → \"remote-stdio\"\n    url: \"http://127.0.0.1:5/mcp\" → \"\"\n    auth.type: \"bearer\" → \"none\"\n    auth token: removed\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan\n%s\nwant it to contain\n%s", text, want)
		}
	}
	if plan.HasErrors() {
		t.Fatalf("unexpected errors: %v", plan.Errors)
	}
}

func TestPlanImportValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "ok", Type: registry.TypeStdio, Command: "x", Enabled: true})
	plan := f.plan("servers.yaml", `version: 1
servers:
  - name: bad-url
    type: sse
    url: ftp://example.com
  - name: no-command
    type: stdio
  - name: bad-env
    type: stdio
    command: x
    env:
      1BAD: v
    timeout_ms: 5
  - name: ok
    type: stdio
    command: x
    retries: 99
`, false)
	var got []string
	for _, e := range plan.Errors {
		got = append(got, e.String())
	}
	want := []string{
		`servers.yaml: server "bad-env": env.1BAD: is not a valid variable name`,
		`servers.yaml: server "bad-env": timeout_ms: must be between`,
		`servers.yaml: server "bad-url": url: must start with http:// or https://`,
		`servers.yaml: server "no-command": command: is required`,
		`servers.yaml: server "ok": retries: must be between 0 and 10`,
	}
	if len(got) != len(want) {
		t.Fatalf("got errors\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("errors\n%s\nwant one starting %q", strings.Join(got, "\n"), w)
		}
	}
	if !strings.Contains(plan.String(), "Errors (nothing can be imported until they are fixed):") {
		t.Errorf("plan text does not list the errors:\n%s", plan)
	}
	before := f.count(`SELECT count(*) FROM audit_log`)
	if _, err := f.reg.ApplyImport(f.ctx, audit.System, plan); !errors.Is(err, registry.ErrInvalidPlan) || !strings.Contains(err.Error(), "bad-url") {
		t.Fatalf("apply: got %v, want ErrInvalidPlan naming the problems", err)
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 1 {
		t.Fatalf("after a refused import: got %d servers, want 1", n)
	}
	if after := f.count(`SELECT count(*) FROM audit_log`); after != before {
		t.Fatalf("a refused import wrote %d audit entries", after-before)
	}
}

// TestApplyImportAllOrNothing makes the second of two creates fail at apply time (its
// name was taken after the plan was made): the first is not created either.
func TestApplyImportAllOrNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		between func(f *fixture)
		wantErr string
	}{
		{"name taken after planning", func(f *fixture) {
			f.create(registry.Spec{Name: "bbb", Type: registry.TypeStdio, Command: "other", Enabled: true})
		}, `create server "bbb"`},
		{"server edited after planning", func(f *fixture) {
			f.update(f.serverID("ccc"), registry.Patch{Description: ptr("edited")})
		}, `server "ccc" was changed`},
		{"server deleted after planning", func(f *fixture) {
			if err := f.reg.DeleteServer(f.ctx, audit.System, f.serverID("ccc")); err != nil {
				f.t.Fatal(err)
			}
		}, `server "ccc" was deleted`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.create(registry.Spec{Name: "ccc", Type: registry.TypeStdio, Command: "c", Enabled: true})
			plan := f.plan("servers.yaml", `version: 1
servers:
  - {name: aaa, type: stdio, command: a}
  - {name: bbb, type: stdio, command: b}
  - {name: ccc, type: stdio, command: c2}
`, false)
			if plan.Count(registry.PlanCreate) != 2 || plan.Count(registry.PlanUpdate) != 1 {
				t.Fatalf("plan:\n%s", plan)
			}
			tt.between(f)
			before := f.count(`SELECT count(*) FROM audit_log`)
			_, err := f.reg.ApplyImport(f.ctx, audit.System, plan)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("apply: got %v, want an error containing %q", err, tt.wantErr)
			}
			if n := f.count(`SELECT count(*) FROM mcp_servers WHERE name = 'aaa'`); n != 0 {
				t.Fatalf("aaa was created although the import failed")
			}
			if n := f.count(`SELECT count(*) FROM mcp_servers WHERE command = 'c2'`); n != 0 {
				t.Fatalf("ccc was updated although the import failed")
			}
			if after := f.count(`SELECT count(*) FROM audit_log`); after != before {
				t.Fatalf("a failed import wrote %d audit entries", after-before)
			}
		})
	}
}

// TestPlanDoesNotConfirmGuesses: without CompareSecrets (a caller who cannot read the
// secrets), a value in the file that equals the stored one is still "replaced", so the
// plan cannot be used to check a guess. With it, an equal value leaves the server alone.
func TestPlanDoesNotConfirmGuesses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(registry.Spec{Name: "api", Type: registry.TypeStreamableHTTP, URL: "http://127.0.0.1:1/mcp", Enabled: true,
		AuthType: registry.AuthBearer, AuthToken: cfgCanary + "-token", Headers: map[string]string{"X-Key": cfgCanary + "-key"}})
	for _, guess := range []string{cfgCanary + "-key", cfgCanary + "-wrong"} {
		file := "version: 1\nservers:\n  - name: api\n    type: streamable_http\n    url: http://127.0.0.1:1/mcp\n" +
			"    headers:\n      X-Key: " + guess + "\n    auth:\n      type: bearer\n      token: null\n"
		cfg, err := registry.ParseConfig("guess.yaml", []byte(file), registry.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, compare := range []bool{false, true} {
			plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{CompareSecrets: compare})
			if err != nil || plan.HasErrors() {
				t.Fatalf("plan: %v %v", err, plan.Errors)
			}
			it := plan.Items[0]
			right := guess == cfgCanary+"-key"
			want := registry.PlanUpdate
			if compare && right {
				want = registry.PlanUnchanged
			}
			if it.Action != want {
				t.Errorf("guess right=%v, compare=%v: action %q, want %q (changes %v)", right, compare, it.Action, want, it.Changes)
			}
			if want == registry.PlanUpdate && (len(it.Changes) != 1 || it.Changes[0].To != "replaced") {
				t.Errorf("guess right=%v, compare=%v: changes %+v, want only the header replaced", right, compare, it.Changes)
			}
		}
	}
}
