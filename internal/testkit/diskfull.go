package testkit

import (
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// DiskFull makes every write to a regular file by this process fail (EFBIG), as on a
// full disk. Only for a child process of its own (RunDiskFull): it holds for the whole
// process.
func DiskFull(t testing.TB) {
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

// RunDiskFull runs test (this test binary's) in a child process with env set, and
// fails unless it passes there.
func RunDiskFull(t testing.TB, test string, env ...string) {
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
