package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Write replaces the content and keeps the file's owner when it can (as root) and its
// owner's and group's permissions: a key file rewritten by a command run with sudo stays
// its service's. A new file is 0600.
func TestWriteKeepsOwner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	chowned := os.Getuid() == 0 && os.Chown(p, 65534, 65534) == nil
	if err := Write(p, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new\n" {
		t.Fatalf("content: %q %v", b, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 (the group's read kept, others' dropped)", fi.Mode().Perm())
	}
	fresh := filepath.Join(filepath.Dir(p), "new.key")
	if err := Write(fresh, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a new file: %v %v, want 0600", fi, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	want := uint32(os.Getuid())
	if chowned {
		want = 65534
	}
	if st.Uid != want || st.Gid != want && chowned {
		t.Errorf("owner %d:%d, want %d", st.Uid, st.Gid, want)
	}
}
