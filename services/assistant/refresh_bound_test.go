package assistant_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

const refreshAll = "Refresh the tools list from all servers"

// A refresh of more enabled servers than one message changes is refused before any is
// discovered, saying how to narrow it: each is a discovery of its own, one after the
// other, in one turn.
func TestRefreshTooManyServersRefused(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	var waited atomic.Int64
	assistant.OnConnectWait(a.Assistant, func(string) { waited.Add(1) })
	// Nothing listens there: each server is enabled and not connected, which a refresh
	// would try (and report) one by one.
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	for i := range assistant.MaxTargets + 1 {
		if _, err := a.Registry.CreateServer(t.Context(), audit.System, registry.Spec{Name: fmt.Sprintf("far-%03d", i),
			Type: registry.TypeStreamableHTTP, URL: dead, Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	c := newChat(t, a)
	r := c.say(refreshAll)
	if len(r.Actions) != 0 || waited.Load() != 0 {
		t.Errorf("%q: %d actions, %d servers asked: want none discovered (%q)", refreshAll, len(r.Actions), waited.Load(), r.Reply)
	}
	if !strings.Contains(r.Reply, fmt.Sprint(assistant.MaxTargets)) || !strings.Contains(r.Reply, "discover new tools on ") {
		t.Fatalf("%q: %q, want it refused, saying the bound and how to narrow it", refreshAll, r.Reply)
	}
	// The way to narrow it that the reply gives works.
	if r := c.say("discover new tools on far-007"); len(r.Actions) != 1 || r.Actions[0].Kind != "discover_tools" || strings.Contains(r.Reply, "at most") {
		t.Errorf("\"discover new tools on far-007\": %q %+v, want that server's discovery (tried)", r.Reply, r.Actions)
	}
}

// holdingProxy passes an MCP server's traffic through, except that while hold is set
// it keeps each tools/list until its client gives up (or 20 s): an upstream that
// connected and then stalls. With release set, a tools/list kept until release is
// closed then passes.
type holdingProxy struct {
	hold    atomic.Bool
	arrived chan struct{}
	release chan struct{}
}

func startHoldingProxy(t *testing.T, upstream string, hp *holdingProxy) string {
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rp.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if hp.hold.Load() && bytes.Contains(body, []byte(`"tools/list"`)) {
			select {
			case hp.arrived <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Second):
				return
			case <-hp.release: // nil (never) unless the test releases it
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // the client's event stream
		srv.Close()
	})
	return srv.URL + target.Path
}

const wait = 3 * time.Second // the tests' refreshWait

// slowAndQuick starts an assistant whose refreshes take at most wait, with the servers
// aa-quick and zz-slow, whose tools/list is held once it has connected.
func slowAndQuick(t *testing.T) (*apptest.App, *holdingProxy) {
	a := apptest.Start(t, nil)
	assistant.SetRefreshWait(a.Assistant, wait)
	a.LiveServer(t, "aa-quick", false)
	hp := &holdingProxy{arrived: make(chan struct{}, 1)}
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "zz-slow"})
	a.RegisterServer(t, registry.Spec{Name: "zz-slow", Type: registry.TypeStreamableHTTP, URL: startHoldingProxy(t, hs.URL(), hp), Enabled: true})
	a.ToolID(t, toolname.Join("zz-slow", "echo"))
	a.ToolID(t, toolname.Join("aa-quick", "echo"))
	hp.hold.Store(true)
	return a, hp
}

// A refresh has one deadline for all its servers, and the reply names those it had no
// time for. Its discoveries run before the conversation is locked: meanwhile the
// person's next message in the same conversation is answered, not left waiting on the
// row lock (nor a connection held idle in the turn's transaction).
func TestRefreshBoundedAndUnlocked(t *testing.T) {
	t.Parallel()
	a, hp := slowAndQuick(t)
	c := newChat(t, a)
	c.say("help") // the conversation exists
	type result struct {
		r   assistant.Reply
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		r, err := a.Assistant.Handle(context.Background(), c.p, c.p.Actor("", ""), c.conv, refreshAll, 0, 0)
		done <- result{r, err}
	}()
	select {
	case <-hp.arrived:
	case <-time.After(wait):
		t.Fatal("the refresh never asked zz-slow for its tools")
	}
	// The refresh is waiting on zz-slow: the conversation is not locked meanwhile.
	ctx, cancel := context.WithTimeout(t.Context(), wait/2)
	defer cancel()
	if _, err := a.Assistant.Handle(ctx, c.p, c.p.Actor("", ""), c.conv, "show me all servers", 0, 0); err != nil {
		t.Errorf("a message while the refresh waits on a server: %v, want it answered (the conversation not locked)", err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the refresh did not end")
	}
	took := time.Since(start)
	if res.err != nil {
		t.Fatalf("%q: %v", refreshAll, res.err)
	}
	if took > wait+5*time.Second {
		t.Errorf("%q took %s, want about its deadline %s", refreshAll, took, wait)
	}
	if !strings.Contains(res.r.Reply, "Not discovered within") || !strings.Contains(res.r.Reply, "zz-slow") {
		t.Errorf("%q: %q, want it to say zz-slow was not refreshed in time", refreshAll, res.r.Reply)
	}
	if !strings.Contains(res.r.Reply, "aa-quick: ") {
		t.Errorf("%q: %q, want aa-quick's counts", refreshAll, res.r.Reply)
	}
	for _, act := range res.r.Actions {
		if act.Name == "zz-slow" && act.OK {
			t.Errorf("zz-slow reported refreshed: %+v", act)
		}
	}
}

// Discovering several servers named in one message ("discover them all" after a list)
// has the refresh's one deadline too, and names the servers it had no time for.
func TestDiscoverSeveralBounded(t *testing.T) {
	t.Parallel()
	a, _ := slowAndQuick(t)
	c := newChat(t, a)
	c.say("show me all servers")
	start := time.Now()
	r := c.say("discover them all")
	if took := time.Since(start); took > wait+5*time.Second {
		t.Errorf("\"discover them all\" took %s, want about its deadline %s", took, wait)
	}
	if !strings.Contains(r.Reply, "Not discovered within") || !strings.Contains(r.Reply, "zz-slow") || !strings.Contains(r.Reply, "aa-quick: ") {
		t.Errorf("\"discover them all\": %q, want aa-quick's counts and zz-slow not discovered in time", r.Reply)
	}
}
