package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The test binary started with TOOLWARDEN_HOSTILE set is a hostile stdio MCP server
// (hostileServe) rather than the tests: it says on standard error what it received.
const (
	envHostile   = "TOOLWARDEN_HOSTILE"
	envHostileID = "TOOLWARDEN_HOSTILE_ID"

	hostileElicitDone   = "elicit-done"   // sends notifications/elicitation/complete without params once initialized
	hostileCompleteLate = "complete-late" // sends completion/complete once initialized
	hostileCompleteInit = "complete-init" // sends completion/complete instead of answering initialize
	hostileTwice        = "twice"         // lists echo once, then (after its first call) twice with different definitions
	hostileStallLarge   = "stall-large"   // answers a call with the first 2 MiB of a result and then sends nothing more
	hostileLinger       = "linger"        // ignores SIGTERM and stays 30 s after its standard input closes
)

const hostileComplete = `{"jsonrpc":"2.0","id":"x","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a"},"argument":{"name":"a","value":"b"}}}`

func init() {
	if mode := os.Getenv(envHostile); mode != "" {
		if mode == hostileLinger {
			signal.Ignore(syscall.SIGTERM)
		}
		hostileServe(mode, os.Stdin, os.Stdout, os.Stderr)
		if mode == hostileLinger {
			time.Sleep(30 * time.Second)
		}
		os.Exit(0)
	}
}

// hostileServe answers initialize, tools/list (one tool, echo), tools/call and ping,
// and misbehaves as mode says. It never answers a request it does not know (such as
// the client's own completion/complete).
func hostileServe(mode string, in io.Reader, out, log io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	called := false  // a tools/call was answered (hostileTwice)
	stalled := false // a large answer was started and is never finished (hostileStallLarge)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil {
			continue
		}
		switch {
		case stalled: // mid-message: nothing more is sent, whatever comes
		case msg.Method == "" && msg.ID != nil: // a reply to one of ours
			fmt.Fprintf(log, "reply %s\n", sc.Bytes())
		case msg.Method == "server/discover": // not a 2026-07-28 server: the client initializes
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
		case msg.Method == "initialize":
			if mode == hostileCompleteInit {
				send("%s", hostileComplete)
				continue
			}
			send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}}`, msg.ID)
		case msg.Method == "notifications/initialized":
			switch mode {
			case hostileElicitDone:
				send(`{"jsonrpc":"2.0","method":"notifications/elicitation/complete"}`)
				send(`{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":null}`)
				// Answered once the client handled the notifications before it.
				send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
			case hostileCompleteLate:
				send("%s", hostileComplete)
			}
		case msg.ID == nil: // another notification
		case msg.Method == "tools/list" && mode == hostileTwice && called:
			send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},`+
				`{"name":"echo","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}]}}`, msg.ID)
		case msg.Method == "tools/list":
			send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`, msg.ID)
		case msg.Method == "tools/call" && mode == hostileStallLarge:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s`, msg.ID, strings.Repeat("x", 2<<20))
			stalled = true
		case msg.Method == "tools/call":
			send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, msg.ID)
			if mode == hostileTwice && !called {
				called = true
				send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			}
		case msg.Method == "ping":
			send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, msg.ID)
		default:
			fmt.Fprintf(log, "request %s\n", msg.Method)
		}
	}
}

// hostileConn is the connection settings of a hostile stdio server; kv is in its
// environment (processesWith finds it).
func hostileConn(t *testing.T, mode string) (registry.Spec, string) {
	t.Helper()
	cmd, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	return registry.Spec{Name: "hostile", Type: registry.TypeStdio, Command: cmd, Enabled: true,
		Env: map[string]string{envHostile: mode, envHostileID: id}}, envHostileID + "=" + id
}

// killHostile kills the hostile server (so a hung close can end) and fails the test.
func killHostile(t *testing.T, kv, msg string) {
	t.Helper()
	for pid := range processesWith(t, kv) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Fatal(msg)
}

// waitStderr waits until a line of server id's standard error contains want.
func waitStderr(t *testing.T, e *env, id, want string) string {
	t.Helper()
	var line string
	testkit.WaitFor(t, 30*time.Second, func() bool {
		i := slices.IndexFunc(e.mgr.Snapshot(id).Stderr, func(l string) bool { return strings.Contains(l, want) })
		if i >= 0 {
			line = e.mgr.Snapshot(id).Stderr[i]
		}
		return i >= 0
	}, "the server never logged "+want)
	return line
}

// A server's notifications/elicitation/complete without params (or with null params)
// is dropped: Toolwarden keeps running and the session keeps working.
func TestElicitationCompleteWithoutParams(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, _ := hostileConn(t, hostileElicitDone)
	sv := e.create(t, spec)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	waitStderr(t, e, sv.ID, `"id":"after"`)
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo"})
	if err != nil || res.IsError {
		t.Fatalf("call after the notifications: %v %+v", err, res)
	}
}

// A server's completion/complete request is refused (method not found), and does not
// keep the session from closing: disabling the server returns.
func TestServerCompletionRequestRefused(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, kv := hostileConn(t, hostileCompleteLate)
	sv := e.create(t, spec)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	// Whichever comes: the client's answer (fixed) or its own completion/complete.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return slices.ContainsFunc(e.mgr.Snapshot(sv.ID).Stderr, func(l string) bool {
			return strings.Contains(l, `"id":"x"`) || strings.Contains(l, "request completion/complete")
		})
	}, "the client never reacted to completion/complete")
	if _, err := e.reg.SetEnabled(context.Background(), audit.System, sv.ID, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { e.mgr.Refresh(context.Background(), sv.ID); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		killHostile(t, kv, "disabling the server did not return: its session never closed")
	}
	reply := waitStderr(t, e, sv.ID, `"id":"x"`)
	if !strings.Contains(reply, `"code":-32601`) {
		t.Fatalf("reply to completion/complete: %s, want method not found", reply)
	}
}

// A server that sends completion/complete instead of answering initialize fails the
// connection test once its timeout is up.
func TestCompletionRequestInsteadOfInitialize(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, kv := hostileConn(t, hostileCompleteInit)
	cfg := registry.Connection{Name: spec.Name, Type: spec.Type, Command: spec.Command, Env: spec.Env, Timeout: time.Second}
	done := make(chan struct{})
	var res mcpclient.TestResult
	go func() {
		res = e.mgr.Test(context.Background(), cfg)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		killHostile(t, kv, "the connection test never returned")
	}
	if res.OK || res.TimedOutAfter != time.Second {
		t.Fatalf("connection test: ok %v, error %q; want it timed out after 1s", res.OK, res.Error)
	}
}

// A session that lists a tool more than once with different definitions refuses a call
// pinned to the one stored before, saying so (which one would run is the server's
// choice), rather than that the session does not list the tool.
func TestCallOfToolListedWithDifferentDefinitions(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, _ := hostileConn(t, hostileTwice)
	sv := e.create(t, spec)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	hash := registry.DefinitionHash(registry.ToolDef{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := e.mgr.CallToolServed(ctx, sv.ID, "", "echo", hash, nil, nil, nil); err != nil || res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	var de *mcpclient.DefinitionError
	testkit.WaitFor(t, 20*time.Second, func() bool {
		_, err := e.mgr.CallToolServed(ctx, sv.ID, "", "echo", hash, nil, nil, nil)
		return errors.As(err, &de)
	}, "a call was never refused after the server listed echo twice")
	if !de.Listed || !de.Differing || !strings.Contains(de.Error(), "lists the tool more than once, with different definitions") {
		t.Fatalf("refusal: %+v %q, want it to say the session lists echo twice with different definitions", de, de.Error())
	}
}

// A connection test answers once it knows, and stops the server after: a server that
// takes its time to stop (it ignores SIGTERM and lingers after its input closes) is
// still running when the result is given, and stopped (killed) after it.
func TestConnectionTestAnswersBeforeTheServerStops(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	spec, kv := hostileConn(t, hostileLinger)
	cfg := registry.Connection{Name: spec.Name, Type: spec.Type, Command: spec.Command, Env: spec.Env, Timeout: 10 * time.Second}
	res := e.mgr.Test(context.Background(), cfg)
	if !res.OK || res.ToolCount != 1 {
		t.Fatalf("connection test: ok %v, %d tools, error %q", res.OK, res.ToolCount, res.Error)
	}
	if len(processesWith(t, kv)) == 0 {
		t.Fatal("the server had stopped before the result was given: the test waited for its stop")
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return len(processesWith(t, kv)) == 0 },
		"the server of a connection test was never stopped after its result")
}
