package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// serve on a fresh external database with its own key file, before any secret is saved:
// an import run without that file (its default one missing) must not make a key of its
// own and seal the file's values with it (serve could not open them, and would refuse
// to start again). Nor may a second serve with another data dir and no key file make
// its own first key. Both are refused naming --secret-key-file and change nothing; with
// serve's key file the import works.
func TestKeyFileRecordedOnFirstStart(t *testing.T) {
	t.Setenv("TOOLWARDEN_SECRET_KEY_FILE", "")
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	serveKey := filepath.Join(t.TempDir(), "secret.key")
	startServe(t, dir, "--database-url", url, "--secret-key-file", serveKey).stop()
	if usage, err := secretkeys.Usage(ctx, pool); err != nil || len(usage) != 0 {
		t.Fatalf("a fresh install holds secret values: %v %v", usage, err)
	}

	shell := dbtest.TempDir(t) // another data dir: its default key file is missing
	file := writeFile(t, t.TempDir(), "claude_desktop_config.json",
		`{"mcpServers": {"remote": {"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {"Authorization": "Bearer `+importCanary+`"}}}}`)
	stdout, stderr, err := runCmd(t, "", "import", "--database-url", url, "--data-dir", shell, file)
	if err == nil || !strings.Contains(err.Error(), "--secret-key-file") || !strings.Contains(err.Error(), "nothing was imported") {
		t.Fatalf("import without serve's key file: %v\n%s%s", err, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(shell, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused import made a key file: %v", err)
	}
	if n := testkit.Count(t, pool, `SELECT count(*) FROM mcp_servers WHERE name = 'remote'`); n != 0 {
		t.Fatalf("the refused import registered the server")
	}

	// A replica with a data dir of its own and no key file.
	msg := launch(t, shell, "--database-url", url).exited(t)
	if !strings.Contains(msg, "no secret key file at "+filepath.Join(shell, "secret.key")) || !strings.Contains(msg, "--secret-key-file") {
		t.Fatalf("a second serve without the key file: %s", msg)
	}
	if _, err := os.Stat(filepath.Join(shell, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused serve left a key file: %v", err)
	}

	stdout, stderr, err = runCmd(t, "", "import", "--database-url", url, "--data-dir", shell, "--secret-key-file", serveKey, file)
	if err != nil {
		t.Fatalf("import with serve's key file: %v\n%s%s", err, stdout, stderr)
	}
	keys, err := secrets.LoadKeyring(serveKey)
	if err != nil {
		t.Fatal(err)
	}
	usage, err := secretkeys.Usage(ctx, pool)
	if err != nil || usage[keys.PrimaryID()] != 1 || len(usage) != 1 {
		t.Fatalf("the imported value's key: %v %v, want 1 under %s", usage, err, keys.PrimaryID())
	}
	startServe(t, dir, "--database-url", url, "--secret-key-file", serveKey).stop()
}
