package web_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

var testRunURL = regexp.MustCompile(`hx-get="(/servers/test/runs/[A-Za-z0-9]+(?:\?replica=[0-9a-f-]+)?)"`)

// settleTest follows a "Test connection" fragment: while it says the test is running
// it polls, as the page does, until the result comes.
func settleTest(t *testing.T, srv *webtest.Server, c *http.Client, frag string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(frag, `data-testid="test-running"`) {
		m := testRunURL.FindStringSubmatch(frag)
		if m == nil {
			t.Fatalf("a running test without its progress URL: %s", frag)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test never ended: %s", frag)
		}
		time.Sleep(100 * time.Millisecond)
		frag = bodyString(t, srv.Get(t, c, m[1]))
	}
	return frag
}

// hungServer accepts connections and never answers; it counts the connections open.
type hungServer struct {
	ln   net.Listener
	open atomic.Int64
	seen atomic.Int64
}

func startHung(t *testing.T) *hungServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hungServer{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.open.Add(1)
			h.seen.Add(1)
			go func() {
				// Read (and ignore) until the client goes away.
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
				h.open.Add(-1)
			}()
		}
	}()
	return h
}

func (h *hungServer) url() string { return "http://" + h.ln.Addr().String() + "/mcp" }

// "Test connection" against a server that accepts and never answers: bounded by the
// test limit (not the server's 30 s timeout), with its progress shown while it runs;
// Cancel ends it at once, and so does a client that goes away (3 s, under the 5 s the
// SDK's notice of the cancelled initialize would hold a connection to it).
func TestConnectionTestOfAHungServer(t *testing.T) {
	t.Parallel()
	hung := startHung(t)
	// The API: bounded by the limit (here 2 s, 10 s by default), not by the server's
	// 30 s timeout, saying so.
	short := webtest.Start(t, &webtest.Options{MCP: &mcpclient.Options{TestTimeout: 2 * time.Second,
		BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond}})
	api := webtest.API{T: t, Srv: short, C: short.Login(t, "admin", webtest.AdminPassword)}
	start := time.Now()
	var out mcpclient.TestResult
	api.JSON(http.MethodPost, "/api/v1/servers/test", map[string]any{"name": "hung", "type": "streamable_http", "url": hung.url(),
		"timeout_ms": 30000}, http.StatusOK, &out)
	if out.OK || !strings.Contains(out.Error, "2s") {
		t.Fatalf("API test of a hung server: got %+v, want a failure naming the 2s limit", out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("API test of a hung server took %s, want about the 2s limit", took)
	}

	// The page: progress, then Cancel (a limit of a minute: the cancel ends it).
	srv := webtest.Start(t, &webtest.Options{MCP: &mcpclient.Options{TestTimeout: time.Minute,
		BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond}})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	tf := httpForm("hung", hung.url())
	// The server's own timeout as long as allowed, so only Cancel (or the minute) ends it.
	tf.Set("timeout_ms", strconv.Itoa(registry.MaxTimeoutMS))
	res := svPost(t, srv, admin, "/servers/test", tf, map[string]string{"HX-Request": "true"})
	frag := bodyString(t, res)
	m := testRunURL.FindStringSubmatch(frag)
	if !strings.Contains(frag, `data-testid="test-running"`) || !strings.Contains(frag, `data-testid="test-cancel"`) || m == nil {
		t.Fatalf("htmx test of a hung server: got %s, want a running test with progress and Cancel", frag)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		frag = bodyString(t, srv.Get(t, admin, m[1]))
		return strings.Contains(frag, mcpclient.StepConnecting) && hung.open.Load() > 0
	}, "the progress never said it was connecting")
	// Someone else cannot see it.
	other := srv.CreateUser(t, "other-admin", auth.RoleAdmin, "other-admin-password")
	oc := srv.Login(t, other.Username, "other-admin-password")
	if f := bodyString(t, srv.Get(t, oc, m[1])); strings.Contains(f, "test-running") {
		t.Fatalf("another user sees the run: %s", f)
	}
	cancelURL := m[1] + "/cancel" // before the query naming the replica, if any
	if path, query, ok := strings.Cut(m[1], "?"); ok {
		cancelURL = path + "/cancel?" + query
	}
	res = svPost(t, srv, admin, cancelURL, url.Values{}, map[string]string{"HX-Request": "true"})
	frag = bodyString(t, res)
	if !strings.Contains(frag, `data-testid="test-failed"`) || !strings.Contains(frag, "cancelled") {
		t.Fatalf("after Cancel: got %s, want a failed test saying cancelled", frag)
	}
	webtest.WaitFor(t, 3*time.Second, func() bool { return hung.open.Load() == 0 }, "the cancelled test kept its connection to the server")

	// A page closed mid-test stops polling: the attempt is abandoned.
	seen := hung.seen.Load()
	res = svPost(t, srv, admin, "/servers/test", tf, map[string]string{"HX-Request": "true"})
	_ = bodyString(t, res)
	webtest.WaitFor(t, 5*time.Second, func() bool { return hung.seen.Load() > seen }, "the second test never connected")
	webtest.WaitFor(t, 15*time.Second, func() bool { return hung.open.Load() == 0 }, "an abandoned test kept its connection")

	// The API client that goes away ends its attempt too.
	seen = hung.seen.Load()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/servers/test",
		strings.NewReader(`{"name":"hung2","type":"streamable_http","url":"`+hung.url()+`"}`))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		res, err := admin.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	webtest.WaitFor(t, 5*time.Second, func() bool { return hung.seen.Load() > seen && hung.open.Load() > 0 }, "the API test never connected")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled request: got %v", err)
	}
	webtest.WaitFor(t, 3*time.Second, func() bool { return hung.open.Load() == 0 }, "a test whose client went away kept its connection")
}
