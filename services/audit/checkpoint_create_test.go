package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
)

// A new checkpoint key is made whole or not at all: a write that fails part way (the
// disk full: here a file size limit of 0 in a child process) leaves no empty key file,
// which every later start would refuse as not PEM, so the next start makes the key. A
// key that is there is never replaced.
func TestCheckpointKeyCreatedWhole(t *testing.T) {
	if p := os.Getenv("TOOLWARDEN_TEST_CHECKPOINT_DISK_FULL"); p != "" {
		testkit.DiskFull(t)
		if _, err := OpenSigner(p); err == nil {
			t.Fatal("a checkpoint key written beyond the file size limit")
		}
		return
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	testkit.RunDiskFull(t, "TestCheckpointKeyCreatedWhole", "TOOLWARDEN_TEST_CHECKPOINT_DISK_FULL="+keyPath)
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Fatalf("a failed first write left %v", es[0].Name())
	}
	s, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatalf("the next start: %v", err)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v, want mode 0600", fi, err)
	}
	again, err := createSigner(keyPath) // as when another process made it first
	if err != nil {
		t.Fatalf("beside a key: %v", err)
	}
	if !bytes.Equal(again.Public(), s.Public()) {
		t.Fatal("the key was replaced")
	}
	if es, _ := os.ReadDir(dir); len(es) != 2 {
		t.Fatalf("files beside the key: %d, want its .pub only", len(es)-1)
	}
}
