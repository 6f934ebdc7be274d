package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"

	"github.com/toolwarden/toolwarden/services/secrets"
)

// A first run's secret key file is made whole or not at all: a write that fails part
// way (the disk full: here a file size limit of 0 in a child process) leaves no empty
// key file that every later start would refuse ("holds no keys"), so the next start
// makes the key. A key file that is there is never replaced.
func TestSecretKeyCreatedWhole(t *testing.T) {
	if p := os.Getenv("TOOLWARDEN_TEST_KEY_DISK_FULL"); p != "" {
		testkit.DiskFull(t)
		if _, err := ensureSecretKey(p); err == nil {
			t.Fatal("a key file written beyond the file size limit")
		}
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.key")
	testkit.RunDiskFull(t, "TestSecretKeyCreatedWhole", "TOOLWARDEN_TEST_KEY_DISK_FULL="+path)
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("a failed first write left %v", es[0].Name())
	}
	if created, err := ensureSecretKey(path); err != nil || !created {
		t.Fatalf("the next start: created %v, %v", created, err)
	}
	if _, err := secrets.LoadKeyring(path); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if created, err := ensureSecretKey(path); err != nil || created {
		t.Fatalf("beside a key file: created %v, %v", created, err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the key file was replaced")
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("files beside the key: %d, want none", len(es)-1)
	}
}
