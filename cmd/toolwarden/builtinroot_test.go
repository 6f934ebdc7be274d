package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A built-in root that holds the data dir, a key or a database's socket is refused
// before anything starts: a terminal is shown a folder right below the root, and a
// conversation named after one of those would be shown it. Below the data dir (the
// default) or beside it is fine, through a symbolic link too.
func TestBuiltinRootApart(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	keys := filepath.Join(base, "keys")
	for _, d := range []string{data, keys} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	hidden := []string{data, filepath.Join(data, "secret.key"), filepath.Join(keys, "checkpoint.key"), "/run/postgresql"}
	for _, tc := range []struct {
		root, holds string
	}{
		{filepath.Join(data, "workspaces"), ""},
		{filepath.Join(base, "workspaces"), ""},
		{filepath.Join(link, "workspaces"), ""},
		{data, data},
		{base, data},
		{link, data},
		{"/", data},
		{keys, filepath.Join(keys, "checkpoint.key")},
		{"/run", "/run/postgresql"},
	} {
		err := builtinRootApart(tc.root, hidden)
		switch {
		case tc.holds == "" && err != nil:
			t.Errorf("%s: %v", tc.root, err)
		case tc.holds != "" && (err == nil || !strings.Contains(err.Error(), "--builtin-root "+tc.root+" holds "+tc.holds)):
			t.Errorf("%s: got %v, want it refused as holding %s", tc.root, err, tc.holds)
		}
	}
}
