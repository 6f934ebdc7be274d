package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secretkeys"
)

// After serve --lost-keys X started with a new key K1, a tool's past configuration is
// still under X. `import` with serve's key file is refused (its error naming
// --lost-keys), and names the keys lost with --lost-keys or TOOLWARDEN_LOST_KEYS as serve
// does; so does an import on a missing key file (the first check). Without the flag
// every import was refused for good, telling the operator to point --secret-key-file at
// the file it already named. Not parallel: it sets TOOLWARDEN_LOST_KEYS.
func TestImportLostKeys(t *testing.T) {
	ctx := context.Background()
	lk := lostKeySetup(t)
	dir, url, pool, lost, k1, ring1, path := lk.dir, lk.url, lk.pool, lk.lost, lk.k1, lk.ring1, lk.path
	lk.pastToolValue(t)
	// serve --lost-keys X recorded K1.
	if err := secretkeys.Record(ctx, pool, ring1, path, []string{lost.ID}, ""); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "config.yaml", "version: 1\nservers:\n  - name: r\n    type: streamable_http\n    url: http://127.0.0.1:9/mcp\n    enabled: false\n"+
		"    headers: {Authorization: \"Bearer sk-live-0123456789abcdef0123\"}\n")
	importCmd := func(key string, args ...string) (string, error) {
		stdout, stderr, err := runCmd(t, "", append(append([]string{"import", "--database-url", url, "--data-dir", dir, "--secret-key-file", key}, args...), file)...)
		return stdout + stderr, err
	}

	for _, args := range [][]string{{"--dry-run"}, nil} {
		out, err := importCmd(path, args...)
		if err == nil || !strings.Contains(err.Error(), "under key "+lost.ID) || !strings.Contains(err.Error(), "name them in --lost-keys") {
			t.Fatalf("import %v without --lost-keys: %v\n%s\nwant it refused naming the key and --lost-keys", args, err, out)
		}
	}
	if out, err := importCmd(path, "--dry-run", "--lost-keys", lost.ID); err != nil || !strings.Contains(out, "+ create r") {
		t.Fatalf("import --dry-run --lost-keys %s: %v\n%s", lost.ID, err, out)
	}
	// The file's secret is sealed with K1, serve's key.
	if out, err := importCmd(path, "--lost-keys", lost.ID); err != nil {
		t.Fatalf("import --lost-keys %s: %v\n%s", lost.ID, err, out)
	}
	usage, err := secretkeys.Usage(ctx, pool)
	if err != nil || usage[k1.ID] < 2 || usage[lost.ID] < 1 {
		t.Fatalf("usage after the import: %v %v", usage, err)
	}
	if _, err := registry.New(pool, ring1, nil).GetServerByName(ctx, "r"); err != nil {
		t.Fatalf("the imported server: %v", err)
	}

	// No key file at all: refused unless every key the database needs is lost, and the
	// refusal names --lost-keys; a dry run creates no key either way.
	missing := filepath.Join(dir, "missing.key")
	if out, err := importCmd(missing, "--dry-run"); err == nil || !strings.Contains(err.Error(), "name them in --lost-keys") {
		t.Fatalf("import --dry-run with no key file: %v\n%s", err, out)
	}
	t.Setenv("TOOLWARDEN_LOST_KEYS", lost.ID+","+k1.ID)
	if out, err := importCmd(missing, "--dry-run"); err != nil {
		t.Fatalf("import --dry-run with no key file and TOOLWARDEN_LOST_KEYS naming every key: %v\n%s", err, out)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run created a key file: %v", err)
	}
	// The variable with serve's key file, as serve and secrets rotate take it.
	t.Setenv("TOOLWARDEN_LOST_KEYS", lost.ID)
	if out, err := importCmd(path); err != nil {
		t.Fatalf("import with TOOLWARDEN_LOST_KEYS: %v\n%s", err, out)
	}
}
