package mcpclient

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// pipeSize is the capacity of the pipe that is pid's standard input, or -1: read, not
// assumed to be the default 64 KiB.
func pipeSize(pid int) int {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/0", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return -1
	}
	defer f.Close()
	size, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return -1
	}
	return size
}

// pipeQueued is how many bytes wait in the pipe that is pid's standard input, or -1.
func pipeQueued(pid int) int {
	// Opening /proc/<pid>/fd/0 opens that pipe itself; non-blocking so that it never waits.
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/0", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return -1
	}
	defer f.Close()
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return -1
	}
	return int(n)
}

// A call that waits for the stdin write lock behind a write stuck on a full pipe returns
// at its own deadline: it used to wait until the stuck write gave up (stdinWait, 60 s).
func TestStalledStdinCallEndsAtItsDeadline(t *testing.T) {
	lim, _ := testLimit(4 << 20)
	command, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "stalled"}, "")
	cmd := exec.Command(command, args...)
	cmd.Env = os.Environ()
	for k, v := range envm {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	const writeWait = 20 * time.Second
	tr := &commandTransport{cmd: cmd, terminate: 2 * time.Second, lim: lim, writeWait: writeWait}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// A stopped server reads nothing: its standard input fills up.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		// More than the pipe holds (64 KiB): this write fills it and waits.
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo",
			Arguments: map[string]any{"message": pad(256 << 10)}})
		first <- err
	}()
	defer func() {
		// Let the server read again: the first call then completes, and the session closes.
		_ = syscall.Kill(pid, syscall.SIGCONT)
		<-first
		_ = cs.Close()
	}()
	// Full is within a page of its capacity: the server may have read part of the first
	// message before it stopped, and the page it read from keeps that room unused (a run
	// ended at 64,001 bytes of 65,536).
	full := func() bool { size := pipeSize(pid); return size > 0 && pipeQueued(pid) > size-os.Getpagesize() }
	for deadline := time.Now().Add(20 * time.Second); !full(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first call never filled the server's standard input: %d bytes queued of %d", pipeQueued(pid), pipeSize(pid))
		}
	}

	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	begin := time.Now()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	took := time.Since(begin)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call behind a stuck write: %v, want its deadline exceeded", err)
	}
	if took > timeout+3*time.Second {
		t.Fatalf("call with a %s timeout behind a stuck write returned after %s (the stuck write waits %s)", timeout, took, writeWait)
	}
}
