package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The child's configuration travels in the environment because the test
// binary's command line belongs to the testing package.
const (
	envEnable       = "TOOLWARDEN_MCPTEST"
	envName         = "TOOLWARDEN_MCPTEST_NAME"
	envVersion      = "TOOLWARDEN_MCPTEST_VERSION"
	envInstructions = "TOOLWARDEN_MCPTEST_INSTRUCTIONS"
	envGenerated    = "TOOLWARDEN_MCPTEST_GENERATED"
	envPageSize     = "TOOLWARDEN_MCPTEST_PAGE_SIZE"
	envHang         = "TOOLWARDEN_MCPTEST_HANG"
	envRunCommands  = "TOOLWARDEN_MCPTEST_RUN_COMMANDS"
	envBig          = "TOOLWARDEN_MCPTEST_BIG"
	envShapes       = "TOOLWARDEN_MCPTEST_SHAPES"
	envControlFile  = "TOOLWARDEN_MCPTEST_CONTROL_FILE"
)

// DieExitCode is the exit status of a child told to die through the control API.
const DieExitCode = 3

// Main turns the current test binary into a stdio MCP server when it was
// started by [StdioCommand], so stdio tests need no separate go build. Call it
// first thing in TestMain:
//
//	func TestMain(m *testing.M) {
//		mcptest.Main()
//		os.Exit(m.Run())
//	}
//
// If TOOLWARDEN_MCPTEST=1 is set, Main serves stdio and calls os.Exit when
// stdin closes (status 0), or on a configuration error (status 2); it never
// returns. Otherwise it returns at once.
func Main() {
	if os.Getenv(envEnable) != "1" {
		return
	}
	os.Exit(runChild())
}

func runChild() int {
	opts, controlFile, err := optionsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	srv := New(opts)
	if controlFile != "" {
		if err := serveControl(srv, controlFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if err := srv.ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func optionsFromEnv() (*Options, string, error) {
	opts := &Options{
		Name:         os.Getenv(envName),
		Version:      os.Getenv(envVersion),
		Instructions: os.Getenv(envInstructions),
		Stderr:       os.Stderr,
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{envGenerated, &opts.Generated}, {envPageSize, &opts.PageSize}} {
		v := os.Getenv(f.key)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, "", fmt.Errorf("mcptest: %s=%q: want a non-negative integer", f.key, v)
		}
		*f.dst = n
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{envHang, &opts.Hang}, {envRunCommands, &opts.RunCommands}, {envBig, &opts.Big}, {envShapes, &opts.Shapes}} {
		v := os.Getenv(f.key)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, "", fmt.Errorf("mcptest: %s=%q: want a boolean", f.key, v)
		}
		*f.dst = b
	}
	return opts, os.Getenv(envControlFile), nil
}

// StdioCommand returns how to start a stdio test server as a child process:
// the current test binary (os.Args[0]), the arguments, and the environment
// variables to add to os.Environ(). The package's TestMain must call [Main]
// before anything else, or the child just runs no tests ("-test.run=^$") and
// exits, which a client sees as the server closing at once.
//
// The environment also sets GORACE=atexit_sleep_ms=0 (appended to any GORACE
// already set), because a -race child otherwise lingers a second after
// every disconnect.
//
// If controlFile is not empty, the child also serves the control API on a
// loopback port and writes "host:port" there; see [WaitControl].
// opts.JSONResponse is for HTTP and means nothing here.
// opts.Stderr cannot cross a process boundary and is ignored: the child's
// stderr is the start line's destination.
func StdioCommand(opts *Options, controlFile string) (command string, args []string, env map[string]string) {
	var o Options
	if opts != nil {
		o = *opts
	}
	command = os.Args[0]
	if strings.ContainsRune(command, filepath.Separator) {
		// A relative path would break if the test changes directory; a bare
		// name was found on PATH and is left to exec to find again.
		if abs, err := filepath.Abs(command); err == nil {
			command = abs
		}
	}
	// Every key is set, even to its zero value, so that nothing inherited from
	// the parent's environment changes the child's configuration.
	env = map[string]string{
		envEnable:       "1",
		envName:         o.Name,
		envVersion:      o.Version,
		envInstructions: o.Instructions,
		envGenerated:    strconv.Itoa(o.Generated),
		envPageSize:     strconv.Itoa(o.PageSize),
		envHang:         strconv.FormatBool(o.Hang),
		envRunCommands:  strconv.FormatBool(o.RunCommands),
		envBig:          strconv.FormatBool(o.Big),
		envShapes:       strconv.FormatBool(o.Shapes),
		envControlFile:  controlFile,
		// A -race binary sleeps a second at exit so late reports can land;
		// here that second can outlast a short
		// CommandTransport.TerminateDuration and earn the child a SIGTERM.
		"GORACE": strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0"),
	}
	return command, []string{"-test.run=^$"}, env
}

// serveControl starts the child's control API, the only way for a test to
// reach into a server whose stdin and stdout belong to the client under test.
func serveControl(srv *Server, file string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("mcptest: control listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools", func(w http.ResponseWriter, r *http.Request) {
		var spec ToolSpec
		if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decode tool spec: " + err.Error()})
			return
		}
		if err := spec.validate(); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		srv.SetTool(spec)
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("DELETE /tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		srv.RemoveTool(r.PathValue("name"))
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("GET /pid", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int{"pid": os.Getpid()})
	})
	mux.HandleFunc("GET /sleeping", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int{"sleeping": srv.Sleeping()})
	})
	mux.HandleFunc("POST /die", func(w http.ResponseWriter, r *http.Request) {
		// Drain the request first: closing a socket with unread input sends
		// a reset, which could destroy the reply before the client reads it.
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		_ = http.NewResponseController(w).Flush()
		os.Exit(DieExitCode)
	})
	go func() { _ = http.Serve(ln, mux) }()
	if err := writeFileAtomic(file, ln.Addr().String()); err != nil {
		return fmt.Errorf("mcptest: write control file: %w", err)
	}
	return nil
}

// writeJSON sets Content-Length so that a flushed reply is complete on the
// wire even if the process exits before the handler returns (POST /die).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeFileAtomic renames a finished temporary file into place so that a
// polling reader never sees a partial address.
func writeFileAtomic(name, content string) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".mcptest-control-*")
	if err != nil {
		return err
	}
	_, werr := f.WriteString(content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), name)
}

// Control is the client of a stdio child's control API.
type Control struct {
	// Addr is the control API's host:port, as written to the control file.
	Addr string
}

// WaitControl waits (up to 10 s) for a child started with a control file to
// write its address there, and fails the test if it does not.
func WaitControl(t testing.TB, file string) *Control {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil {
			if addr := strings.TrimSpace(string(b)); addr != "" {
				return &Control{Addr: addr}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcptest: no control address in %s after 10s (did TestMain call mcptest.Main?)", file)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// SetTool adds or replaces a tool in the child, which then notifies its client.
func (c *Control) SetTool(spec ToolSpec) error {
	if err := c.do(http.MethodPost, "/tools", spec, nil); err != nil {
		return fmt.Errorf("mcptest: control set tool %q: %w", spec.Name, err)
	}
	return nil
}

// RemoveTool removes a tool from the child, which then notifies its client.
func (c *Control) RemoveTool(name string) error {
	if err := c.do(http.MethodDelete, "/tools/"+url.PathEscape(name), nil, nil); err != nil {
		return fmt.Errorf("mcptest: control remove tool %q: %w", name, err)
	}
	return nil
}

// Die makes the child exit with status [DieExitCode] right after it has
// answered, as an upstream server crashing mid-session would.
func (c *Control) Die() error {
	if err := c.do(http.MethodPost, "/die", nil, nil); err != nil {
		return fmt.Errorf("mcptest: control die: %w", err)
	}
	return nil
}

// Sleeping returns how many calls of sleep the child has under way.
func (c *Control) Sleeping() (int, error) {
	var out struct {
		Sleeping int `json:"sleeping"`
	}
	if err := c.do(http.MethodGet, "/sleeping", nil, &out); err != nil {
		return 0, fmt.Errorf("mcptest: control sleeping: %w", err)
	}
	return out.Sleeping, nil
}

// PID returns the child's process ID.
func (c *Control) PID() (int, error) {
	var out struct {
		PID int `json:"pid"`
	}
	if err := c.do(http.MethodGet, "/pid", nil, &out); err != nil {
		return 0, fmt.Errorf("mcptest: control pid: %w", err)
	}
	return out.PID, nil
}

func (c *Control) do(method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// No keep-alive: after Die a pooled connection would be dead, and the
	// child's lifetime is not worth a connection pool.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("status %d: %s", resp.StatusCode, e.Error)
		}
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
