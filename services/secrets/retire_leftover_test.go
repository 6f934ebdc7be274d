package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A write of the key file that a crash cut short leaves a temporary copy beside it,
// holding the keys of its time; retiring a key removes those copies, so the retired key
// is gone from the directory and not only from the file. Another file's leftovers stay.
func TestRetiredKeyLeavesNoCopy(t *testing.T) {
	t.Parallel()
	path, _ := legacyKeyFile(t)
	added, err := AddKeyToFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys, data, err := readKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := keys[1].ID
	dir := filepath.Dir(path)
	leftover := filepath.Join(dir, "."+filepath.Base(path)+".tmp-4242")
	other := filepath.Join(dir, ".other.tmp-4242")
	for _, f := range []string{leftover, other} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveKeyFromFile(path, old); err != nil {
		t.Fatalf("retire %s: %v", old, err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("the crashed write's copy of the key file is still there (%v): it holds the retired key", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another file's temporary file was removed: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(after), added.ID+":") || strings.Count(strings.TrimSpace(string(after)), "\n") != 0 {
		t.Fatalf("key file after retiring: %v, %d lines", err, strings.Count(string(after), "\n")+1)
	}
}
