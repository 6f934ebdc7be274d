package assistant_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/registry"
)

// "discover the tools on X" runs the discovery before the conversation is locked, as a
// refresh does: mcpclient gives a discovery ten minutes, and the person's next message
// in the same conversation is answered meanwhile, not left waiting on the row lock (nor
// a connection held idle in the turn's transaction). The reply is as it was.
func TestDiscoverOneUnlocked(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	gp := &holdingProxy{arrived: make(chan struct{}, 1), release: make(chan struct{})}
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "slow"})
	a.RegisterServer(t, registry.Spec{Name: "slow", Type: registry.TypeStreamableHTTP, URL: startHoldingProxy(t, hs.URL(), gp), Enabled: true})
	a.Settled(t, toolname.Join("slow", "echo"))
	released := false
	defer func() {
		if !released {
			close(gp.release)
		}
	}()
	c := newChat(t, a)
	c.say("help") // the conversation exists
	gp.hold.Store(true)

	type result struct {
		r   assistant.Reply
		err error
	}
	first := make(chan result, 1)
	go func() {
		r, err := a.Assistant.Handle(context.Background(), c.p, c.p.Actor("", ""), c.conv, "discover the tools on slow", 0, 0)
		first <- result{r, err}
	}()
	select {
	case <-gp.arrived:
	case r := <-first:
		t.Fatalf("the discovery ended without asking slow for its tools: %q %v", r.r.Reply, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the discovery never asked slow for its tools")
	}
	// The discovery waits on slow, and is let go only once the next message is
	// answered: locked meanwhile, the conversation would keep that message waiting
	// until the test gives up.
	second := make(chan result, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	go func() {
		r, err := a.Assistant.Handle(ctx, c.p, c.p.Actor("", ""), c.conv, "show me all servers", 0, 0)
		second <- result{r, err}
	}()
	res := <-second
	if res.err != nil {
		t.Fatalf("a message while the discovery waits on its server: %v, want it answered (the conversation not locked)", res.err)
	}
	if len(res.r.Choices) != 1 || !strings.Contains(res.r.Choices[0].Label, "slow") {
		t.Errorf("show me all servers: %q %+v, want slow listed", res.r.Reply, res.r.Choices)
	}
	select {
	case r := <-first:
		t.Fatalf("the discovery ended before it was let go: %q %v", r.r.Reply, r.err)
	default:
	}
	close(gp.release)
	released = true
	select {
	case res = <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the discovery did not end once let go")
	}
	if res.err != nil {
		t.Fatalf("discover the tools on slow: %v", res.err)
	}
	if !strings.HasPrefix(res.r.Reply, "I found ") || !strings.Contains(res.r.Reply, " tools on slow (0 new, 0 updated). Say ") ||
		len(res.r.Choices) == 0 || len(res.r.Actions) != 1 || !res.r.Actions[0].OK {
		t.Errorf("discover the tools on slow: %q %+v", res.r.Reply, res.r.Actions)
	}
	// Its list is the one "the first one" picks now.
	if r := c.say("tell me about the first one"); !strings.Contains(r.Reply, "slow") {
		t.Errorf("tell me about the first one: %q, want a tool of slow", r.Reply)
	}
}
