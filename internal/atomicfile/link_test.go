package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Write through a symbolic link replaces the file it names, keeping that file's mode, and
// leaves the link a link; through a relative chain of links and a dangling one (its
// target is created) alike. Renamed over, the link became a regular file of mode 0600 and
// its target kept the old content.
func TestWriteThroughLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(sub, "config.yaml")
	if err := os.WriteFile(target, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	// link → middle → sub/config.yaml, both relative.
	link, middle := filepath.Join(dir, "link"), filepath.Join(dir, "middle")
	symlink(t, "sub/config.yaml", middle)
	symlink(t, "middle", link)
	if err := Write(link, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	wantLink(t, link, "middle")
	wantLink(t, middle, "sub/config.yaml")
	if b, err := os.ReadFile(target); err != nil || string(b) != "new\n" {
		t.Fatalf("the link's target: %q %v, want the new content", b, err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("the target's mode: %v %v, want 0640 kept", fi, err)
	}

	dangling := filepath.Join(dir, "dangling")
	symlink(t, "sub/new.yaml", dangling)
	if err := Write(dangling, []byte("made\n")); err != nil {
		t.Fatal(err)
	}
	wantLink(t, dangling, "sub/new.yaml")
	if b, err := os.ReadFile(filepath.Join(sub, "new.yaml")); err != nil || string(b) != "made\n" {
		t.Fatalf("a dangling link's target: %q %v, want it created", b, err)
	}
	if names := dirNames(t, sub); strings.Join(names, " ") != "config.yaml new.yaml" {
		t.Fatalf("files left beside the targets: %v", names)
	}

	loop := filepath.Join(dir, "loop")
	symlink(t, "loop", loop)
	if err := Write(loop, []byte("x")); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("a link to itself: %v, want ELOOP", err)
	}
	wantLink(t, loop, "loop")
}

// What is not a regular file (a pipe here) cannot be replaced: Write refuses it, through
// a link too, and leaves it as it is, not a regular file in its place.
func TestWriteRefusesNonRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	link := filepath.Join(dir, "link")
	symlink(t, "fifo", link)
	for _, p := range []string{fifo, link} {
		if err := Write(p, []byte("x")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Write(%s): %v, want it refused", p, err)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Fatalf("the pipe: %v %v, want it left a pipe", fi, err)
	}
	wantLink(t, link, "fifo")
	if names := dirNames(t, dir); strings.Join(names, " ") != "fifo link" {
		t.Fatalf("files left: %v", names)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// wantLink fails unless link is a symbolic link to target.
func wantLink(t *testing.T, link, target string) {
	t.Helper()
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Fatalf("%s: %q %v, want a link to %q", link, got, err, target)
	}
}
