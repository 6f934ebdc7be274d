package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolwarden/toolwarden/internal/testkit"
)

// WriteNew makes a file of mode 0600 with the whole content, leaves no temporary file,
// is not put off by one an earlier crash left, and never replaces a file that is there.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.key")
	leftover := filepath.Join(dir, ".secret.key.tmp-123")
	if err := os.WriteFile(leftover, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(p, []byte("key one\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "key one\n" {
		t.Fatalf("content: %q %v", b, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v, want 0600", fi, err)
	}
	if err := WriteNew(p, []byte("key two\n")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "key one\n" {
		t.Fatalf("an existing file was replaced: %q", b)
	}
	if names := dirNames(t, dir); strings.Join(names, " ") != ".secret.key.tmp-123 secret.key" {
		t.Fatalf("files left: %v, want the earlier leftover and the file", names)
	}
}

// On a file system without hard links the file is created in place, still exclusively.
func TestWriteNewWithoutHardLinks(t *testing.T) {
	was := link
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	t.Cleanup(func() { link = was })
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.key")
	if err := WriteNew(p, []byte("key\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "key\n" {
		t.Fatalf("content: %q %v", b, err)
	}
	if err := WriteNew(p, []byte("other\n")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing file: %v, want fs.ErrExist", err)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("files left: %v", names)
	}
}

// A write that fails part way (the disk full: here a file size limit of 0 in a child
// process) leaves nothing at the name, not an empty file that every later start would
// fail on; and nothing else either.
func TestWriteNewDiskFull(t *testing.T) {
	if p := os.Getenv("ATOMICFILE_DISK_FULL"); p != "" {
		testkit.DiskFull(t)
		if err := WriteNew(p, []byte("key\n")); err == nil {
			t.Fatal("a write beyond the file size limit succeeded")
		}
		return
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.key")
	testkit.RunDiskFull(t, "TestWriteNewDiskFull", "ATOMICFILE_DISK_FULL="+p)
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("files left by a failed write: %v", names)
	}
	if err := WriteNew(p, []byte("key\n")); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
