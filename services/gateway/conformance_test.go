package gateway_test

// Conformance with MCP clients that nobody here wrote: the TypeScript SDK's client
// (@modelcontextprotocol/sdk) driven by testdata/ts-client.mjs, and the MCP Inspector's
// CLI (@modelcontextprotocol/inspector-cli). Both are pinned in package.json and
// installed by `make test` (scripts/setup.sh runs npm ci when one is missing or at
// another version); a test fails, never skips, when node or a package is missing.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/services/tools"
)

// The name and version ts-client.mjs gives as its clientInfo.
const tsClientName = "toolwarden-conformance-ts 1.0.0"

// npmPackage returns the directory of the npm package pkg in the repository's
// node_modules, failing the test with what to run when node or the package is missing.
func npmPackage(t *testing.T, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node not found on PATH: install Node.js (make test does, as root)")
	}
	dir := filepath.Join(everything.Root(t), "node_modules", filepath.FromSlash(pkg))
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		t.Fatalf("%s is not installed (%v): run `make test`, or `npm ci` in the repository root", pkg, err)
	}
	return dir
}

// tsEvent is one line that ts-client.mjs prints.
type tsEvent struct {
	Event string `json:"event"`
	// initialized
	ProtocolVersion string             `json:"protocolVersion"`
	ServerInfo      mcp.Implementation `json:"serverInfo"`
	Capabilities    struct {
		Tools *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"tools"`
	} `json:"capabilities"`
	// tools
	Pages int         `json:"pages"`
	Tools []*mcp.Tool `json:"tools"`
	// listening, list_changed
	Names []string `json:"names"`
	// progress, result, error
	Tool   string              `json:"tool"`
	Result *mcp.CallToolResult `json:"result"`
	// error: where it happened (connect, call, listen), the class of the SDK's error,
	// its code (an HTTP status or a JSON-RPC error code) and its text
	Stage   string `json:"stage"`
	Name    string `json:"name"`
	Code    *int   `json:"code"`
	Message string `json:"message"`
	// waiting
	Label string `json:"label"`
	// listed, read, prompt
	Resources []*mcp.Resource         `json:"resources"`
	Templates []*mcp.ResourceTemplate `json:"templates"`
	Prompts   []*mcp.Prompt           `json:"prompts"`
	Contents  []struct {
		URI  string `json:"uri"`
		Text string `json:"text"`
	} `json:"contents"`
	Messages []struct {
		Role    string `json:"role"`
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"messages"`
	line string
}

// tsRun is a running ts-client.mjs.
type tsRun struct {
	events <-chan tsEvent
	stdin  io.WriteCloser
	stderr *webtest.SyncBuffer
	exited chan struct{}
	err    error // of the process, once exited is closed
}

// runTS starts ts-client.mjs against endpoint with token ("" for none) over transport
// (http or sse) in scenario, with arg (JSON-encoded, nil for none): the steps of
// calls, the tool that listen waits for.
func runTS(t *testing.T, endpoint, token, transport, scenario string, arg any) *tsRun {
	t.Helper()
	npmPackage(t, "@modelcontextprotocol/sdk")
	args := []string{filepath.Join("testdata", "ts-client.mjs"), endpoint, token, transport, scenario}
	if arg != nil {
		args = append(args, string(mustJSON(t, arg)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r := &tsRun{stderr: &webtest.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	events := make(chan tsEvent, 100)
	r.events = events
	go func() {
		defer close(events)
		s := bufio.NewScanner(stdout)
		s.Buffer(nil, 4<<20)
		for s.Scan() {
			var ev tsEvent
			if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
				ev = tsEvent{Event: "unparsable", Message: err.Error()}
			}
			ev.line = s.Text()
			events <- ev
		}
	}()
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.exited
	})
	return r
}

// next returns the next event, failing the test unless it is of kind want (progress
// and tools events are passed over unless asked for).
func (r *tsRun) next(t *testing.T, want string) tsEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				<-r.exited
				t.Fatalf("ts-client.mjs ended (%v) before a %q event; stderr:\n%s", r.err, want, r.stderr)
			}
			if (ev.Event == "progress" || ev.Event == "tools") && ev.Event != want {
				continue
			}
			if ev.Event != want {
				t.Fatalf("ts-client.mjs: got %s, want a %q event; stderr:\n%s", ev.line, want, r.stderr)
			}
			return ev
		case <-timeout:
			t.Fatalf("ts-client.mjs: no %q event within 30s; stderr:\n%s", want, r.stderr)
		}
	}
}

// finish waits for the done event and a clean exit.
func (r *tsRun) finish(t *testing.T) {
	t.Helper()
	r.next(t, "done")
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("ts-client.mjs did not exit after done")
	}
	if r.err != nil {
		t.Fatalf("ts-client.mjs: %v; stderr:\n%s", r.err, r.stderr)
	}
}

// resume answers a waiting event.
func (r *tsRun) resume(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

type step struct {
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Wait      string         `json:"wait,omitempty"`
}

// resultText is the text content of the result event ev, failing unless it is one.
func resultText(t *testing.T, ev tsEvent) string {
	t.Helper()
	if ev.Result == nil {
		t.Fatalf("no result in %s", ev.line)
	}
	return text(ev.Result)
}

// wantHTTPError checks an error event for the HTTP status the SDK surfaced.
func wantHTTPError(t *testing.T, ev tsEvent, stage string, status int) {
	t.Helper()
	if ev.Stage != stage || ev.Code == nil || *ev.Code != status {
		t.Fatalf("got %s, want an error at %s with status %d", ev.line, stage, status)
	}
}

// The TypeScript SDK's client over streamable HTTP: the tool list page by page, LOW
// calls with their real results, argument errors as isError results naming the field,
// an unknown tool as a JSON-RPC error, 401 without a token or with a revoked one,
// list_changed after a tool is enabled, and the approval inside the call (confirmed:
// the real result; rejected: the reason). Then the legacy SSE transport, when served.
func TestTypeScriptSDKClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHoldEnv(t, &gateway.Options{PageSize: 2}) // mt: echo, write-note (HIGH); ut: echo (MEDIUM)
	srv := e.srv
	srv.App.Enable(t, "mt__add")
	// tina may not use mt__sleep, so enabling it (list_changed below) leaves her list as it is.
	no := false
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "mt__sleep"), "tina", &no); err != nil {
		t.Fatal(err)
	}
	endpoint := srv.URL + "/mcp"
	wantNames := []string{"mt__add", "mt__echo", "mt__write-note", "ut__echo", gateway.AwaitTool, gateway.PendingTool}

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		r := runTS(t, endpoint, e.token, "http", "list", nil)
		in := r.next(t, "initialized")
		if in.ServerInfo.Name != "toolwarden" || in.Capabilities.Tools == nil || !in.Capabilities.Tools.ListChanged ||
			in.ProtocolVersion != "2025-11-25" {
			t.Fatalf("initialize: %s", in.line)
		}
		ev := r.next(t, "tools")
		var got []string
		by := map[string]*mcp.Tool{}
		for _, tl := range ev.Tools {
			got = append(got, tl.Name)
			by[tl.Name] = tl
		}
		if !slices.Equal(got, wantNames) || ev.Pages != 3 {
			t.Fatalf("tools/list: %v in %d pages, want %v in 3 pages of 2", got, ev.Pages, wantNames)
		}
		echo := by["mt__echo"]
		if echo.Description != "Echoes back the message." || echo.Annotations == nil || !echo.Annotations.ReadOnlyHint ||
			echo.Annotations.Title != "Echo" || !strings.Contains(string(mustJSON(t, echo.InputSchema)), `"message"`) {
			t.Fatalf("mt__echo is not as stored: %s", mustJSON(t, echo))
		}
		if by["mt__add"].OutputSchema == nil {
			t.Fatal("mt__add lost its output schema")
		}
		r.finish(t)
	})

	t.Run("resources and prompts", func(t *testing.T) {
		t.Parallel()
		r := runTS(t, endpoint, e.token, "http", "resources", map[string]any{"read": "toolwarden://mt/test://readme",
			"prompt": "mt__greet", "args": map[string]string{"name": "ts"}})
		r.next(t, "initialized")
		ev := r.next(t, "listed")
		var uris, prompts []string
		for _, res := range ev.Resources {
			uris = append(uris, res.URI)
		}
		for _, p := range ev.Prompts {
			prompts = append(prompts, p.Name)
		}
		if !slices.Contains(uris, "toolwarden://mt/test://readme") || !slices.Contains(prompts, "mt__greet") ||
			len(ev.Templates) == 0 || !strings.HasPrefix(ev.Templates[0].URITemplate, "toolwarden://") {
			t.Fatalf("listed: %s", ev.line)
		}
		if ev := r.next(t, "read"); len(ev.Contents) != 1 || !strings.Contains(ev.Contents[0].Text, "Toolwarden MCP test server") ||
			ev.Contents[0].URI != "toolwarden://mt/test://readme" {
			t.Fatalf("read: %s", ev.line)
		}
		if ev := r.next(t, "prompt"); len(ev.Messages) == 0 || !strings.Contains(ev.Messages[0].Content.Text, "ts") {
			t.Fatalf("prompt: %s", ev.line)
		}
		r.finish(t)
	})

	t.Run("calls", func(t *testing.T) {
		t.Parallel()
		r := runTS(t, endpoint, e.token, "http", "calls", []step{
			{Name: "mt__echo", Arguments: map[string]any{"message": "hi from ts"}},
			{Name: "mt__add", Arguments: map[string]any{"a": 2, "b": 3}},
			{Name: "mt__echo", Arguments: map[string]any{"message": 5}},
			{Name: "mt__echo", Arguments: map[string]any{}},
			{Name: "mt__nope"},
			{Name: "mt__fail"}, // not enabled
		})
		r.next(t, "initialized")
		if ev := r.next(t, "result"); ev.Result.IsError || resultText(t, ev) != "Echo: hi from ts" {
			t.Fatalf("echo: %s", ev.line)
		}
		// The SDK checked structuredContent against mt__add's output schema.
		if ev := r.next(t, "result"); ev.Result.IsError || !strings.Contains(string(mustJSON(t, ev.Result.StructuredContent)), `"sum":5`) {
			t.Fatalf("add: %s", ev.line)
		}
		for _, what := range []string{"a wrong type", "a missing argument"} {
			if ev := r.next(t, "result"); !ev.Result.IsError || !strings.Contains(resultText(t, ev), "- message:") {
				t.Fatalf("%s: got %s, want an isError result naming message", what, ev.line)
			}
		}
		for _, name := range []string{"mt__nope", "mt__fail"} {
			ev := r.next(t, "error")
			if ev.Stage != "call" || ev.Name != "McpError" || ev.Code == nil || *ev.Code != -32602 || !strings.Contains(ev.Message, name) {
				t.Fatalf("%s: got %s, want a JSON-RPC error -32602 naming it", name, ev.line)
			}
		}
		r.finish(t)
		// Recorded as an mcp call of tina's, naming the TypeScript client.
		if err := srv.Router.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND actor_kind = 'token'
			AND actor_id = $1 AND payload->>'source' = 'mcp' AND payload->>'client' = $2 AND payload::text LIKE '%hi from ts%'`,
			e.tina.ID, tsClientName); n != 1 {
			t.Fatalf("audit rows of the echo call: %d, want 1", n)
		}
	})

	t.Run("unauthorized", func(t *testing.T) {
		t.Parallel()
		for _, token := range []string{"", "tw_nonsense"} {
			r := runTS(t, endpoint, token, "http", "list", nil)
			wantHTTPError(t, r.next(t, "error"), "connect", http.StatusUnauthorized)
			r.finish(t)
		}
	})

	t.Run("revoked", func(t *testing.T) {
		t.Parallel()
		tok, info, err := srv.Auth.CreateToken(ctx, audit.System, e.tina.ID, auth.NewToken{Name: "ts agent"})
		if err != nil {
			t.Fatal(err)
		}
		echo := step{Name: "mt__echo", Arguments: map[string]any{"message": "before"}}
		r := runTS(t, endpoint, tok, "http", "calls", []step{echo, {Wait: "revoke"}, echo})
		r.next(t, "initialized")
		if ev := r.next(t, "result"); ev.Result.IsError {
			t.Fatalf("a call before revocation: %s", ev.line)
		}
		r.next(t, "waiting")
		if _, err := srv.Auth.RevokeToken(ctx, audit.System, info.ID, e.tina.ID); err != nil {
			t.Fatal(err)
		}
		r.resume(t)
		wantHTTPError(t, r.next(t, "error"), "call", http.StatusUnauthorized)
		r.finish(t)
	})

	t.Run("list_changed", func(t *testing.T) {
		t.Parallel()
		r := runTS(t, endpoint, srv.Token(t, "admin"), "http", "listen", "mt__sleep")
		r.next(t, "initialized")
		if ev := r.next(t, "listening"); slices.Contains(ev.Names, "mt__sleep") {
			t.Fatalf("mt__sleep listed before it was enabled: %v", ev.Names)
		}
		srv.App.Enable(t, "mt__sleep")
		// The other cases' changes (tokens made and revoked) may notify first.
		for !slices.Contains(r.next(t, "list_changed").Names, "mt__sleep") {
		}
		r.finish(t)
	})

	t.Run("approved", func(t *testing.T) {
		t.Parallel()
		r := runTS(t, endpoint, e.token, "http", "calls", []step{{Name: "ut__echo", Arguments: map[string]any{"message": "held for ts"}}})
		r.next(t, "initialized")
		if ev := r.next(t, "progress"); !strings.Contains(ev.Message, "Waiting for a person to approve") {
			t.Fatalf("progress while held: %s", ev.line)
		}
		ex := e.pending(t, "ut__echo")
		if ex.Client != tsClientName || ex.Risk != "medium" {
			t.Fatalf("the execution: client %q risk %q", ex.Client, ex.Risk)
		}
		select {
		case ev := <-r.events:
			if ev.Event != "progress" {
				t.Fatalf("before anyone decided: %s", ev.line)
			}
		default:
		}
		if _, err := srv.Executions.Confirm(ctx, e.admin, ex.ID, "", ""); err != nil {
			t.Fatal(err)
		}
		if ev := r.next(t, "result"); ev.Result.IsError || resultText(t, ev) != "Echo: held for ts" {
			t.Fatalf("the approved call: got %s, want the real result", ev.line)
		}
		r.finish(t)
	})

	t.Run("rejected", func(t *testing.T) {
		t.Parallel()
		r := runTS(t, endpoint, e.token, "http", "calls", []step{{Name: "mt__write-note", Arguments: map[string]any{"text": "friday"}}})
		r.next(t, "initialized")
		ex := e.pending(t, "mt__write-note")
		if _, err := srv.Executions.Reject(ctx, e.admin, ex.ID, "not on a friday"); err != nil {
			t.Fatal(err)
		}
		if ev := r.next(t, "result"); !ev.Result.IsError || resultText(t, ev) != "Rejected by admin: not on a friday" {
			t.Fatalf("the rejected call: %s", ev.line)
		}
		r.finish(t)
	})

	t.Run("sse", func(t *testing.T) {
		t.Parallel()
		sse := srv.URL + "/sse"
		r := runTS(t, sse, e.token, "sse", "calls", []step{{Name: "mt__echo", Arguments: map[string]any{"message": "hi over sse"}}})
		r.next(t, "initialized")
		var got []string
		for _, tl := range r.next(t, "tools").Tools {
			got = append(got, tl.Name)
		}
		if !slices.Equal(got, wantNames) {
			t.Fatalf("tools over SSE: %v, want %v", got, wantNames)
		}
		if ev := r.next(t, "result"); ev.Result.IsError || resultText(t, ev) != "Echo: hi over sse" {
			t.Fatalf("echo over SSE: %s", ev.line)
		}
		r.finish(t)
		r = runTS(t, sse, "", "sse", "list", nil)
		wantHTTPError(t, r.next(t, "error"), "connect", http.StatusUnauthorized)
		r.finish(t)
	})
}

// A held call of a tool that declares an output schema, still undecided when its hold
// ends: the TypeScript SDK checks any structured content against that schema, an error
// result's too, and would throw; the pending result carries the execution in _meta and
// its text instead, and the SDK hands it to the agent.
func TestTypeScriptSDKPendingWithOutputSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHoldEnv(t, &gateway.Options{Hold: time.Second})
	srv := e.srv
	add := srv.App.Enable(t, "mt__add")
	medium := "medium"
	if _, err := srv.Tools.Update(ctx, audit.System, add.ID, tools.Patch{Risk: &medium, Reason: "held"}); err != nil {
		t.Fatal(err)
	}
	r := runTS(t, srv.URL+"/mcp", e.token, "http", "calls", []step{{Name: "mt__add", Arguments: map[string]any{"a": 2, "b": 3}}})
	r.next(t, "initialized")
	ev := r.next(t, "result")
	ex := e.pending(t, "mt__add")
	var p gateway.Pending
	raw, _ := json.Marshal(ev.Result.Meta[gateway.PendingMeta])
	if !ev.Result.IsError || ev.Result.StructuredContent != nil || json.Unmarshal(raw, &p) != nil ||
		p.ExecutionID != ex.ID || p.Status != "awaiting_approval" || !strings.Contains(resultText(t, ev), ex.ID) {
		t.Fatalf("the pending result: %s", ev.line)
	}
	r.finish(t)
}

// inspector runs the MCP Inspector's CLI against endpoint with args, with the token
// ("" for none), and returns its stdout, stderr and error.
func inspector(t *testing.T, endpoint, token string, args ...string) (string, string, error) {
	t.Helper()
	dir := npmPackage(t, "@modelcontextprotocol/inspector-cli")
	argv := []string{filepath.Join(dir, "build", "cli.js"), "--cli", endpoint, "--transport", "http"}
	if token != "" {
		argv = append(argv, "--header", "Authorization: Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append(argv, args...)...)
	// The CLI finds its own package.json relative to the working directory.
	cmd.Dir = filepath.Join(dir, "build")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // it runs a second node
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// inspect runs the inspector and decodes its JSON output into out.
func inspect(t *testing.T, endpoint, token string, out any, args ...string) {
	t.Helper()
	stdout, stderr, err := inspector(t, endpoint, token, args...)
	if err != nil {
		t.Fatalf("inspector %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("inspector %v printed no JSON (%v):\n%s", args, err, stdout)
	}
}

// The MCP Inspector's CLI lists the tools and calls a LOW one through /mcp, and gets
// nothing without a token. resources/list and prompts/list run once the gateway
// declares those capabilities.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo", "add")
	token := srv.Token(t, "admin")
	endpoint := srv.URL + "/mcp"

	t.Run("tools/list", func(t *testing.T) {
		t.Parallel()
		var res mcp.ListToolsResult
		inspect(t, endpoint, token, &res, "--method", "tools/list")
		var got []string
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		if want := []string{"mt__add", "mt__echo", gateway.AwaitTool, gateway.PendingTool}; !slices.Equal(got, want) || res.NextCursor != "" {
			t.Fatalf("tools/list: %v (next cursor %q), want %v", got, res.NextCursor, want)
		}
	})

	t.Run("tools/call", func(t *testing.T) {
		t.Parallel()
		var res mcp.CallToolResult
		inspect(t, endpoint, token, &res, "--method", "tools/call", "--tool-name", "mt__echo", "--tool-arg", "message=hi from the inspector")
		if res.IsError || text(&res) != "Echo: hi from the inspector" {
			t.Fatalf("tools/call: %s", mustJSON(t, res))
		}
		// The CLI converts arguments by the listed schema: numbers for add.
		inspect(t, endpoint, token, &res, "--method", "tools/call", "--tool-name", "mt__add", "--tool-arg", "a=2", "b=3")
		if res.IsError || !strings.Contains(string(mustJSON(t, res.StructuredContent)), `"sum":5`) {
			t.Fatalf("tools/call add: %s", mustJSON(t, res))
		}
	})

	t.Run("revoked token", func(t *testing.T) {
		t.Parallel()
		u := srv.CreateUser(t, "rita", auth.RoleToolUser, password)
		tok, info, err := srv.Auth.CreateToken(context.Background(), audit.System, u.ID, auth.NewToken{Name: "inspector"})
		if err != nil {
			t.Fatal(err)
		}
		var res mcp.ListToolsResult
		inspect(t, endpoint, tok, &res, "--method", "tools/list")
		if _, err := srv.Auth.RevokeToken(context.Background(), audit.System, info.ID, u.ID); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := inspector(t, endpoint, tok, "--method", "tools/list")
		if err == nil || !strings.Contains(stderr, `"code":"unauthenticated"`) || strings.Contains(stdout, "mt__echo") {
			t.Fatalf("with a revoked token: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
	})

	t.Run("resources/read and prompts/get", func(t *testing.T) {
		t.Parallel()
		var read mcp.ReadResourceResult
		inspect(t, endpoint, token, &read, "--method", "resources/read", "--uri", "toolwarden://mt/test://readme")
		if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, "Toolwarden MCP test server") {
			t.Fatalf("resources/read: %s", mustJSON(t, read))
		}
		var got map[string]json.RawMessage
		inspect(t, endpoint, token, &got, "--method", "prompts/get", "--prompt-name", "mt__greet", "--prompt-args", "name=inspector")
		if !strings.Contains(string(got["messages"]), "inspector") {
			t.Fatalf("prompts/get: %s", fmt.Sprint(got))
		}
	})

	t.Run("no token", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, err := inspector(t, endpoint, "", "--method", "tools/list")
		var exit *exec.ExitError
		// The CLI prints the 401's body, not its status.
		if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(stderr, "Failed to connect to MCP server") ||
			!strings.Contains(stderr, `"code":"unauthenticated"`) || strings.Contains(stdout, "mt__echo") {
			t.Fatalf("without a token: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
	})

	// Resources and prompts of upstream servers are passed through. The upstream
	// (internal/mcptest) has a resource "readme" and a prompt "greet".
	caps := mustConnect(t, srv, token, eras[0]).InitializeResult().Capabilities
	for _, c := range []struct {
		method, want string
		declared     bool
	}{
		{"resources/list", "readme", caps.Resources != nil},
		{"prompts/list", "greet", caps.Prompts != nil},
	} {
		t.Run(c.method, func(t *testing.T) {
			t.Parallel()
			if !c.declared {
				t.Fatalf("the gateway does not declare %s", strings.Split(c.method, "/")[0])
			}
			var res map[string]json.RawMessage
			inspect(t, endpoint, token, &res, "--method", c.method)
			key := strings.Split(c.method, "/")[0]
			if list, ok := res[key]; !ok || !strings.Contains(string(list), c.want) {
				t.Fatalf("%s: %s lacks the upstream's %q", c.method, fmt.Sprint(res), c.want)
			}
		})
	}
}
