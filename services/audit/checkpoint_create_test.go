package audit

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// A new checkpoint key is made whole or not at all: a write that fails part way (the
// disk full: here a file size limit of 0 in a child process) leaves no empty key file,
// which every later start would refuse as not PEM, so the next start makes the key. A
// key that is there is never replaced.
func TestCheckpointKeyCreatedWhole(t *testing.T) {
	if p := os.Getenv("TOOLWARDEN_TEST_CHECKPOINT_DISK_FULL"); p != "" {
		diskFull(t)
		if _, err := OpenSigner(p); err == nil {
			t.Fatal("a checkpoint key written beyond the file size limit")
		}
		return
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	runDiskFull(t, "TestCheckpointKeyCreatedWhole", "TOOLWARDEN_TEST_CHECKPOINT_DISK_FULL="+keyPath)
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

// diskFull makes every write to a regular file by this process fail (EFBIG), as on a
// full disk. Only for a child process of its own (runDiskFull): it holds for the whole
// process.
func diskFull(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 0
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ) // the write fails instead of the process being killed
}

// runDiskFull runs test (this test binary's) in a child process with env set.
func runDiskFull(t *testing.T, test string, env ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the file size limit that stands for a full disk is Linux's")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
}
