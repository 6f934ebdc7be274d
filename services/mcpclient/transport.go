package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/template"
)

// passEnv are the variables of Toolwarden's own environment a stdio server inherits:
// enough to find programs and a home directory (npx keeps its cache there), plus the
// locale, which only says how to encode text; never DATABASE_URL, the admin password
// or anything else Toolwarden itself was given (docs/security.md). What else a server needs,
// the admin configures on it.
var passEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE"}

// InheritedEnv picks, through lookup (os.LookupEnv in cmd), the variables every stdio
// server inherits, as Options.InheritEnv wants them.
func InheritedEnv(lookup func(string) (string, bool)) map[string]string {
	out := map[string]string{}
	for _, k := range passEnv {
		if v, ok := lookup(k); ok {
			out[k] = v
		}
	}
	return out
}

// endpoint is one way of reaching a server: a transport plus what must be cleaned up
// when the session ends.
type endpoint struct {
	transport mcp.Transport
	cmd       *exec.Cmd          // stdio only
	stderr    *lineBuffer        // stdio only
	http      *http.Client       // HTTP only
	endHTTP   func()             // HTTP only: ends every request still in flight
	builtin   bool               // the built-in server: calls carry who calls (CallMeta)
	template  bool               // a template server: its tools run commands
	inproc    *mcp.ServerSession // template only: the server side of the in-memory session
	pipe      net.Conn           // template only: the server's end of the pipe between them
	untrack   func(pid int)      // stdio with Options.ProcessDir: drops the group's record
	// mark, set by Manager.track before the session starts (template with
	// Options.ProcessDir), marks each command of the template's tools as this run's.
	mark      func(cmd *exec.Cmd)
	closeOnce sync.Once

	// tplHTTP sends a template's HTTP tools' requests (template only): the endpoint's
	// own, so that cleanup can close the keep-alive connections it leaves to upstreams.
	tplHTTP *http.Transport
}

// newEndpoint builds the transport for c. A stdio server gets the inherit variables plus
// its own env, runs confined by conf, and its standard error goes to stderr. Every
// message the server sends is capped by lim while it is read. A template server is
// served in-process (services/template), its commands run as a stdio server would:
// with the inherit variables, confined by conf.
func newEndpoint(c registry.Connection, inherit map[string]string, conf *confine.Confiner, stderr *lineBuffer, lim msgLimit, tpl template.Options,
	builtin *mcp.Server, eg *egress.Policy) (*endpoint, error) {
	switch c.Type {
	case registry.TypeBuiltin:
		if builtin == nil {
			return nil, errors.New("mcpclient: this server has no built-in tools to serve")
		}
		// As a template server: closing the server's end of the pipe cancels its calls.
		sp, cp := net.Pipe()
		ss, err := builtin.Connect(context.Background(), &mcp.IOTransport{Reader: sp, Writer: sp}, nil)
		if err != nil {
			return nil, fmt.Errorf("mcpclient: start the built-in server: %w", err)
		}
		return &endpoint{transport: &mcp.IOTransport{Reader: cp, Writer: cp}, inproc: ss, pipe: sp, builtin: true}, nil
	case registry.TypeTemplate:
		t, err := template.Parse(c.Template)
		if err != nil {
			return nil, fmt.Errorf("mcpclient: %w", err)
		}
		ep := &endpoint{}
		if tpl.Transport == nil {
			// Every connection of the template's requests, redirects included, goes
			// through the egress policy, and so does the host of a request sent through
			// a proxy of the environment (docs/security.md, Egress).
			ep.tplHTTP = eg.Transport(lim.log)
			tpl.Transport = ep.tplHTTP
		}
		// Marked as a stdio server is, so that what a command leaves outside its group
		// is found at the stop or after a crash; a tool's arguments are the caller's:
		// they widen nothing (ApplyUntrusted).
		tpl.Name, tpl.Env = c.Name, childEnv(inherit, nil)
		tpl.Prepare = func(cmd *exec.Cmd) {
			if ep.mark != nil {
				ep.mark(cmd)
			}
			conf.ApplyUntrusted(cmd)
		}
		// The SDK's in-memory transport over a pipe whose server end we keep: closing it
		// (interrupt) cancels the calls the server is still running, and so kills their
		// commands; a session's Close alone would wait for them to finish.
		sp, cp := net.Pipe()
		ss, err := template.NewServer(t, tpl).Connect(context.Background(), &mcp.IOTransport{Reader: sp, Writer: sp}, nil)
		if err != nil {
			return nil, fmt.Errorf("mcpclient: start template server: %w", err)
		}
		ep.transport, ep.inproc, ep.pipe, ep.template = &mcp.IOTransport{Reader: cp, Writer: cp}, ss, sp, true
		return ep, nil
	case registry.TypeStdio:
		cmd := exec.Command(c.Command, registry.ExpandArgs(c.Args, c.Env)...)
		cmd.Dir = c.WorkingDir
		cmd.Env = childEnv(inherit, c.Env)
		cmd.Stderr = stderr
		// Its own process group, so stopping the server also stops whatever it started;
		// Pdeathsig, so a crash of Toolwarden does not leave servers running.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		// A grandchild holding stderr open must not make Wait hang.
		cmd.WaitDelay = 2 * time.Second
		// Started through the confinement helper: no data dir, no database (docs/security.md).
		conf.Apply(cmd)
		lim.stderr = stderr // what of its standard output is dropped is shown with its stderr
		return &endpoint{transport: &commandTransport{cmd: cmd, terminate: 2 * time.Second, lim: lim},
			cmd: cmd, stderr: stderr}, nil
	case registry.TypeSSE, registry.TypeStreamableHTTP:
		// Every connection, redirects included, goes through the egress policy, which
		// checks the address dialled after DNS resolution, or the request's host before
		// it goes to a proxy of the environment (docs/security.md, Egress).
		base := eg.Transport(lim.log)
		// Every concurrent call is a request to this one server; the default of two idle
		// connections would dial (and close) a connection for most of them under load.
		base.MaxIdleConnsPerHost = 128
		u, err := url.Parse(c.URL)
		if err != nil {
			return nil, fmt.Errorf("mcpclient: server URL: %w", err)
		}
		life, end := context.WithCancel(context.Background())
		// The SDK's replies to the server's requests wait at most the server's call
		// timeout, a few at a time (capTransport): not the whole transport's
		// connections, since Toolwarden's own calls, each a stream while it runs,
		// must not wait behind them.
		hc := &http.Client{Transport: &capTransport{lim: lim, life: life, replyTimeout: c.Timeout,
			replySlots: make(chan struct{}, replyConns),
			base:       &headerTransport{base: base, headers: c.Headers, scheme: u.Scheme, host: u.Host}},
			CheckRedirect: sameOrigin}
		// capTransport decides about every event; the SDK's own event limit (which ends
		// the session) stays above it.
		maxEvent := lim.max + eventSlack + sdkSlack
		if c.Type == registry.TypeSSE {
			return &endpoint{transport: &mcp.SSEClientTransport{Endpoint: c.URL, HTTPClient: hc, MaxEventSize: maxEvent}, http: hc, endHTTP: end}, nil
		}
		// The SDK reopens a stream that ended (proxies cut idle ones), but not one that
		// ended at once more than streamableRetries times in a row, nor one it cannot
		// reach (our fork): the session supervisor reconnects with backoff and reports
		// the outage.
		return &endpoint{transport: &mcp.StreamableClientTransport{Endpoint: c.URL, HTTPClient: hc, MaxRetries: streamableRetries,
			MaxEventSize: maxEvent, Logger: lim.sdk}, http: hc, endHTTP: end}, nil
	}
	return nil, fmt.Errorf("mcpclient: unknown server type %q", c.Type)
}

// streamableRetries is how many times in a row a streamable HTTP server's stream may
// end at once before its session ends.
const streamableRetries = 5

func childEnv(inherit, own map[string]string) []string {
	merged := maps.Clone(inherit)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, own) // the server's own settings win
	env := make([]string, 0, len(merged))
	for k, v := range merged {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// interrupt stops what the server is doing before its session closes (which waits for
// the calls in flight): for a template server, its running calls are cancelled and
// their commands killed. Other servers are stopped by cleanup.
func (e *endpoint) interrupt() {
	if e.pipe != nil {
		_ = e.pipe.Close()
	}
}

// cleanup releases what the session left behind: the stdio server's process group
// (anything it started that outlived it) and HTTP requests: idle connections, and
// whatever the SDK still sends on its own (its notice of a cancelled call waits up to 5 s
// for a server that does not answer, holding a connection that long).
func (e *endpoint) cleanup() {
	e.closeOnce.Do(func() {
		if e.cmd != nil && e.cmd.Process != nil {
			// The session reaps the server itself when it closes (process.Close), and
			// kills its group just before: only a server not reaped yet is killed here.
			if ct, ok := e.transport.(*commandTransport); ok && ct.proc != nil {
				ct.proc.killGroup()
			}
			if e.untrack != nil {
				e.untrack(e.cmd.Process.Pid)
			}
		}
		if e.http != nil {
			e.endRequests()
			e.http.CloseIdleConnections()
		}
		if e.inproc != nil {
			_ = e.inproc.Close()
		}
		if e.tplHTTP != nil {
			// After the calls ended (interrupt cancelled them): otherwise each session,
			// test or one-off discovery would leave its connections open for the
			// transport's IdleConnTimeout.
			e.tplHTTP.CloseIdleConnections()
		}
	})
}

// groupKillHook, set by tests, is called as a stdio server's group is killed.
var groupKillHook func(pid int)

// killGroup kills process group pgid; ESRCH (already gone) is fine.
func killGroup(pgid int) {
	if groupKillHook != nil {
		groupKillHook(pgid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// endRequests ends the HTTP requests in flight to the server and refuses new ones.
func (e *endpoint) endRequests() {
	if e.endHTTP != nil {
		e.endHTTP()
	}
}

// exitDescription says how a stdio server ended, for the status message.
func (e *endpoint) exitDescription() string {
	if e.cmd == nil || e.cmd.ProcessState == nil {
		return ""
	}
	return e.cmd.ProcessState.String()
}

// sameOrigin refuses redirects to another scheme, host or port: headerTransport adds the
// stored credentials to every request, and they must only go where the admin sent them.
func sameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("mcpclient: refused a redirect from %s to %s: the server's credentials would go to another origin; register the final URL instead",
			first.Host, req.URL.Host)
	}
	if len(via) >= 10 {
		return errors.New("mcpclient: stopped after 10 redirects")
	}
	return nil
}

// headerTransport adds the configured headers (and authentication) to every request, and
// sends requests only to the registered origin: an SSE server names the endpoint for its
// messages itself, and must not be able to send the credentials and the tool calls
// somewhere else.
type headerTransport struct {
	base         http.RoundTripper
	headers      map[string]string
	scheme, host string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != t.scheme || r.URL.Host != t.host {
		return nil, fmt.Errorf("mcpclient: refused a request to %s://%s: the server asked for another origin than its registered %s://%s",
			r.URL.Scheme, r.URL.Host, t.scheme, t.host)
	}
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base transport.
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// lineBuffer keeps the last lines a stdio server wrote to standard error, bounded in
// lines and in line length, so a chatty server cannot grow Toolwarden's memory.
type lineBuffer struct {
	// redact hides secret values (a server echoing its token on an error must not put it
	// on a page).
	redact   func(string) string
	mu       sync.Mutex
	lines    []string
	partial  []byte
	maxLines int
	maxLine  int
}

func newLineBuffer(maxLines, maxLine int) *lineBuffer {
	return &lineBuffer{maxLines: maxLines, maxLine: maxLine}
}

// setRedact masks what is written from now on with f. An unfinished last line (the
// old process wrote no newline) is finished first, masked as before: the new masker
// may not know the old secrets it holds, and the next process's first line must not
// be glued onto it.
func (b *lineBuffer) setRedact(f func(string) string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.partial) > 0 {
		b.push(string(b.partial))
		b.partial = b.partial[:0]
	}
	b.redact = f
}

// secretSlack is how much of a line past maxLine is kept until it is masked: a secret
// that begins before the cut is masked whole, then the line is cut, so no part of it
// shows (a secret longer than this may still show its start).
const secretSlack = 4096

// Write implements io.Writer.
func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rest := p
	keep := b.maxLine + secretSlack
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			room := keep - len(b.partial)
			if room > 0 {
				b.partial = append(b.partial, rest[:min(room, len(rest))]...)
			}
			break
		}
		room := keep - len(b.partial)
		if room > 0 {
			b.partial = append(b.partial, rest[:min(room, i)]...)
		}
		b.push(string(b.partial))
		b.partial = b.partial[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (b *lineBuffer) push(line string) {
	if len(b.lines) == b.maxLines {
		copy(b.lines, b.lines[1:])
		b.lines = b.lines[:len(b.lines)-1]
	}
	b.lines = append(b.lines, b.shown(line))
}

// shown is a line as it is kept and shown: masked first, then cut to maxLine.
func (b *lineBuffer) shown(line string) string {
	line = strings.TrimRight(line, "\r")
	if b.redact != nil {
		line = b.redact(line)
	}
	if len(line) > b.maxLine {
		line = line[:b.maxLine]
	}
	return strings.ToValidUTF8(line, "\uFFFD")
}

// note adds a line of Toolwarden's own about the server: prefix, then text (what the
// server sent, at most strayKeep bytes of it) masked and cut to strayShown, on one
// line; cut says text was only the start.
func (b *lineBuffer) note(prefix string, text []byte, cut bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.NewReplacer("\r", " ", "\n", " ").Replace(string(text))
	if b.redact != nil {
		s = b.redact(s)
	}
	s = textcheck.Clip(s, strayShown, registry.CutMark)
	if cut && !strings.HasSuffix(s, registry.CutMark) {
		s += registry.CutMark
	}
	b.push(prefix + s)
}

// Lines returns the kept lines, oldest first, including an unfinished last line.
func (b *lineBuffer) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.lines)
	if len(b.partial) > 0 {
		out = append(out, b.shown(string(b.partial))) // masked and cut as a finished line is
	}
	return out
}

// Last returns the last non-empty line, or "".
func (b *lineBuffer) Last() string {
	lines := b.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return ""
}

// maskerOf masks the secret values of c (the bearer token, and each environment
// variable or header whose name or value looks like a credential) wherever what the
// server says is shown or stored. Every value is stored encrypted, but masking
// NODE_ENV=production or Accept: application/json everywhere would garble every
// result of the server without hiding anything worth a secret.
func maskerOf(c registry.Connection) *secrets.Masker {
	vals := []string{c.AuthToken}
	for _, m := range []map[string]string{c.Env, c.Headers} {
		for k, v := range m {
			if secrets.LooksSecretName(k) || secrets.LooksSecretValue(v) {
				vals = append(vals, v)
			}
		}
	}
	return secrets.NewMasker(vals...)
}

// redactor is maskerOf as a function of text.
func redactor(c registry.Connection) func(string) string { return maskerOf(c).String }

// connect opens a session over ep within timeout. The context given to the SDK lives as
// long as the session (the SSE transport ties its stream to it); the timeout cancels it
// only if initialization has not finished in time.
func connect(ctx context.Context, client *mcp.Client, ep *endpoint, timeout time.Duration) (*mcp.ClientSession, context.CancelFunc, error) {
	sctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(timeout, cancel)
	// An attempt given up ends its HTTP requests at once: on failure the SDK closes the
	// session, which waits for its notice of the cancelled initialize, and that waits
	// up to 5 s for a server that does not answer.
	abort := context.AfterFunc(sctx, ep.endRequests)
	sess, err := client.Connect(sctx, ep.transport, nil)
	// The timer is stopped first: once it fired, sctx is cancelled (or about to be, its
	// function runs on a goroutine of its own), so a session that connected meanwhile
	// would live on a cancelled context, its SSE stream ended at once.
	expired := !timer.Stop()
	if (!abort() || expired) && err == nil {
		// Given up just as it connected, so it cannot be used. Its context and requests
		// are ended here, as an attempt given up is: the timer's cancel and abort's
		// endRequests run on goroutines of their own, and may not have yet.
		cancel()
		ep.endRequests()
		_ = sess.Close()
		err = sctx.Err()
	}
	if err != nil {
		cancel()
		ep.cleanup()
		if expired {
			return nil, nil, fmt.Errorf("no answer to initialize within %s: %w", timeout, ErrTimeout)
		}
		return nil, nil, describeConnectError(err, ep)
	}
	return sess, cancel, nil
}

// ErrTimeout marks a server that did not answer in time.
var ErrTimeout = errors.New("timed out")

// describeConnectError turns transport errors into messages that say what to fix.
func describeConnectError(err error, ep *endpoint) error {
	msg := err.Error()
	var execErr *exec.Error
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &execErr):
		return fmt.Errorf("cannot start %q: %v (check the command and PATH)", execErr.Name, execErr.Err)
	case errors.As(err, &pathErr) && strings.HasPrefix(pathErr.Op, "fork/exec"):
		return fmt.Errorf("cannot start %q: %v (check the command, its permissions and the working directory)", pathErr.Path, pathErr.Err)
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused"):
		return fmt.Errorf("connection refused: nothing is listening at that address (%w)", err)
	case ep.http != nil && !errors.As(err, new(*jsonrpc.Error)) && !strings.Contains(msg, "failed to write") &&
		(strings.HasSuffix(msg, "Not Found") || strings.HasSuffix(msg, "Method Not Allowed")):
		// The URL typed answered 404 or 405 with no MCP error of its own (an SSE
		// server's messages endpoint, which it chose itself, is not the URL's fault).
		_, sse := ep.transport.(*mcp.SSEClientTransport)
		hint := "a Streamable HTTP server's endpoint is often /mcp; if this is an SSE server (an endpoint like /sse), choose the SSE type"
		if sse {
			hint = "an SSE server's endpoint is often /sse; if this is a Streamable HTTP server (an endpoint like /mcp), choose that type"
		}
		status := "404 Not Found"
		if strings.HasSuffix(msg, "Method Not Allowed") {
			status = "405 Method Not Allowed"
		}
		return fmt.Errorf("the server answered %s at that URL: check its path and type (%s): %w", status, hint, err)
	case ep.stderr != nil:
		if last := ep.stderr.Last(); last != "" {
			return fmt.Errorf("%w (last stderr line: %s)", err, last)
		}
	}
	return err
}
