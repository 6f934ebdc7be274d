// Package everything starts @modelcontextprotocol/server-everything (pinned in
// package.json, installed by make test) for integration tests, over stdio, SSE or
// streamable HTTP, bound to loopback only, and finds the other reference servers
// pinned there.
package everything

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ToolCount is how many tools the pinned version lists to a client that declares the
// roots capability (the Go SDK does by default).
const ToolCount = 14

// Root returns the repository root (the directory holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("everything: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Entry returns the server's script, failing the test with what to run when it is not
// installed.
func Entry(t testing.TB) string {
	t.Helper()
	return ReferenceEntry(t, "server-everything")
}

// ReferenceEntry returns the script of the reference server @modelcontextprotocol/<pkg>
// (server-everything, server-filesystem, server-memory: each pinned in package.json),
// failing the test with what to run when it is not installed.
func ReferenceEntry(t testing.TB, pkg string) string {
	t.Helper()
	p := filepath.Join(Root(t), "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed (%v): run `make test`, or `npm ci` in the repository root", pkg, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node not found on PATH: install Node.js (make test does, as root)")
	}
	return p
}

// StdioCommand returns the command and arguments that start the server over stdio.
func StdioCommand(t testing.TB) (string, []string) {
	return "node", []string{Entry(t), "stdio"}
}

// HTTP is a server-everything process serving SSE or streamable HTTP on loopback.
type HTTP struct {
	// URL is the endpoint: http://127.0.0.1:<port>/sse or /mcp.
	URL  string
	Port int
	cmd  *exec.Cmd
	mode string
	t    testing.TB
	mu   sync.Mutex
}

// StartHTTP starts the server in mode "sse" or "streamableHttp" on a free loopback port
// and waits until it accepts connections. It is stopped when the test ends.
func StartHTTP(t testing.TB, mode string) *HTTP {
	t.Helper()
	h := &HTTP{mode: mode, t: t, Port: freePort(t)}
	path := "/mcp"
	if mode == "sse" {
		path = "/sse"
	}
	h.URL = fmt.Sprintf("http://127.0.0.1:%d%s", h.Port, path)
	h.start()
	t.Cleanup(h.Stop)
	return h
}

func (h *HTTP) start() {
	h.t.Helper()
	cmd := exec.Command("node", "--require", filepath.Join(Root(h.t), "scripts", "bind-localhost.cjs"), Entry(h.t), h.mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(h.Port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start server-everything %s: %v", h.mode, err)
	}
	go func() { // drain, so the server never blocks on a full pipe
		s := bufio.NewScanner(out)
		for s.Scan() {
		}
	}()
	h.mu.Lock()
	h.cmd = cmd
	h.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", h.Port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.Stop()
	h.t.Fatalf("server-everything %s did not listen on port %d within 20s", h.mode, h.Port)
}

// Stop kills the server (the outage of a fault test).
func (h *HTTP) Stop() {
	h.mu.Lock()
	cmd := h.cmd
	h.cmd = nil
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

// Restart starts the server again on the same port.
func (h *HTTP) Restart() { h.start() }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
