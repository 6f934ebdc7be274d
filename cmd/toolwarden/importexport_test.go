package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// importCanary is a secret value that must never be printed or exported.
const importCanary = "ghp_canary_6b1f"

const claudeConfig = `{
  "mcpServers": {
    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "GitHub": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "` + importCanary + `"}},
    "remote": {"type": "sse", "url": "http://127.0.0.1:9/sse"}
  }
}`

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantOutput(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s: output\n%s\nwant it to contain %q", what, got, w)
		}
	}
	if strings.Contains(got, importCanary) {
		t.Fatalf("%s printed a secret value:\n%s", what, got)
	}
}

// TestImportExportDataDir imports a claude_desktop_config.json into a fresh data dir
// (the embedded cluster starts for each command), exports it, and imports the export
// with --dry-run: everything is unchanged and nothing is written.
func TestImportExportDataDir(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	files := t.TempDir()
	claude := writeFile(t, files, "claude_desktop_config.json", claudeConfig)

	stdout, stderr, err := runCmd(t, "", "import", "--data-dir", dataDir, claude)
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, stdout, stderr)
	}
	wantOutput(t, "import", stdout,
		"+ create filesystem (stdio)\n", "+ create github (stdio)\n", "+ create remote (sse)\n",
		"    env GITHUB_PERSONAL_ACCESS_TOKEN: set\n",
		`server "GitHub": name: is not a valid server name: "GitHub" → "github"`,
		"Imported "+claude+": 3 created, 0 updated, 0 deleted, 0 unchanged, 0 kept.")
	if st, err := os.Stat(filepath.Join(dataDir, "secret.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("import on a fresh data dir: secret.key %v %v; want it created 0600", st, err)
	}

	out := filepath.Join(files, "servers.yaml")
	if _, stderr, err := runCmd(t, "", "export", "--data-dir", dataDir, "--out", out); err != nil {
		t.Fatalf("export --out: %v\n%s", err, stderr)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("export --out: %v %v; want a 0600 file", st, err)
	}
	exported, _ := os.ReadFile(out)
	wantOutput(t, "export", string(exported), "version: 1\n", "  - name: github\n", "      GITHUB_PERSONAL_ACCESS_TOKEN: null\n",
		"Secret values are never exported")
	stdout, _, err = runCmd(t, "", "export", "--data-dir", dataDir)
	if err != nil || stdout != string(exported) {
		t.Fatalf("export to stdout: %v; got\n%s\nwant the same bytes as --out:\n%s", err, stdout, exported)
	}

	before, _, err := runCmd(t, "", "audit", "verify", "--data-dir", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = runCmd(t, "", "import", "--dry-run", "--data-dir", dataDir, out)
	if err != nil {
		t.Fatalf("import --dry-run: %v\n%s%s", err, stdout, stderr)
	}
	wantOutput(t, "import --dry-run", stdout, "= unchanged filesystem\n", "= unchanged github\n", "= unchanged remote\n",
		"0 to create, 0 to update, 0 to delete, 3 unchanged, 0 kept.", "Dry run: nothing was changed.")

	// A changed file with --dry-run shows the change and still writes nothing.
	edited := strings.Replace(string(exported), "url: http://127.0.0.1:9/sse", "url: http://127.0.0.1:10/sse", 1)
	stdout, _, err = runCmd(t, edited, "import", "--data-dir", dataDir, "--dry-run", "--prune", "-")
	if err != nil {
		t.Fatalf("import --dry-run - (stdin): %v\n%s", err, stdout)
	}
	wantOutput(t, "import --dry-run of an edited file", stdout, "Import plan for stdin (Toolwarden YAML)",
		"~ update remote (sse)\n    url: \"http://127.0.0.1:9/sse\" → \"http://127.0.0.1:10/sse\"\n", "Dry run: nothing was changed.")
	after, _, err := runCmd(t, "", "audit", "verify", "--data-dir", dataDir)
	if err != nil || after != before {
		t.Fatalf("audit after dry runs: got %q (%v), want %q: a dry run must write nothing", after, err, before)
	}
	if stdout, _, _ := runCmd(t, "", "export", "--data-dir", dataDir); stdout != string(exported) {
		t.Fatalf("export after dry runs changed:\n%s", stdout)
	}
}

// TestImportCommand covers the command's other paths against a test database.
func TestImportCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		stdin    string
		file     string // written to a file named by args' "FILE"
		args     []string
		wantCode int // 0 ok, 1 exitError{1}, 2 usage, -1 an error naming the file
		want     []string
	}{
		{name: "claude from stdin", stdin: claudeConfig, args: []string{"import", "-"},
			want: []string{"Import plan for stdin (Claude Desktop / .mcp.json)", "3 created"}},
		{name: "flags after the file", file: claudeConfig, args: []string{"import", "FILE", "--dry-run"},
			want: []string{"+ create remote (sse)", "Dry run: nothing was changed."}},
		{name: "plan with errors", file: "version: 1\nservers:\n  - {name: a, type: sse, url: 'ftp://x'}\n  - {name: b, type: stdio}\n",
			args: []string{"import", "--dry-run", "FILE"}, wantCode: 1,
			want: []string{`server "a": url: must start with http://`, `server "b": command: is required`, "2 errors."}},
		{name: "bad file", file: "{\"mcpServers\": {", args: []string{"import", "FILE"}, wantCode: 1},
		// The egress policy serve applies applies to the servers import registers.
		{name: "egress deny", file: "version: 1\nservers:\n  - {name: a, type: streamable_http, url: 'http://10.9.1.1/mcp'}\n",
			args: []string{"import", "--dry-run", "--egress-deny", "10.9.0.0/16", "FILE"}, wantCode: 1,
			want: []string{`server "a": url:`, "deny list"}},
		{name: "bad egress", args: []string{"import", "--egress-allow", "10.0.0.0/33", "x.yaml"}, wantCode: 2},
		{name: "missing file", args: []string{"import", "/nonexistent/servers.yaml"}, wantCode: -1},
		{name: "no file", args: []string{"import", "--dry-run"}, wantCode: 2},
		{name: "two files", args: []string{"import", "a", "b"}, wantCode: 2},
		{name: "export with an argument", args: []string{"export", "out.yaml"}, wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := dbtest.TempDir(t)
			args := []string{tt.args[0], "--database-url", dbtest.NewURL(t), "--data-dir", dir}
			for _, a := range tt.args[1:] {
				if a == "FILE" {
					a = writeFile(t, dir, "config.json", tt.file)
				}
				args = append(args, a)
			}
			stdout, stderr, err := runCmd(t, tt.stdin, args...)
			var ee exitError
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Fatalf("got %v, want success\n%s%s", err, stdout, stderr)
			case tt.wantCode == 1 && !(errors.As(err, &ee) && ee.code == 1):
				t.Fatalf("got %v, want exit 1\n%s%s", err, stdout, stderr)
			case tt.wantCode == 2 && !errors.Is(err, errUsage):
				t.Fatalf("got %v, want a usage error", err)
			case tt.wantCode == -1 && (err == nil || !strings.Contains(err.Error(), "/nonexistent/servers.yaml")):
				t.Fatalf("got %v, want an error naming the file", err)
			}
			wantOutput(t, tt.name, stdout+stderr, tt.want...)
		})
	}
}

// TestImportWholeConfiguration: categories, settings and tools' settings through the
// command: a dry run shows each change old → new, the import applies what it can and
// names what it cannot, a second import changes nothing, and a bad value is refused
// naming the file, the tool and the field.
func TestImportWholeConfiguration(t *testing.T) {
	t.Parallel()
	dir := dbtest.TempDir(t)
	common := []string{"--database-url", dbtest.NewURL(t), "--data-dir", dir}
	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		stdout, stderr, err := runCmd(t, stdin, append(append([]string{args[0]}, common...), args[1:]...)...)
		return stdout + stderr, err
	}
	file := writeFile(t, dir, "config.yaml", "version: 1\nservers: []\ncategories:\n  - name: utilities\n    description: Small helpers\n"+
		"tools:\n  - tool: nosuch__echo\n    risk: high\nsettings:\n  approval_ttl_seconds: 3600\n  high_separation: 'off'\n")
	// A dry run exits exitNotApplied too, as the import of the file would: a CI gate
	// built on it sees what would not be applied.
	out, err := run("", "import", "--dry-run", file)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitNotApplied {
		t.Fatalf("dry run with something not applied: got %v, want exit %d\n%s", err, exitNotApplied, out)
	}
	wantOutput(t, "dry run", out, "1 item(s) would not be applied (listed above); exit status 3", "+ create category utilities\n    description: \"Small helpers\"\n",
		"~ update settings\n    approval_ttl_seconds: 86400 → 3600\n    high_separation: auto → off\n",
		"Not applied (the rest is):\n  ! "+file+": tools.nosuch__echo: there is no server \"nosuch\"", "Dry run: nothing was changed.")
	if out, _ := run("", "export"); strings.Contains(out, "utilities") {
		t.Fatalf("the dry run changed the configuration:\n%s", out)
	}
	// What was not applied makes the import exit exitNotApplied, after the report: a CI
	// job applying the file learns that the configuration is not all in place.
	out, err = run("", "import", file)
	if !errors.As(err, &ee) || ee.code != exitNotApplied {
		t.Fatalf("import with something not applied: got %v, want exit %d\n%s", err, exitNotApplied, out)
	}
	wantOutput(t, "import", out, "Also changed: category utilities, settings.", "Not applied (1; everything else was):\n  ! "+file+": tools.nosuch__echo")
	exported, err := run("", "export")
	if err != nil {
		t.Fatal(err)
	}
	wantOutput(t, "export", exported, "categories:\n  - name: utilities\n    description: Small helpers\n", "approval_ttl_seconds: 3600\n", "high_separation: \"off\"\n")
	out, err = run("", "import", file)
	if !errors.As(err, &ee) || ee.code != exitNotApplied || strings.Contains(out, "Also changed") || strings.Contains(out, "~ update") {
		t.Fatalf("second import: %v\n%s", err, out)
	}
	bad := writeFile(t, dir, "bad.yaml", "version: 1\ntools:\n  - tool: ev__echo\n    risk: extreme\n")
	out, err = run("", "import", bad)
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("bad file: %v\n%s", err, out)
	}
	wantOutput(t, "bad file", out, bad+": tools.ev__echo.risk: must be low, medium or high", "nothing was imported")
}

// An import refuses to work with a key that does not open the database's secrets (it
// would seal new ones serve cannot open), and creates no key then; a dry run neither
// migrates nor creates a key.
func TestImportKeyAndDryRunCreateNothing(t *testing.T) {
	t.Parallel()
	dir := dbtest.TempDir(t)
	url := dbtest.NewURL(t)
	file := writeFile(t, dir, "servers.yaml", "version: 1\nservers:\n  - name: r\n    type: streamable_http\n    url: http://127.0.0.1:9/mcp\n    enabled: false\n    headers: {Authorization: \"Bearer sk-live-0123456789abcdef0123\"}\n")
	run := func(key string, args ...string) (string, error) {
		stdout, stderr, err := runCmd(t, "", append(append([]string{"import", "--database-url", url, "--data-dir", dir, "--secret-key-file", key}, args...), file)...)
		return stdout + stderr, err
	}
	first := filepath.Join(dir, "first.key")
	if out, err := run(first); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	missing := filepath.Join(dir, "missing.key")
	for _, args := range [][]string{nil, {"--dry-run"}} {
		if out, err := run(missing, args...); err == nil || !strings.Contains(err.Error(), "holds secrets sealed with a key") {
			t.Fatalf("import %v with no key file: %v\n%s", args, err, out)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("import %v created a key file beside the database's", args)
		}
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := ensureSecretKey(other); err != nil {
		t.Fatal(err)
	}
	if out, err := run(other); err == nil || !strings.Contains(err.Error(), "which "+other+" does not hold") {
		t.Fatalf("import with another key: %v\n%s", err, out)
	}

	// A dry run against a database without the schema stops there and creates none.
	empty := dbtest.NewEmpty(t)
	stdout, stderr, err := runCmd(t, "", "import", "--database-url", empty, "--data-dir", dir, "--dry-run", file)
	if err == nil || !strings.Contains(err.Error(), "migrate up first") {
		t.Fatalf("dry run on an empty database: %v\n%s%s", err, stdout, stderr)
	}
	pool, err := db.NewPool(context.Background(), empty)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var tables int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the dry run created %d tables (%v)", tables, err)
	}
}

// A file cannot copy Toolwarden's own settings out of the environment `import` runs in
// (the service's: database credentials, the admin's password) into a server: the
// import is refused naming the variable and the field, and registers nothing.
func TestImportRefusesOwnSettings(t *testing.T) {
	const canary = "admin-pw-canary-41c7"
	t.Setenv("TOOLWARDEN_ADMIN_PASSWORD", canary)
	dir := dbtest.TempDir(t)
	common := []string{"--database-url", dbtest.NewURL(t), "--data-dir", dir}
	file := writeFile(t, dir, ".mcp.json", `{"mcpServers":{"x":{"command":"npx","args":["-y","evil-pkg","${TOOLWARDEN_ADMIN_PASSWORD}"]}}}`)
	stdout, stderr, err := runCmd(t, "", append(append([]string{"import"}, common...), file)...)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("got %v, want exit 1\n%s%s", err, stdout, stderr)
	}
	wantOutput(t, "import", stdout+stderr, file+`: server "x": args[2]: environment variable TOOLWARDEN_ADMIN_PASSWORD is Toolwarden's own setting`,
		"nothing was imported")
	if strings.Contains(stdout+stderr, canary) {
		t.Fatalf("the import printed the variable's value:\n%s%s", stdout, stderr)
	}
	out, _, err := runCmd(t, "", append([]string{"export"}, common...)...)
	if err != nil || !strings.Contains(out, "servers: []\n") {
		t.Fatalf("export after the refused import: %v\n%s\nwant no server", err, out)
	}
}

// On a data dir that holds no cluster (new, or mistyped), a dry run and an export are
// refused saying so, and create none: opening the embedded cluster would run initdb.
func TestDryRunAndExportCreateNoCluster(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(dbtest.TempDir(t), "mistyped")
	file := writeFile(t, dbtest.TempDir(t), "servers.yaml", "version: 1\nservers: []\n")
	for _, args := range [][]string{{"import", "--dry-run", "--data-dir", dir, file}, {"export", "--data-dir", dir}} {
		stdout, stderr, err := runCmd(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "holds no database") {
			t.Fatalf("%v: %v\n%s%s, want the missing cluster named", args, err, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "pg")); !os.IsNotExist(err) {
			t.Fatalf("%v created a cluster in %s", args, dir)
		}
	}
}
