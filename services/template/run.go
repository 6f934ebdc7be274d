package template

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/toolwarden/toolwarden/internal/proctrack"
)

// Result is what one call of a template tool gives: its text and whether it is an
// error the caller should see as such (a failed command, an HTTP error status, a
// refused argument, a response the parser could not read).
type Result struct {
	Text    string
	IsError bool
}

func errorResult(format string, a ...any) Result {
	return Result{Text: fmt.Sprintf(format, a...), IsError: true}
}

// runner runs the tools of one template with the options of its server.
type runner struct {
	opts    Options
	parsers map[string]*Parser
	client  *http.Client
}

// Call runs tool with the arguments given (decoded JSON, numbers as json.Number).
func (rn *runner) call(ctx context.Context, tool *Tool, values map[string]any) Result {
	a := args{values: values, defaults: tool.defaults}
	var res Result
	var truncated bool
	switch {
	case tool.Command != nil:
		res, truncated = rn.command(ctx, tool.Command, a)
	case tool.HTTP != nil:
		res, truncated = rn.http(ctx, tool.HTTP, a)
	default:
		return errorResult("tool %s has nothing to run", tool.Name)
	}
	if !res.IsError && tool.Parse != "" {
		if p := rn.parsers[tool.Parse]; p != nil {
			out, err := p.apply(res.Text, rn.opts.MaxOutput)
			if err != nil {
				res = errorResult("response parser %s: %v; the output began: %s", p.Name, err, excerpt(res.Text, 500))
			} else {
				res.Text = out
			}
		}
	}
	if truncated {
		res.Text += fmt.Sprintf("\n[output truncated: only the first %s were kept]", byteCount(rn.opts.MaxOutput))
	}
	return res
}

// command runs c: the program of argv[0] with the other elements as its arguments,
// each exactly as the template and the arguments make it, in its own process group.
// When it ends, times out or the call is cancelled, the whole group is killed.
func (rn *runner) command(ctx context.Context, c *Command, a args) (Result, bool) {
	argv := make([]string, len(c.Argv))
	// Before a literal "--" that the program which finally runs reads, an argument
	// starting with '-' is an option (dashes.go).
	stdinVar := c.Stdin != nil && !c.Stdin.Literal()
	opts := optionsEnd(c.Argv, stdinVar)
	// Perl's operands after its code or script may be opened with two-argument open
	// (<> in a script whose code the save-time check cannot see): their values may not
	// name a mode or a command.
	opened := magicOpened(c.Argv, stdinVar)
	for i, t := range c.Argv {
		v, err := t.expand(a, func(param, v string) (string, error) {
			if strings.ContainsRune(v, 0) {
				return "", refuse(param, "contains a NUL character, which no program argument can hold")
			}
			return v, nil
		})
		if err != nil {
			return errorResult("refused: %v", err), false
		}
		if err := opts.dashRefusal(i, t, v); err != nil {
			return errorResult("refused: %v", err), false
		}
		if slices.Contains(opened, i) {
			if err := magicRefusal(t, v); err != nil {
				return errorResult("refused: %v", err), false
			}
		}
		argv[i] = v
	}
	var stdin io.Reader
	if c.Stdin != nil {
		s, err := c.Stdin.expand(a, nil)
		if err != nil {
			return errorResult("refused: %v", err), false
		}
		stdin = strings.NewReader(s)
	}
	timeout := min(c.Timeout, rn.opts.MaxTimeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	stdout := &capWriter{max: rn.opts.MaxOutput}
	stderr := &capWriter{max: 64 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = rn.opts.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The group's id is the command's pid: it names our group only until the command
	// is reaped (then it may be reused), so every group kill happens before that.
	var mu sync.Mutex
	reaped := false
	// Killing the group stops whatever the command started too; a grandchild holding
	// the output pipes open must not keep the call waiting either.
	cmd.Cancel = func() error {
		mu.Lock()
		defer mu.Unlock()
		if reaped {
			return os.ErrProcessDone // the group was swept already
		}
		return killGroup(cmd)
	}
	cmd.WaitDelay = time.Second
	if rn.opts.Prepare != nil {
		rn.opts.Prepare(cmd)
	}
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		// Whatever the command left running in its group goes with it: killed once the
		// command exited, while it is a zombie not yet reaped (by cmd.Wait).
		exited := proctrack.WaitExited(cmd.Process.Pid) == nil
		mu.Lock()
		if exited {
			_ = killGroup(cmd)
		}
		reaped = true
		mu.Unlock()
		err = cmd.Wait()
	}
	out := stdout.String()
	switch {
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return errorResult("%s timed out after %s; it and everything it started were stopped%s", argv[0], timeout, outputNote(out, stderr.String())), stdout.truncated
	case ctx.Err() != nil:
		return errorResult("%s was stopped: the call was cancelled", argv[0]), false
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return errorResult("%s failed (%s after %s)%s", argv[0], exit.ProcessState, time.Since(start).Round(time.Millisecond), outputNote(out, stderr.String())), stdout.truncated
		}
		return errorResult("%s could not start: %v", argv[0], err), false
	}
	return Result{Text: out}, stdout.truncated
}

// groupKillHook, set by tests, is called as a command's group is killed.
var groupKillHook func(pid int)

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	if groupKillHook != nil {
		groupKillHook(cmd.Process.Pid)
	}
	// A negative pid is the process group; ESRCH (already gone) is fine.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// outputNote is what a failed command printed, for its error.
func outputNote(stdout, stderr string) string {
	var b strings.Builder
	if s := strings.TrimSpace(stdout); s != "" {
		b.WriteString("\nstandard output:\n" + s)
	}
	if s := strings.TrimSpace(stderr); s != "" {
		b.WriteString("\nstandard error:\n" + s)
	}
	return b.String()
}

// litPrefix is the literal text before t's first placeholder.
func (t Text) litPrefix() string {
	if len(t.Parts) > 0 && t.Parts[0].Param == "" {
		return t.Parts[0].Lit
	}
	return ""
}

func (t Text) firstParam() string {
	for _, p := range t.Parts {
		if p.Param != "" {
			return p.Param
		}
	}
	return ""
}

// cookieBreakers are the characters that can change which cookies a Cookie header
// holds: ';' separates them, ',' does for RFC 2965 parsers, white space does for
// Python's http.cookies, and '"' and '\' can quote a separator (and the cookies after
// it) into a value. RFC 6265 allows none of them in a cookie's value.
const cookieBreakers = "; \t,\"\\"

// http sends the request h describes and returns its body.
func (rn *runner) http(ctx context.Context, h *HTTP, a args) (Result, bool) {
	target, err := h.URL.expand(a)
	if err != nil {
		return errorResult("refused: %v", err), false
	}
	var body io.Reader
	contentType := ""
	switch {
	case h.JSON != nil:
		var buf bytes.Buffer
		if err := h.JSON.encode(&buf, a); err != nil {
			return errorResult("refused: %v", err), false
		}
		body, contentType = &buf, "application/json"
	case h.Body != nil:
		s, err := h.Body.expand(a, nil)
		if err != nil {
			return errorResult("refused: %v", err), false
		}
		body, contentType = strings.NewReader(s), "text/plain; charset=utf-8"
	case h.Form != nil:
		form := url.Values{}
		for _, f := range h.Form {
			v, err := f.Value.expand(a, nil)
			if err != nil {
				return errorResult("refused: %v", err), false
			}
			form.Add(f.Name, v)
		}
		body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	}
	timeout := min(h.Timeout, rn.opts.MaxTimeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, h.Method, target, body)
	if err != nil {
		return errorResult("refused: %v", refuse(h.URL.firstParam(), "does not make a valid request: %v", err)), false
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, hd := range h.Headers {
		v, err := hd.Value.expand(a, func(param, v string) (string, error) {
			if !httpguts.ValidHeaderFieldValue(v) {
				return "", refuse(param, "cannot go into header %s: it has a line break or another control character", hd.Name)
			}
			if strings.EqualFold(hd.Name, "Cookie") {
				if i := strings.IndexAny(v, cookieBreakers); i >= 0 {
					return "", refuse(param, "cannot go into header %s: it has %q, which could end the cookie the template writes and add another (a cookie's value may not have ';', ',', '\"', '\\' or white space, RFC 6265)", hd.Name, v[i:i+1])
				}
			}
			return v, nil
		})
		if err != nil {
			return errorResult("refused: %v", err), false
		}
		req.Header.Set(hd.Name, v)
	}
	resp, err := rn.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
			return errorResult("%s %s: no answer within %s", h.Method, h.URL.shown(), timeout), false
		case ctx.Err() != nil:
			return errorResult("%s %s was stopped: the call was cancelled", h.Method, h.URL.shown()), false
		}
		return errorResult("%s %s failed: %v", h.Method, h.URL.shown(), unwrapURLError(err)), false
	}
	defer resp.Body.Close()
	w := &capWriter{max: rn.opts.MaxOutput}
	// One byte past the cap says it was cut; reading on to the end would cost the
	// whole body, however large (or however far a compressed one inflates).
	if _, err := io.Copy(w, io.LimitReader(resp.Body, int64(rn.opts.MaxOutput)+1)); err != nil && !w.truncated {
		return errorResult("%s %s: reading the answer failed: %v", h.Method, h.URL.shown(), err), false
	}
	text := w.String()
	if resp.StatusCode >= 400 {
		return errorResult("%s %s answered %s%s", h.Method, h.URL.shown(), resp.Status, prefixed("\n", text)), w.truncated
	}
	return Result{Text: text}, w.truncated
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func prefixed(sep, s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return sep + s
}

// sameOrigin refuses redirects to another scheme, host or port: the template names
// where its requests go, and neither a call nor the server it reaches may change that.
func sameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if !strings.EqualFold(req.URL.Scheme, first.Scheme) || req.URL.Host != first.Host {
		return fmt.Errorf("refused a redirect from %s to %s://%s: a template's requests stay at the origin it names", first.Host, req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// capWriter keeps the first max bytes written and counts the rest.
type capWriter struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	switch {
	case room >= len(p):
		w.buf.Write(p)
	case room > 0:
		w.buf.Write(p[:room])
		w.truncated = true
	default:
		if len(p) > 0 {
			w.truncated = true
		}
	}
	return len(p), nil
}

// String is what was kept, as valid UTF-8 (a cut in the middle of a character, or
// bytes that are not text, become U+FFFD).
func (w *capWriter) String() string {
	b := w.buf.Bytes()
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func byteCount(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
