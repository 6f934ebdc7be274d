package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// forwardFixture is a server with a live tool mt__echo, its admin signed in, the tool's
// id, and a loopback listener for another replica's address.
func forwardFixture(t *testing.T, opts *webtest.Options) (*webtest.Server, *http.Client, string, net.Listener) {
	t.Helper()
	srv := webtest.Start(t, opts)
	liveServer(t, srv, "mt", true, "echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return srv, admin, toolID(t, srv, "mt__echo"), ln
}

// otherReplica records a live replica at address, seen every second while the test
// runs, and a terminal of conversation conv-x on it, term; it returns the replica's id.
func otherReplica(t *testing.T, srv *webtest.Server, name, address, term string) string {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO replicas (id, name, address, host, pid) VALUES ($1, $2, $3, 'elsewhere', 1)`, id, name, address); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
		VALUES ($1, $2, $3, 'pty', 'conv-x', '/tmp', now())`, term, id, name); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
				_, _ = srv.Pool.Exec(ctx, `UPDATE replicas SET seen_at = now() WHERE id = $1`, id)
			}
		}
	}()
	return id
}

// answer is what one request got: the client's own error when none came (its 30 s
// timeout: the forward hung).
type answer struct {
	code   int
	header http.Header
	body   string
	err    error
}

func ask(srv *webtest.Server, c *http.Client, method, path string) answer {
	var rd io.Reader
	if method == http.MethodPost {
		rd = strings.NewReader(url.Values{"x": {"1"}}.Encode())
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("HX-Request", "true")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	res, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{code: res.StatusCode, header: res.Header, body: string(b)}
}

// terminalOp runs operation op of terminal_operations on session term as conversation
// conv-x does, and returns the result's text.
func terminalOp(t *testing.T, srv *webtest.Server, op, term string) string {
	t.Helper()
	for _, o := range builtin.TerminalTool(srv.App.Terminals).Operations {
		if o.Name != op {
			continue
		}
		args, _ := json.Marshal(map[string]any{"sessionId": term})
		res, err := o.Run(context.Background(), builtin.Call{Meta: callmeta.Meta{ConversationID: "conv-x"}}, args)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	t.Fatalf("terminal_operations has no operation %s", op)
	return ""
}

// An owner that takes the connection and never answers (a paused process) makes a
// forwarded request fail in a few seconds, not hang: the terminal page and Cancel
// answer 502, a poll of the run is answered here (the run is over for the page); none
// names the owner's address.
func TestForwardToAReplicaThatNeverAnswers(t *testing.T) {
	t.Parallel()
	srv, admin, tool, ln := forwardFixture(t, &webtest.Options{Builtin: true})
	var held sync.WaitGroup
	t.Cleanup(func() { ln.Close(); held.Wait() })
	held.Go(func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held, never answered
		}
	})
	address := ln.Addr().String()
	id := otherReplica(t, srv, "paused", "http://"+address, "term-held")
	call := uuid.NewString()
	asks := []struct {
		method, path string
		code         int
		want         string
	}{
		{http.MethodGet, "/terminals/term-held", http.StatusBadGateway, "did not answer"},
		{http.MethodGet, "/tools/" + tool + "/test/runs/" + call + "?replica=" + id, http.StatusOK, "This run is over and no longer kept"},
		{http.MethodPost, "/tools/" + tool + "/test/runs/" + call + "/cancel?replica=" + id, http.StatusBadGateway, "did not answer"},
	}
	got := make([]answer, len(asks))
	var wg sync.WaitGroup
	for i, a := range asks {
		wg.Go(func() { got[i] = ask(srv, admin, a.method, a.path) })
	}
	wg.Wait()
	for i, a := range asks {
		g := got[i]
		if g.err != nil || g.code != a.code || !strings.Contains(g.body, a.want) || strings.Contains(g.body, address) {
			t.Errorf("%s %s, its replica never answering: %d %q (%v); want %d saying %q, without the address %s",
				a.method, a.path, g.code, g.body, g.err, a.code, a.want, address)
		}
	}
}

// Cancel of a run whose replica cannot be reached does not say the run is over (it may
// go on there): 502, try again. The terminal tool's result and the terminal page say
// the replica did not answer without its address or the transport's error; a replica
// whose address another process answers at is not blamed on the configuration only.
func TestUnreachableReplicaAnswers(t *testing.T) {
	t.Parallel()
	srv, admin, tool, ln := forwardFixture(t, &webtest.Options{Builtin: true})
	address := ln.Addr().String()
	ln.Close()
	id := otherReplica(t, srv, "refusing", "http://"+address, "term-refused")
	otherReplica(t, srv, "restarted", srv.URL, "term-restarted")

	a := ask(srv, admin, http.MethodPost, "/tools/"+tool+"/test/runs/"+uuid.NewString()+"/cancel?replica="+id)
	if a.err != nil || a.code != http.StatusBadGateway || !strings.Contains(a.body, "did not answer") ||
		!strings.Contains(a.body, "try again") || strings.Contains(a.body, "no longer kept") || strings.Contains(a.body, address) {
		t.Errorf("Cancel of a run whose replica refuses connections: %d %q (%v); want 502 saying to try again", a.code, a.body, a.err)
	}
	a = ask(srv, admin, http.MethodGet, "/terminals/term-refused")
	if a.err != nil || a.code != http.StatusBadGateway || !strings.Contains(a.body, "did not answer") || strings.Contains(a.body, address) {
		t.Errorf("the page of a terminal whose replica refuses connections: %d %q (%v)", a.code, a.body, a.err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	a = ask(srv, admin, http.MethodGet, "/terminals/term-restarted")
	if a.err != nil || a.code != http.StatusBadGateway || !strings.Contains(a.body, "possibly a restart") || strings.Contains(a.body, host) {
		t.Errorf("the page of a terminal whose replica's address another process answers at: %d %q (%v)", a.code, a.body, a.err)
	}
	for _, term := range []string{"term-refused", "term-restarted"} {
		if text := terminalOp(t, srv, "get_output", term); !strings.Contains(text, "did not answer") ||
			strings.Contains(text, address) || strings.Contains(text, host) || strings.Contains(text, "dial tcp") {
			t.Errorf("get_output of %s: %q; want that its replica did not answer, without addresses or transport errors", term, text)
		}
	}
}

// Replicas reach each other directly, never through the environment's proxy
// (HTTP_PROXY), which would get people's cookies and signed hops in clear text: with
// one set that does not answer, a terminal's page and operations still reach its
// replica. The default transport reads the environment once per process, so the test
// runs again in a process of its own that has HTTP_PROXY from its start.
func TestForwardIgnoresTheProxyOfTheEnvironment(t *testing.T) {
	t.Parallel()
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("no address but the loopback, which is never proxied")
	}
	if os.Getenv("TW_TEST_PROXY_CHILD") == "" {
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		proxy := "http://" + closed.Addr().String()
		closed.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestForwardIgnoresTheProxyOfTheEnvironment$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "TW_TEST_PROXY_CHILD=1", "HTTP_PROXY="+proxy, "http_proxy="+proxy,
			"HTTPS_PROXY="+proxy, "https_proxy="+proxy, "NO_PROXY=", "no_proxy=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("with HTTP_PROXY=%s: %v\n%s", proxy, err, out)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("skipped with HTTP_PROXY set:\n%s", out)
		}
		return
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("listen on %s: %v", ip, err)
	}
	owner := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/op") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"answered by the owner"}]}`)
			return
		}
		_, _ = io.WriteString(w, "answered by the owner")
	})}
	go func() { _ = owner.Serve(ln) }()
	t.Cleanup(func() { owner.Close() })

	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	otherReplica(t, srv, "direct", "http://"+ln.Addr().String(), "term-direct")
	if a := ask(srv, admin, http.MethodGet, "/terminals/term-direct"); a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "answered by the owner") {
		t.Errorf("a terminal's page with HTTP_PROXY set to a closed port: %d %q (%v); want the owner's answer", a.code, a.body, a.err)
	}
	if text := terminalOp(t, srv, "get_output", "term-direct"); text != "answered by the owner" {
		t.Errorf("get_output with HTTP_PROXY set to a closed port: %q; want the owner's answer", text)
	}
}

// Right after this replica's own heartbeats were interrupted every replica looks
// stopped: a terminal or run whose replica looks gone then is answered 503 (try again
// soon), not taken for ended; once the heartbeats are steady again it is.
func TestOwnerLooksGoneWhileNotSteady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	liveServer(t, srv, "mt", true, "echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	tool := toolID(t, srv, "mt__echo")
	dead := uuid.NewString()
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
		VALUES ('term-unseen', $1, 'unseen', 'pty', 'conv-x', '/tmp', now())`, dead); err != nil {
		t.Fatal(err)
	}
	// Heartbeats fail while the table is away.
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE replicas RENAME TO replicas_away`); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 20*time.Second, func() bool { return !srv.App.Replicas.Steady() }, "heartbeats kept steady without their table")
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE replicas_away RENAME TO replicas`); err != nil {
		t.Fatal(err)
	}
	poll := "/tools/" + tool + "/test/runs/" + uuid.NewString() + "?replica=" + dead
	page, run := ask(srv, admin, http.MethodGet, "/terminals/term-unseen"), ask(srv, admin, http.MethodGet, poll)
	op := terminalOp(t, srv, "get_output", "term-unseen")
	if srv.App.Replicas.Steady() {
		t.Skip("steady again before the answers came (a machine slower than DeadAfter)")
	}
	for what, a := range map[string]answer{"the terminal's page": page, "a poll of the run": run} {
		if a.err != nil || a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
			t.Errorf("%s while not steady: %d %q (%v), Retry-After %q; want 503 with Retry-After", what, a.code, a.body, a.err, a.header.Get("Retry-After"))
		}
	}
	if strings.Contains(op, "which stopped") || !strings.Contains(op, "try again") {
		t.Errorf("get_output while not steady: %q; want try again, not that the replica stopped", op)
	}

	webtest.WaitFor(t, 30*time.Second, srv.App.Replicas.Steady, "heartbeats never steady again")
	if a := ask(srv, admin, http.MethodGet, "/terminals/term-unseen"); a.code != http.StatusGone {
		t.Errorf("the terminal's page once steady: %d %q (%v); want 410", a.code, a.body, a.err)
	}
	if a := ask(srv, admin, http.MethodGet, poll); a.code != http.StatusOK || !strings.Contains(a.body, "no longer kept") {
		t.Errorf("a poll of the run once steady: %d %q (%v); want that it is over", a.code, a.body, a.err)
	}
}
