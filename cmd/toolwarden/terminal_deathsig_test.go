package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// An unconfined terminal's processes end with a SIGKILLed serve (PDEATHSIG, as stdio
// servers have it): a background command would otherwise run on past its timeout,
// whose timer died with serve, until the next start's clean-up; and a PTY session's
// shell with it.
func TestTerminalProcessesEndWithSIGKILLedServe(t *testing.T) {
	dir := dbtest.TempDir(t)
	p := startServe(t, dir, "--confine", "off")
	token := adminToken(t, dir)
	enableTool(t, p, token, "builtin__terminal_operations")
	if code, body := p.request(t, token, http.MethodPatch, "/api/v1/tools/"+toolID(t, p, token, "builtin__terminal_operations"),
		map[string]any{"risk": "low", "reason": "the test's own terminal"}); code != http.StatusOK {
		t.Fatalf("make terminal_operations low: %d %s", code, body)
	}
	pids := t.TempDir()
	// bash -c execs the last command itself: the pid written is the sleep's.
	cmdFile, shellFile := filepath.Join(pids, "cmd"), filepath.Join(pids, "shell")
	if _, _, isErr := termCall(t, p, token, "conv-deathsig", map[string]any{"operation": "run_command", "background": true,
		"command": "echo $$ > " + cmdFile + "; exec sleep 307"}); isErr {
		t.Fatal("run_command in the background was refused")
	}
	_, st, isErr := termCall(t, p, token, "conv-deathsig", map[string]any{"operation": "create_session"})
	if isErr {
		t.Fatalf("create_session: %v", st)
	}
	id, _ := st["sessionId"].(string)
	if _, _, isErr := termCall(t, p, token, "conv-deathsig", map[string]any{"operation": "send_input", "sessionId": id,
		"input": "echo $$ > " + shellFile + "\n"}); isErr {
		t.Fatal("send_input was refused")
	}
	read := func(f string) int {
		b, _ := os.ReadFile(f)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	var cmdPID, shellPID int
	testkit.WaitFor(t, 30*time.Second, func() bool {
		cmdPID, shellPID = read(cmdFile), read(shellFile)
		return cmdPID > 0 && shellPID > 0 && alive(cmdPID) && alive(shellPID)
	}, "the command and the shell never wrote their pids")
	p.kill(t, syscall.SIGKILL)
	testkit.WaitFor(t, 10*time.Second, func() bool { return !alive(cmdPID) && !alive(shellPID) },
		"the background command or the PTY's shell outlived the SIGKILLed serve")
}
