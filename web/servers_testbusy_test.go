package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
)

// A connection test that finds every slot taken did not run: the API answers 503
// tests_busy (not 200 ok:false, as if the server failed), and the page's background
// run says it did not run.
func TestConnectionTestBusy(t *testing.T) {
	t.Parallel()
	hung := startHung(t)
	srv := webtest.Start(t, &webtest.Options{MCP: &mcpclient.Options{MaxTests: 1, TestTimeout: time.Minute}})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	body := map[string]any{"name": "hung", "type": "streamable_http", "url": hung.url(), "timeout_ms": 60000}

	// The one slot: a test of the hung server, held until this test cancels its request.
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/servers/test", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	held := make(chan struct{})
	go func() {
		defer close(held)
		if res, err := admin.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	t.Cleanup(func() { cancel(); <-held })
	webtest.WaitFor(t, 10*time.Second, func() bool { return hung.seen.Load() > 0 }, "the first test never reached the hung server")

	e := api.Error(http.MethodPost, "/api/v1/servers/test", body, http.StatusServiceUnavailable, "tests_busy")
	if !strings.Contains(e.Error.Message, "too many connection tests") {
		t.Fatalf("busy API test: message %q, want it to say too many tests are running", e.Error.Message)
	}

	frag := settleTest(t, srv, admin, bodyString(t, svPost(t, srv, admin, "/servers/test", httpForm("hung", hung.url()), map[string]string{"HX-Request": "true"})))
	if !strings.Contains(frag, "did not run") || !strings.Contains(frag, "too many connection tests") ||
		!strings.Contains(frag, `data-testid="test-busy"`) || strings.Contains(frag, "Could not connect") {
		t.Fatalf("busy background test: got %s, want it to say the test did not run because too many are running", frag)
	}
	// The assistant says so too, not that it could not connect to the server.
	conv := ""
	r := asstSay(t, api, &conv, "add a new MCP server at "+hung.url()+" called later", "connection tests are running right now")
	if strings.Contains(r.Reply, "couldn't connect") {
		t.Errorf("busy assistant test: reply %q, want no word of the server failing", r.Reply)
	}
	if n := hung.seen.Load(); n != 1 {
		t.Fatalf("the hung server saw %d connections, want 1: a busy test must not reach it", n)
	}
}
