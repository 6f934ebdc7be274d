// Package mcptest is an in-repo MCP server for Toolwarden's tests.
//
// It is built on the official Go SDK and serves the same small tool set over
// stdio, legacy SSE and streamable HTTP, so gateway code can be tested against
// every transport without Node. On top of the default tools it can change its
// tool list at run time (which makes the SDK send
// notifications/tools/list_changed), serve thousands of generated tools across
// many pages, hang without answering, and die on command, because those are
// the upstream behaviours a gateway must survive. On request it also answers with
// results of any size (the tool big), to test message size caps.
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures a test server. The zero value (or a nil *Options) is a
// server named "mcptest" with only the default tools.
type Options struct {
	// Name and Version are reported in serverInfo so tests can tell servers apart.
	Name, Version string
	// Instructions are returned from initialize, for tests of instruction handling.
	Instructions string
	// Generated adds tools gen-00001..gen-N, each with its own small input schema
	// (one required string parameter and one optional integer), a description and
	// readOnlyHint, so that large catalogues and pagination can be tested.
	Generated int
	// PageSize is the tools/list page size; 0 keeps the SDK default (1000).
	PageSize int
	// Hang makes the server accept connections but never answer anything, not
	// even initialize, to test timeouts.
	Hang bool
	// Big adds the tool big {"bytes": N}, whose result is a text of N bytes, to
	// test message size caps, and flood {"count": N, "bytes": M}, which sends N
	// progress notifications saying the work is done, each with a message of M
	// bytes, before its result. Not default tools because many tests count the tools.
	Big bool
	// Shapes adds the tool shapes (ShapesSchema: a oneOf, nullable values and
	// maps), which answers with the arguments it received, to test clients that
	// build such arguments. Not a default tool, for the same reason as Big.
	Shapes bool
	// JSONResponse makes streamable HTTP answer each call with an
	// application/json body instead of an SSE stream.
	JSONResponse bool
	// RunCommands adds the tool "run", which runs any program it is given: a
	// server gone bad, to test what confinement keeps it from. Off by default,
	// and not counted among the default tools.
	RunCommands bool
	// Stderr receives the stdio start line; nil means os.Stderr. It exists so
	// tests can check that a gateway captures a server's stderr.
	Stderr io.Writer
}

// ToolSpec describes a tool added at run time. It is JSON-tagged because it is
// also the body of the subprocess control API's POST /tools.
type ToolSpec struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema must be a JSON object schema with "type": "object"; nil means
	// {"type":"object"}.
	InputSchema json.RawMessage      `json:"inputSchema,omitempty"`
	Annotations *mcp.ToolAnnotations `json:"annotations,omitempty"`
	// Reply is the text content returned when the tool is called; empty means "ok".
	Reply string `json:"reply,omitempty"`
	// OutputSchema, when set, is the tool's output schema.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Structured, when set, is the structuredContent returned with Reply, sent as
	// written (compact JSON without <, > or &, which the SDK's encoder would escape),
	// so a test can compare what a client receives with it byte for byte.
	Structured json.RawMessage `json:"structured,omitempty"`
}

// Server is a test MCP server. Its tool set may be changed while clients are
// connected; all methods are safe for concurrent use.
type Server struct {
	opts Options
	mcp  *mcp.Server

	// mu serialises tool changes so that names always matches the SDK's set,
	// which the SDK offers no way to read back.
	mu    sync.Mutex
	names map[string]struct{}

	failPings atomic.Int64 // FailPings: how many pings still to refuse
	sleeping  atomic.Int64 // calls of sleep under way
}

// Sleeping is how many calls of sleep are under way: a test that crashes the server
// with calls in flight waits until the server has them all.
func (s *Server) Sleeping() int { return int(s.sleeping.Load()) }

// FailPings makes the next n pings fail with an error while everything else keeps
// working: a server that is alive but does not pass its health check.
func (s *Server) FailPings(n int) { s.failPings.Store(int64(n)) }

// New builds a server with the default tools (echo, add, fail, sleep,
// write-note), the tool run if opts.RunCommands, big if opts.Big, shapes if
// opts.Shapes, opts.Generated generated
// tools, the resource test://readme, the resource template test://notes/{name} and
// the prompt greet. opts may be nil.
func New(opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "mcptest"
	}
	if o.Version == "" {
		o.Version = "1.0.0"
	}
	s := &Server{
		opts:  o,
		names: make(map[string]struct{}),
		mcp: mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
			Instructions: o.Instructions,
			PageSize:     o.PageSize,
		}),
	}
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" && s.failPings.Add(-1) >= 0 {
				return nil, errors.New("mcptest: ping refused (FailPings)")
			}
			return next(ctx, method, req)
		}
	})
	s.addDefaultTools()
	if o.Big {
		s.addBigTool()
		s.addFloodTool()
	}
	if o.Shapes {
		s.addShapesTool()
	}
	if o.RunCommands {
		s.addRunTool()
	}
	for i := 1; i <= o.Generated; i++ {
		s.addGeneratedTool(i, o.Generated)
	}
	s.mcp.AddResource(&mcp.Resource{
		URI:         readmeURI,
		Name:        "readme",
		Title:       "Read me",
		Description: "A static text resource, so resource listing and reading can be tested.",
		MIMEType:    "text/plain",
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: readmeURI, MIMEType: "text/plain", Text: readmeText,
		}}}, nil
	})
	// A template whose reads answer with the URI exactly as it arrived, so tests can
	// see what a client's expansion of it reaches the server as.
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: notesTemplate,
		Name:        "note",
		Title:       "Note",
		Description: "A note by name, so resource templates can be tested; it reads back the URI it was read as.",
		MIMEType:    "text/plain",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: req.Params.URI, MIMEType: "text/plain", Text: "Note at " + req.Params.URI,
		}}}, nil
	})
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Title:       "Greet",
		Description: "Greets someone by name, so prompt listing and getting can be tested.",
		Arguments:   []*mcp.PromptArgument{{Name: "name", Description: "Who to greet", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		if name == "" {
			name = "stranger"
		}
		return &mcp.GetPromptResult{
			Description: "A greeting",
			Messages: []*mcp.PromptMessage{{
				Role:    "user",
				Content: &mcp.TextContent{Text: "Hello, " + name + "!"},
			}},
		}, nil
	})
	return s
}

const (
	readmeURI     = "test://readme"
	readmeText    = "This is the Toolwarden MCP test server.\n"
	notesTemplate = "test://notes/{name}"
)

// MCP exposes the underlying SDK server, for tests that need more than this
// package offers.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Name is the server name reported in serverInfo.
func (s *Server) Name() string { return s.opts.Name }

type echoIn struct {
	Message string `json:"message" jsonschema:"the text to echo back"`
}

type addIn struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type addOut struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

type failIn struct {
	Message string `json:"message,omitempty" jsonschema:"the error text to return"`
}

type floodIn struct {
	Count int `json:"count" jsonschema:"how many progress notifications"`
	Bytes int `json:"bytes,omitempty" jsonschema:"the length of each one's message"`
}

// addFloodTool adds flood: a server that reports progress without restraint.
func (s *Server) addFloodTool() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "flood",
		Description: "Sends count progress notifications, each saying the work is done, then answers.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		msg := strings.Repeat("p", in.Bytes)
		for i := 0; tok != nil && i < in.Count; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 1, Message: msg})
		}
		return textResult("flooded"), nil, nil
	})
}

type sleepIn struct {
	MS int `json:"ms,omitempty" jsonschema:"how long to sleep, in milliseconds"`
}

type writeNoteIn struct {
	Text string `json:"text" jsonschema:"the note to write"`
}

func (s *Server) addDefaultTools() {
	s.mu.Lock()
	defer s.mu.Unlock()

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "echo",
		Description: "Echoes back the message.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, Title: "Echo"},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return textResult("Echo: " + in.Message), nil, nil
	})

	// The typed Out makes the SDK publish an output schema and fill
	// structuredContent, plus the JSON text fallback older clients read.
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "add",
		Description: "Adds two numbers and returns the sum as structured content.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "fail",
		Description: "Always fails with a tool error (isError true) carrying the message.",
	}, func(_ context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
		msg := in.Message
		if msg == "" {
			msg = "failed as requested"
		}
		res := textResult(msg)
		res.IsError = true
		return res, nil, nil
	})

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "sleep",
		Description: "Sleeps for ms milliseconds, or until the call is cancelled; with a progress token it reports progress in five steps.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
		s.sleeping.Add(1)
		defer s.sleeping.Add(-1)
		tok := req.Params.GetProgressToken()
		steps := 1
		if tok != nil {
			steps = 5
		}
		step := time.Duration(in.MS) * time.Millisecond / time.Duration(steps)
		for i := 1; i <= steps; i++ {
			t := time.NewTimer(step)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, nil, ctx.Err()
			}
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
					Progress: float64(i), Total: float64(steps), Message: fmt.Sprintf("slept %d of %d", i, steps)})
			}
		}
		return textResult("slept"), nil, nil
	})

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "write-note",
		Description: "Pretends to write a note; marked destructive so approval rules can be tested.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in writeNoteIn) (*mcp.CallToolResult, any, error) {
		return textResult("ok"), nil, nil
	})

	for _, n := range []string{"echo", "add", "fail", "sleep", "write-note"} {
		s.names[n] = struct{}{}
	}
}

type runIn struct {
	Argv []string `json:"argv" jsonschema:"the program and its arguments (no shell)"`
}

// RunOut is what the tool "run" returns as structured content.
type RunOut struct {
	// ExitCode is the program's exit status; -1 when it could not start or was killed.
	ExitCode int `json:"exit_code"`
	// Output is its standard output and standard error, interleaved.
	Output string `json:"output"`
}

// runTimeout bounds one command of the tool "run".
const runTimeout = 20 * time.Second

func (s *Server) addRunTool() {
	s.mu.Lock()
	defer s.mu.Unlock()
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "run",
		Description: "Runs a program with the server's rights and returns its exit status and output.",
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in runIn) (*mcp.CallToolResult, RunOut, error) {
		if len(in.Argv) == 0 {
			return errorResult("argv is empty"), RunOut{}, nil
		}
		ctx, cancel := context.WithTimeout(ctx, runTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, in.Argv[0], in.Argv[1:]...).CombinedOutput()
		res := RunOut{Output: string(out)}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			res.ExitCode = ee.ExitCode()
		default:
			res.ExitCode, res.Output = -1, res.Output+err.Error()
		}
		return nil, res, nil
	})
	s.names["run"] = struct{}{}
}

type bigIn struct {
	Bytes int    `json:"bytes" jsonschema:"how many bytes of text to answer with"`
	Unit  string `json:"unit,omitempty" jsonschema:"the text repeated to make them (x by default)"`
}

// maxBig bounds big's answer, so a typo cannot take the test machine's memory.
const maxBig = 1 << 30

func (s *Server) addBigTool() {
	s.mu.Lock()
	defer s.mu.Unlock()
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "big",
		Description: "Answers with a text of the given number of bytes, to test message size caps.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
		if in.Bytes < 0 || in.Bytes > maxBig {
			return errorResult(fmt.Sprintf("bytes must be between 0 and %d", maxBig)), nil, nil
		}
		unit := in.Unit
		if unit == "" {
			unit = "x"
		}
		return textResult(strings.Repeat(unit, in.Bytes/len(unit)+1)[:in.Bytes]), nil, nil
	})
	s.names["big"] = struct{}{}
}

// addGeneratedTool registers gen-<i> through the SDK's untyped AddTool with a
// raw schema: inferring and resolving thousands of schemas by reflection
// would make big catalogues slow to build.
func (s *Server) addGeneratedTool(i, total int) {
	name := fmt.Sprintf("gen-%05d", i)
	param := fmt.Sprintf("q%05d", i)
	schema := fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string","description":"query for tool %d"},"limit":{"type":"integer","description":"optional limit"}},"required":[%q]}`,
		param, i, param)
	tool := &mcp.Tool{
		Name:        name,
		Description: fmt.Sprintf("Generated test tool %d of %d; replies with its arguments.", i, total),
		InputSchema: json.RawMessage(schema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcp.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return errorResult("invalid arguments: " + err.Error()), nil
			}
		}
		if _, ok := args[param].(string); !ok {
			return errorResult(fmt.Sprintf("missing required string argument %q", param)), nil
		}
		return textResult(name + ": " + string(req.Params.Arguments)), nil
	})
	s.names[name] = struct{}{}
}

// SetTool adds the tool, or replaces the tool of the same name, and so makes
// the SDK notify connected clients that the tool list changed. The SDK sends
// that notification 10 ms after the last of a burst of changes, and only if
// a session was connected when the change was made. Like the SDK's
// AddTool it panics if the input schema is not an object schema; use the
// control API (which answers 400) when the spec comes from elsewhere.
func (s *Server) SetTool(spec ToolSpec) {
	if err := spec.validate(); err != nil {
		panic(err)
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if len(spec.InputSchema) > 0 {
		schema = slices.Clone(spec.InputSchema)
	}
	var ann *mcp.ToolAnnotations
	if spec.Annotations != nil {
		a := *spec.Annotations
		ann = &a
	}
	reply := spec.Reply
	if reply == "" {
		reply = "ok"
	}
	tool := &mcp.Tool{
		Name:        spec.Name,
		Title:       spec.Title,
		Description: spec.Description,
		InputSchema: schema,
		Annotations: ann,
	}
	if len(spec.OutputSchema) > 0 {
		tool.OutputSchema = slices.Clone(spec.OutputSchema)
	}
	structured := slices.Clone(spec.Structured)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcp.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := textResult(reply)
		if len(structured) > 0 {
			res.StructuredContent = structured
		}
		return res, nil
	})
	s.names[spec.Name] = struct{}{}
}

// validate reports what the SDK's AddTool would panic about, so the control
// API can refuse a bad spec instead of crashing the child.
func (spec ToolSpec) validate() error {
	if spec.Name == "" {
		return errors.New("mcptest: tool name is empty")
	}
	if (len(spec.OutputSchema) > 0 && !json.Valid(spec.OutputSchema)) || (len(spec.Structured) > 0 && !json.Valid(spec.Structured)) {
		return fmt.Errorf("mcptest: tool %q: outputSchema or structured is not JSON", spec.Name)
	}
	if len(spec.InputSchema) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(spec.InputSchema, &m); err != nil {
		return fmt.Errorf("mcptest: tool %q: input schema is not a JSON object: %w", spec.Name, err)
	}
	if m["type"] != "object" {
		return fmt.Errorf(`mcptest: tool %q: input schema must have "type": "object"`, spec.Name)
	}
	return nil
}

// RemoveTool removes the named tools; unknown names are ignored. The SDK
// notifies clients only if something was actually removed.
func (s *Server) RemoveTool(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcp.RemoveTools(names...)
	for _, n := range names {
		delete(s.names, n)
	}
}

// Tools returns the names of the current tools, sorted (the order in which
// tools/list returns them).
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.names))
	for n := range s.names {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func errorResult(text string) *mcp.CallToolResult {
	res := textResult(text)
	res.IsError = true
	return res
}

// ServeStdio serves one session on os.Stdin and os.Stdout until stdin is
// closed or ctx ends. It first writes "mcptest: <name> started pid <pid>" to
// Options.Stderr (or os.Stderr), so stderr capture can be tested.
//
// In Hang mode it reads and discards stdin without ever writing; it still
// returns when stdin is closed, so a client closing the pipe does not have to
// fall back to signals.
func (s *Server) ServeStdio(ctx context.Context) error {
	stderr := s.opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	fmt.Fprintf(stderr, "mcptest: %s started pid %d\n", s.opts.Name, os.Getpid())
	if s.opts.Hang {
		done := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, os.Stdin)
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := s.mcp.Run(ctx, &mcp.StdioTransport{})
	if errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil // the client closed stdin: a normal shutdown
	}
	if err != nil {
		return fmt.Errorf("mcptest: serve stdio: %w", err)
	}
	return nil
}

// Handler serves streamable HTTP at /mcp and legacy SSE at /sse, the layout of
// @modelcontextprotocol/server-everything. SSE clients are told to POST their
// messages to /sse?sessionid=..., the SDK's message endpoint. Each call
// returns a handler with its own session table, so a fresh handler behaves
// like a restarted server: old session IDs are unknown to it.
//
// In Hang mode every request blocks until its context ends.
func (s *Server) Handler() http.Handler {
	if s.opts.Hang {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			// net/http only notices a closed connection (and cancels the
			// context) once the body has been read; without this the
			// handler would outlive both the client and Stop.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		})
	}
	get := func(*http.Request) *mcp.Server { return s.mcp }
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: s.opts.JSONResponse}))
	mux.Handle("/sse", mcp.NewSSEHandler(get, nil))
	return mux
}
