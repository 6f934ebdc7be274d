package mcptest_test

import (
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
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	code := m.Run()
	// Every test closes its sessions, and closing a stdio session reaps the
	// child; anything still parented to us is a leak.
	if leaks := children(); code == 0 && len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "leftover child processes: %v\n", leaks)
		code = 1
	}
	os.Exit(code)
}

// children lists the processes (zombies included) whose parent is this one.
func children() []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the process just went away
		}
		// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 && fields[1] == me {
			out = append(out, s[:i+1]+" "+fields[0])
		}
	}
	return out
}

// transports are the ways a client can reach the test server. stdio speaks
// the 2026-07-28 protocol by default (no transport restriction), so it is
// also run pinned to the last legacy version.
var transports = []string{"stdio", "stdio-legacy", "sse", "streamable"}

// upstream is a running test server and the means to drive it, whichever
// transport it uses.
type upstream struct {
	transport  mcp.Transport
	version    string // ClientSessionOptions.ProtocolVersion
	setTool    func(mcptest.ToolSpec) error
	removeTool func(string) error

	http        *mcptest.HTTPServer // sse and streamable
	cmd         *exec.Cmd           // stdio
	stderr      *syncBuffer         // stdio
	controlFile string              // stdio
	control     *mcptest.Control    // stdio, set by connect
}

func start(t *testing.T, kind string, opts *mcptest.Options) *upstream {
	t.Helper()
	switch kind {
	case "sse", "streamable":
		h := mcptest.StartHTTP(t, opts)
		u := &upstream{
			http: h,
			setTool: func(s mcptest.ToolSpec) error {
				h.Server().SetTool(s)
				return nil
			},
			removeTool: func(name string) error {
				h.Server().RemoveTool(name)
				return nil
			},
		}
		switch {
		case kind == "sse":
			u.transport = &mcp.SSEClientTransport{Endpoint: h.SSEURL()}
		case opts != nil && opts.Hang:
			// After Connect's deadline the SDK still POSTs a best-effort
			// notifications/cancelled with its own 5 s timeout, and the
			// failed Connect waits for it; against a hung server only an
			// HTTP client timeout cuts that short.
			u.transport = &mcp.StreamableClientTransport{Endpoint: h.URL(), HTTPClient: &http.Client{Timeout: time.Second}}
		default:
			u.transport = &mcp.StreamableClientTransport{Endpoint: h.URL()}
		}
		return u
	case "stdio", "stdio-legacy":
		file := filepath.Join(t.TempDir(), "control")
		command, args, env := mcptest.StdioCommand(opts, file)
		cmd := exec.Command(command, args...)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		u := &upstream{
			cmd:         cmd,
			stderr:      stderr,
			controlFile: file,
			transport:   &mcp.CommandTransport{Command: cmd},
		}
		u.setTool = func(s mcptest.ToolSpec) error { return u.control.SetTool(s) }
		u.removeTool = func(name string) error { return u.control.RemoveTool(name) }
		if kind == "stdio-legacy" {
			u.version = "2025-11-25"
		}
		return u
	}
	t.Fatalf("unknown transport %q", kind)
	return nil
}

// session is a connected client with a channel that receives a value for each
// notifications/tools/list_changed.
type session struct {
	*mcp.ClientSession
	changed chan struct{}
}

// connect connects a client and closes it when the test ends. For stdio it
// also waits for the child's control address.
func connect(t *testing.T, u *upstream) *session {
	t.Helper()
	// The SSE client transport ties its GET stream to Connect's context (the
	// streamable one detaches), so that context must live as long as the
	// session; a watchdog, not a deadline, bounds the handshake.
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	watchdog := time.AfterFunc(10*time.Second, cancel)
	s, err := connectCtx(ctx, t, u)
	watchdog.Stop()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if u.controlFile != "" && u.control == nil {
		u.control = mcptest.WaitControl(t, u.controlFile)
	}
	return s
}

func connectCtx(ctx context.Context, t *testing.T, u *upstream) (*session, error) {
	t.Helper()
	s := &session{changed: make(chan struct{}, 64)}
	acked := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "1.0.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	})
	// On the 2026-07-28 protocol list_changed only reaches clients with an
	// acknowledged subscriptions/listen, and Connect returns before the
	// acknowledgement; the SDK has no hook for it other than middleware.
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				select {
				case acked <- struct{}{}:
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(ctx, u.transport, &mcp.ClientSessionOptions{ProtocolVersion: u.version})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.ClientSession = cs
	if cs.InitializeResult().ProtocolVersion >= "2026-07-28" {
		select {
		case <-acked:
		case <-ctx.Done():
			return nil, fmt.Errorf("no subscriptions/acknowledged: %w", ctx.Err())
		}
	}
	return s, nil
}

// waitChanged waits for one list_changed notification.
func (s *session) waitChanged(t *testing.T) {
	t.Helper()
	select {
	case <-s.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 10s")
	}
}

func listNames(t *testing.T, s *session) []string {
	t.Helper()
	var names []string
	for tool, err := range s.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func callText(t *testing.T, s *session, name string, args any) (string, *mcp.CallToolResult) {
	t.Helper()
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res
}

func TestTransports(t *testing.T) {
	t.Parallel()
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			u := start(t, kind, &mcptest.Options{Name: "upstream-" + kind, Instructions: "be nice", Generated: 3})
			s := connect(t, u)
			init := s.InitializeResult()
			t.Logf("negotiated protocol %s", init.ProtocolVersion)
			if init.ServerInfo == nil || init.ServerInfo.Name != "upstream-"+kind {
				t.Errorf("got serverInfo %+v, want name %q", init.ServerInfo, "upstream-"+kind)
			}
			if init.Instructions != "be nice" {
				t.Errorf("got instructions %q, want %q", init.Instructions, "be nice")
			}

			res, err := s.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatalf("list tools: %v", err)
			}
			want := []string{"add", "echo", "fail", "gen-00001", "gen-00002", "gen-00003", "sleep", "write-note"}
			var got []string
			tools := map[string]*mcp.Tool{}
			for _, tool := range res.Tools {
				got = append(got, tool.Name)
				tools[tool.Name] = tool
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got tools %v, want %v", got, want)
			}
			if a := tools["echo"].Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.Title != "Echo" {
				t.Errorf("got echo annotations %+v, want readOnly, idempotent, title Echo", a)
			}
			if a := tools["write-note"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
				t.Errorf("got write-note annotations %+v, want destructive, not read-only", a)
			}
			if tools["add"].OutputSchema == nil {
				t.Error("got no output schema for add")
			}
			schema, _ := json.Marshal(tools["gen-00002"].InputSchema)
			if !strings.Contains(string(schema), `"required":["q00002"]`) {
				t.Errorf("got gen-00002 schema %s, want required q00002", schema)
			}
			schema, _ = json.Marshal(tools["echo"].InputSchema)
			if !strings.Contains(string(schema), `"required":["message"]`) {
				t.Errorf("got echo schema %s, want required message", schema)
			}

			if text, _ := callText(t, s, "echo", map[string]any{"message": "hi"}); text != "Echo: hi" {
				t.Errorf("got echo %q, want %q", text, "Echo: hi")
			}
			text, r := callText(t, s, "add", map[string]any{"a": 2, "b": 3.5})
			if sc, _ := json.Marshal(r.StructuredContent); string(sc) != `{"sum":5.5}` {
				t.Errorf("got add structuredContent %s, want {\"sum\":5.5}", sc)
			}
			if text != `{"sum":5.5}` {
				t.Errorf("got add text %q, want the JSON of the structured content", text)
			}
			if text, r := callText(t, s, "fail", map[string]any{"message": "boom"}); !r.IsError || text != "boom" {
				t.Errorf("got fail isError=%v %q, want isError=true %q", r.IsError, text, "boom")
			}
			if text, _ := callText(t, s, "sleep", map[string]any{"ms": 1}); text != "slept" {
				t.Errorf("got sleep %q, want slept", text)
			}
			if text, r := callText(t, s, "write-note", map[string]any{"text": "x"}); r.IsError || text != "ok" {
				t.Errorf("got write-note isError=%v %q, want ok", r.IsError, text)
			}
			if text, _ := callText(t, s, "gen-00002", map[string]any{"q00002": "x"}); !strings.HasPrefix(text, "gen-00002: ") {
				t.Errorf("got gen-00002 %q, want it to echo its arguments", text)
			}
			if _, r := callText(t, s, "gen-00002", map[string]any{}); !r.IsError {
				t.Error("got success for gen-00002 without its required argument, want isError")
			}
			if _, r := callText(t, s, "echo", map[string]any{}); !r.IsError {
				t.Error("got success for echo without message, want isError")
			}

			resources, err := s.ListResources(t.Context(), nil)
			if err != nil || len(resources.Resources) != 1 || resources.Resources[0].URI != "test://readme" {
				t.Fatalf("got resources %v, %v; want test://readme", resources, err)
			}
			rr, err := s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://readme"})
			if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "test server") {
				t.Errorf("got read resource %v, %v", rr, err)
			}
			templates, err := s.ListResourceTemplates(t.Context(), nil)
			if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "test://notes/{name}" {
				t.Fatalf("got resource templates %v, %v; want test://notes/{name}", templates, err)
			}
			rr, err = s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://notes/a%20b"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "Note at test://notes/a%20b" {
				t.Errorf("got read note %v, %v", rr, err)
			}
			prompts, err := s.ListPrompts(t.Context(), nil)
			if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greet" {
				t.Fatalf("got prompts %v, %v; want greet", prompts, err)
			}
			pr, err := s.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil {
				t.Fatalf("get prompt: %v", err)
			}
			if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Hello, Ada!" {
				t.Errorf("got prompt content %#v, want Hello, Ada!", pr.Messages[0].Content)
			}

			if u.stderr != nil {
				wantLine := "mcptest: upstream-" + kind + " started pid "
				deadline := time.Now().Add(5 * time.Second)
				for !strings.Contains(u.stderr.String(), wantLine) {
					if time.Now().After(deadline) {
						t.Fatalf("got stderr %q, want a line starting %q", u.stderr.String(), wantLine)
					}
					time.Sleep(2 * time.Millisecond)
				}
				pid, err := u.control.PID()
				if err != nil || pid != u.cmd.Process.Pid {
					t.Errorf("got control pid %d, %v; want %d", pid, err, u.cmd.Process.Pid)
				}
			}
		})
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	const generated, pageSize = 5000, 10
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			u := start(t, kind, &mcptest.Options{Generated: generated, PageSize: pageSize})
			s := connect(t, u)
			var names []string
			pages := 0
			cursor := ""
			for {
				res, err := s.ListTools(t.Context(), &mcp.ListToolsParams{Cursor: cursor})
				if err != nil {
					t.Fatalf("list tools page %d: %v", pages+1, err)
				}
				pages++
				if len(res.Tools) > pageSize {
					t.Fatalf("got %d tools on page %d, want at most %d", len(res.Tools), pages, pageSize)
				}
				for _, tool := range res.Tools {
					names = append(names, tool.Name)
				}
				if res.NextCursor == "" {
					break
				}
				cursor = res.NextCursor
			}
			const total = generated + 5
			// 5005 tools in pages of 10: 500 full pages and one of 5. The SDK
			// reads one item ahead, so no empty trailing page is served.
			if wantPages := (total + pageSize - 1) / pageSize; pages != wantPages {
				t.Errorf("got %d pages, want %d", pages, wantPages)
			}
			if len(names) != total {
				t.Fatalf("got %d tools, want %d", len(names), total)
			}
			if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != total {
				t.Error("got tools out of order or repeated across pages")
			}
			if got := u.serverTools(); got != nil && !slices.Equal(got, names) {
				t.Error("got a listing different from Server.Tools()")
			}
			if _, err := s.ListTools(t.Context(), &mcp.ListToolsParams{Cursor: "not-a-cursor"}); err == nil {
				t.Error("got no error for a bogus cursor, want invalid params")
			}
		})
	}
}

func (u *upstream) serverTools() []string {
	if u.http == nil {
		return nil
	}
	return u.http.Server().Tools()
}

func TestListChanged(t *testing.T) {
	t.Parallel()
	for _, kind := range transports {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			u := start(t, kind, nil)
			s := connect(t, u)
			spec := mcptest.ToolSpec{
				Name:        "late",
				Title:       "Late tool",
				Description: "added at run time",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
				Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
				Reply:       "late reply",
			}
			if err := u.setTool(spec); err != nil {
				t.Fatalf("set tool: %v", err)
			}
			s.waitChanged(t)
			names := listNames(t, s)
			if !slices.Contains(names, "late") {
				t.Fatalf("got tools %v after SetTool, want late among them", names)
			}
			if text, _ := callText(t, s, "late", nil); text != "late reply" {
				t.Errorf("got late %q, want %q", text, "late reply")
			}

			spec.Reply = "replaced"
			if err := u.setTool(spec); err != nil {
				t.Fatalf("replace tool: %v", err)
			}
			s.waitChanged(t)
			if text, _ := callText(t, s, "late", nil); text != "replaced" {
				t.Errorf("got late %q after replacing, want %q", text, "replaced")
			}

			if err := u.removeTool("echo"); err != nil {
				t.Fatalf("remove tool: %v", err)
			}
			s.waitChanged(t)
			if names := listNames(t, s); slices.Contains(names, "echo") {
				t.Errorf("got tools %v after RemoveTool(echo), want no echo", names)
			}
			if got := u.serverTools(); got != nil && !slices.Equal(got, []string{"add", "fail", "late", "sleep", "write-note"}) {
				t.Errorf("got Server.Tools() %v", got)
			}
		})
	}
}

func TestControlRejectsBadSpec(t *testing.T) {
	t.Parallel()
	u := start(t, "stdio", nil)
	connect(t, u)
	err := u.control.SetTool(mcptest.ToolSpec{Name: "bad", InputSchema: json.RawMessage(`{"type":"string"}`)})
	if err == nil || !strings.Contains(err.Error(), "status 400") {
		t.Errorf("got %v, want a 400 error", err)
	}
}

func TestStopAndRestart(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sse", "streamable"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			u := start(t, kind, nil)
			old := connect(t, u)
			if text, _ := callText(t, old, "echo", map[string]any{"message": "before"}); text != "Echo: before" {
				t.Fatalf("got %q before stop", text)
			}

			u.http.Stop()
			if !u.http.Stopped() {
				t.Error("got Stopped() false after Stop")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := old.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err == nil {
				t.Error("got a successful call on a stopped server, want an error")
			}
			if kind == "sse" {
				// The SSE session is the GET stream: cutting it ends the session.
				waitDone(t, old.ClientSession)
			}

			u.http.Restart()
			if u.http.Stopped() {
				t.Error("got Stopped() true after Restart")
			}
			fresh := connect(t, u)
			if text, _ := callText(t, fresh, "echo", map[string]any{"message": "after"}); text != "Echo: after" {
				t.Errorf("got %q after restart", text)
			}
			// The restarted server has forgotten the old session, as a
			// restarted process would.
			if _, err := old.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err == nil {
				t.Error("got a successful call on the pre-restart session, want an error")
			}
		})
	}
}

func waitDone(t *testing.T, cs *mcp.ClientSession) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cs.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end within 10s")
		return nil
	}
}

func TestStdioDie(t *testing.T) {
	t.Parallel()
	u := start(t, "stdio", nil)
	s := connect(t, u)
	if err := u.control.Die(); err != nil {
		t.Fatalf("die: %v", err)
	}
	waitDone(t, s.ClientSession)
	if _, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err == nil {
		t.Error("got a successful call after die, want an error")
	}
	_ = s.Close() // reaps the child
	if code := u.cmd.ProcessState.ExitCode(); code != mcptest.DieExitCode {
		t.Errorf("got exit code %d, want %d", code, mcptest.DieExitCode)
	}
}

func TestStdioExitsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	u := start(t, "stdio", nil)
	s := connect(t, u)
	// Close returns an error ("signal: terminated") if the child had to be
	// signalled; a clean exit means it left on its own when stdin closed.
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if code := u.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("got exit code %d, want 0", code)
	}
}

func TestHang(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"stdio", "sse", "streamable"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			u := start(t, kind, &mcptest.Options{Hang: true})
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			begin := time.Now()
			_, err := connectCtx(ctx, t, u)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want a deadline error", err)
			}
			t.Logf("connect gave up after %v: %v", time.Since(begin), err)
			if u.cmd != nil && u.cmd.ProcessState == nil {
				t.Error("got a running child after the failed connect, want it reaped")
			}
		})
	}
}

// TestHangStopReleasesHandlers checks that Stop frees requests parked by a
// hung server instead of leaving their goroutines behind. It is not parallel
// so that no other test's hung handlers are counted.
func TestHangStopReleasesHandlers(t *testing.T) {
	h := mcptest.StartHTTP(t, &mcptest.Options{Hang: true})
	errs := make(chan error, 2)
	go func() {
		_, err := http.Post(h.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		errs <- err
	}()
	go func() {
		_, err := http.Get(h.SSEURL())
		errs <- err
	}()
	waitHandlers(t, 2)
	h.Stop()
	for range 2 {
		if err := <-errs; err == nil {
			t.Error("got a response from a hung server, want the request to fail when it stops")
		}
	}
	waitHandlers(t, 0)
}

// waitHandlers waits until exactly n hang handlers are running.
func waitHandlers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := testkit.CountGoroutines("mcptest.(*Server).Handler.func")
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d hang handlers running, want %d", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer that exec's copying goroutine and the test can
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunCommands: the tool run exists only when asked for (over stdio, through the
// child's environment too), and reports the program's exit status and output.
func TestRunCommands(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"stdio", "streamable"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			plain := connect(t, start(t, kind, nil))
			if names := listNames(t, plain); slices.Contains(names, "run") {
				t.Fatalf("default tools: got %v, want no run", names)
			}
			s := connect(t, start(t, kind, &mcptest.Options{RunCommands: true}))
			if names := listNames(t, s); !slices.Contains(names, "run") {
				t.Fatalf("with RunCommands: got %v, want run", names)
			}
			_, res := callText(t, s, "run", map[string]any{"argv": []string{"sh", "-c", "echo hi; echo oops >&2; exit 3"}})
			var out mcptest.RunOut
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != 3 || out.Output != "hi\noops\n" {
				t.Fatalf("run: got exit %d, output %q; want 3, %q", out.ExitCode, out.Output, "hi\noops\n")
			}
			_, res = callText(t, s, "run", map[string]any{"argv": []string{"/no/such/program"}})
			b, _ = json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil || out.ExitCode != -1 || !strings.Contains(out.Output, "no such file") {
				t.Fatalf("run of a missing program: got %+v (%v), want exit -1 and the error", out, err)
			}
		})
	}
}

// The tool big answers with as many bytes as asked, over every transport (stdio gets
// Options.Big through the child's environment), and only when opted in.
func TestBig(t *testing.T) {
	t.Parallel()
	if names := mcptest.New(nil).Tools(); slices.Contains(names, "big") {
		t.Errorf("default tools: got %v, want no big", names)
	}
	for _, kind := range []string{"stdio", "sse", "streamable", "streamable-json"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			opts := &mcptest.Options{Big: true, JSONResponse: kind == "streamable-json"}
			u := start(t, strings.TrimSuffix(kind, "-json"), opts)
			s := connect(t, u)
			if names := listNames(t, s); !slices.Contains(names, "big") {
				t.Fatalf("tools: got %v, want big among them", names)
			}
			text, _ := callText(t, s, "big", map[string]any{"bytes": 100_000})
			if len(text) != 100_000 || strings.Trim(text, "x") != "" {
				t.Errorf("big 100000: got %d bytes (%.20q...), want 100000 x", len(text), text)
			}
			if _, res := callText(t, s, "big", map[string]any{"bytes": -1}); !res.IsError {
				t.Errorf("big -1: got %+v, want an error result", res)
			}
			if u.http != nil {
				want := "text/event-stream"
				if opts.JSONResponse {
					want = "application/json"
				}
				if got := initializeContentType(t, u.http.URL()); got != want {
					t.Errorf("initialize answered with Content-Type %q, want %q", got, want)
				}
			}
		})
	}
}

// initializeContentType posts an initialize request to a streamable HTTP endpoint and
// returns the answer's Content-Type.
func initializeContentType(t *testing.T, url string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("Content-Type")
}

// The tool shapes answers with the arguments it received, over every transport, and
// only when opted in.
func TestShapes(t *testing.T) {
	t.Parallel()
	if names := mcptest.New(nil).Tools(); slices.Contains(names, "shapes") {
		t.Errorf("default tools: got %v, want no shapes", names)
	}
	for _, kind := range []string{"stdio", "streamable"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := connect(t, start(t, kind, &mcptest.Options{Shapes: true}))
			if names := listNames(t, s); !slices.Contains(names, "shapes") {
				t.Fatalf("tools: got %v, want shapes among them", names)
			}
			args := map[string]any{"shape": map[string]any{"kind": "rect", "width": 2.0, "height": 3.0}, "label": nil, "tags": map[string]any{"a": "1"}}
			text, res := callText(t, s, "shapes", args)
			var got map[string]any
			if err := json.Unmarshal([]byte(text), &got); err != nil || res.IsError || !reflect.DeepEqual(got, args) {
				t.Errorf("shapes: got %q (%v, error result %v), want %v", text, err, res.IsError, args)
			}
		})
	}
}
