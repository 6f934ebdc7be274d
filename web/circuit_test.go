package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// A server's call circuit is visible on its page, in the API and in /metrics: open
// after the server dropped a call (one failure opens it here), closed again as soon as
// the server is back.
func TestCallCircuitVisible(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Router: &router.Options{BreakerFailures: 1, BreakerCooldown: time.Hour},
		MCP: &mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond, Debounce: 50 * time.Millisecond,
			// The circuit of connection attempts must not keep the server away meanwhile.
			BreakerFailures: 50, BreakerCooldown: time.Second}})
	// An HTTP server restarted behind the same session is noticed by the next health
	// check (every second here), whose success closes the circuit.
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "circ"})
	srv.RegisterServer(t, registry.Spec{Name: "circ", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Trusted: true, HealthIntervalMS: 1000}, "sleep", "echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	sv, err := srv.Registry.GetServerByName(context.Background(), "circ")
	if err != nil {
		t.Fatal(err)
	}
	state := func() (inAPI, onPage, metric string) {
		inAPI, metric = circuitState(t, srv, admin, sv.ID, "circ")
		doc := page(t, srv.Get(t, admin, "/servers/"+sv.ID))
		return inAPI, doc.Find("[data-testid=call-circuit]").AttrOr("data-state", ""), metric
	}
	if a, p, _ := state(); a != router.CircuitClosed || p != router.CircuitClosed {
		t.Fatalf("before any call: API %q, page %q; want closed", a, p)
	}
	time.AfterFunc(300*time.Millisecond, hs.Stop)
	code, body := api.Do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "circ__sleep", "arguments": map[string]any{"ms": 10000}})
	if code == http.StatusOK {
		t.Fatalf("a call the server dropped: got %d %s", code, body)
	}
	if a, p, m := state(); a != router.CircuitOpen || p != router.CircuitOpen || m != "2" {
		t.Fatalf("after the dropped call: API %q, page %q, metric %q; want open, open, 2", a, p, m)
	}
	hs.Restart()
	webtest.WaitFor(t, 30*time.Second, func() bool {
		a, p, m := state()
		return a == router.CircuitClosed && p == router.CircuitClosed && m == "0"
	}, "the circuit did not close when the server came back")
	code, body = api.Do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "circ__echo", "arguments": map[string]any{"message": "back"}})
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &res) != nil || len(res.Content) == 0 || res.Content[0].Text != "Echo: back" {
		t.Fatalf("the first call after the server came back: got %d %s", code, body)
	}
}

// The server page's Reconnect button closes an open call circuit: the session it opens
// resets the breaker, as an automatic reconnect does. Nothing else reconnects here (no
// health check within the test, an hour's backoff), so only the button can close it.
func TestReconnectButtonClosesCircuit(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Router: &router.Options{BreakerFailures: 1, BreakerCooldown: time.Hour},
		MCP: &mcpclient.Options{BackoffInitial: time.Hour, BackoffMax: time.Hour, Debounce: 50 * time.Millisecond,
			BreakerFailures: 50, BreakerCooldown: time.Second}})
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "recon"})
	srv.RegisterServer(t, registry.Spec{Name: "recon", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Trusted: true, HealthIntervalMS: 3_600_000}, "sleep", "echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	sv, err := srv.Registry.GetServerByName(context.Background(), "recon")
	if err != nil {
		t.Fatal(err)
	}
	state := func() (inAPI, metric string) { return circuitState(t, srv, admin, sv.ID, "recon") }
	// A call the server drops (it stops mid-call) opens the circuit.
	time.AfterFunc(300*time.Millisecond, hs.Stop)
	if code, body := api.Do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "recon__sleep", "arguments": map[string]any{"ms": 10000}}); code == http.StatusOK {
		t.Fatalf("a call the server dropped: got %d %s", code, body)
	}
	if a, m := state(); a != router.CircuitOpen || m != "2" {
		t.Fatalf("after the dropped call: API %q, metric %q; want open, 2", a, m)
	}
	hs.Restart()
	// Back, but nothing has reconnected: the circuit stays open.
	time.Sleep(time.Second)
	if a, m := state(); a != router.CircuitOpen || m != "2" {
		t.Fatalf("with the server back, before Reconnect: API %q, metric %q; want still open", a, m)
	}
	// Press Reconnect: the form on the server's page.
	form := page(t, srv.Get(t, admin, "/servers/"+sv.ID)).Find("[data-testid=reconnect-server]").Closest("form")
	action, ok := form.Attr("action")
	if !ok || strings.ToLower(form.AttrOr("method", "")) != "post" {
		t.Fatalf("the server page has no Reconnect form (action %q)", action)
	}
	res := srv.PostForm(t, admin, action, url.Values{})
	res.Body.Close()
	if res.StatusCode >= 400 {
		t.Fatalf("Reconnect: got %d", res.StatusCode)
	}
	webtest.WaitFor(t, 30*time.Second, func() bool {
		a, m := state()
		return a == router.CircuitClosed && m == "0"
	}, "Reconnect did not close the circuit")
	code, body := api.Do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "recon__echo", "arguments": map[string]any{"message": "back"}})
	if code != http.StatusOK || !strings.Contains(string(body), "Echo: back") {
		t.Fatalf("a call after Reconnect: got %d %s", code, body)
	}
}

// circuitState is a server's call circuit as the API says it and as /metrics counts it.
func circuitState(t *testing.T, srv *webtest.Server, c *http.Client, serverID, name string) (inAPI, metric string) {
	t.Helper()
	var out struct {
		Live struct {
			Circuit struct {
				State string `json:"state"`
			} `json:"call_circuit"`
		} `json:"live"`
	}
	webtest.API{T: t, Srv: srv, C: c}.JSON(http.MethodGet, "/api/v1/servers/"+serverID, nil, http.StatusOK, &out)
	res := srv.Get(t, c, "/metrics")
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, `toolwarden_server_circuit_state{server="`+name+`"`) {
			metric = l[strings.LastIndexByte(l, ' ')+1:]
		}
	}
	return out.Live.Circuit.State, metric
}

// A server registered after Toolwarden started, which no call has reached yet, has its
// call circuit closed since its registration, not since the process started.
func TestCircuitSinceRegistration(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	time.Sleep(20 * time.Millisecond) // the router's start is before the registration
	sv, err := srv.Registry.CreateServer(context.Background(), audit.System, registry.Spec{Name: "late", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:9/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Live struct {
			Circuit struct {
				State string    `json:"state"`
				Since time.Time `json:"since"`
			} `json:"call_circuit"`
		} `json:"live"`
	}
	webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}.JSON(http.MethodGet, "/api/v1/servers/"+sv.ID, nil, http.StatusOK, &out)
	if c := out.Live.Circuit; c.State != "closed" || !c.Since.Equal(sv.CreatedAt.Truncate(time.Millisecond)) { // the API gives milliseconds
		t.Fatalf("call circuit %s since %s, want closed since the registration %s", c.State, c.Since, sv.CreatedAt)
	}
}
