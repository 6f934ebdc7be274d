package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// farOwner is another replica, alive while the test runs, that answers the terminal
// operations sent to it with answer; it returns how many reached it.
func farOwner(t *testing.T, a *apptest.App, answer http.HandlerFunc, terms ...string) *atomic.Int64 {
	t.Helper()
	ctx := context.Background()
	var hits atomic.Int64
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		answer(w, r)
	}))
	t.Cleanup(owner.Close)
	id := uuid.NewString()
	if _, err := a.Pool.Exec(ctx, `INSERT INTO replicas (id, name, address, host, pid) VALUES ($1, 'far', $2, 'elsewhere', 1)`, id, owner.URL); err != nil {
		t.Fatal(err)
	}
	for _, term := range terms {
		if _, err := a.Pool.Exec(ctx, `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
			VALUES ($1, $2, 'far', 'pty', 'conv-x', '/tmp', now())`, term, id); err != nil {
			t.Fatal(err)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
				_, _ = a.Pool.Exec(ctx, `UPDATE replicas SET seen_at = now() WHERE id = $1`, id)
			}
		}
	}()
	return &hits
}

// farOp runs get_output on session term as user u1 of conversation conv-x does, and
// returns the result's text.
func farOp(t *testing.T, a *apptest.App, term string) string {
	t.Helper()
	return farOpRun(t, a, "get_output", `{"sessionId":"`+term+`"}`)
}

// farOpRun runs operation op with args as user u1 of conversation conv-x does, and
// returns the result's text.
func farOpRun(t *testing.T, a *apptest.App, op, args string) string {
	t.Helper()
	for _, o := range builtin.TerminalTool(a.Terminals).Operations {
		if o.Name != op {
			continue
		}
		c := builtin.Call{}
		c.ConversationID, c.UserID, c.UserName = "conv-x", "u1", "carol"
		res, err := o.Run(context.Background(), c, json.RawMessage(args))
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
	t.Fatalf("terminal_operations has no %s", op)
	return ""
}

// Input the owner refused before running it (its hop store full: 503) may be sent again
// as it is; input whose answer did not come back (a proxy's 504) may have been typed,
// and the agent is told to look first.
func TestTerminalInputRefusedOrLost(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{Builtin: true})
	farOwner(t, a, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "term-busy") {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"busy","message":"replica hop: too many forwarded requests; try again shortly"}}`))
			return
		}
		w.WriteHeader(http.StatusGatewayTimeout)
	}, "term-busy", "term-lost")
	if text := farOpRun(t, a, "send_input", `{"sessionId":"term-busy","input":"make deploy\n"}`); !strings.Contains(text, "which did not answer; try again") {
		t.Errorf("input the owner refused: %q", text)
	}
	if text := farOpRun(t, a, "send_input", `{"sessionId":"term-lost","input":"make deploy\n"}`); !strings.Contains(text, "may have run there") {
		t.Errorf("input whose answer was lost: %q", text)
	}
}

// The owner's 404 says the session is gone only when it is the owner's own "not here"
// answer: a 404 of a route the owner lacks (an earlier release, mid-upgrade) leaves
// the session as it is, the owner not answering.
func TestTerminalOpOwnerWithoutTheRoute(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{Builtin: true})
	farOwner(t, a, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		if strings.Contains(r.URL.Path, "term-forgot") {
			_, _ = w.Write([]byte(`{"error":{"code":"` + builtin.TerminalNotHereCode + `","message":"terminal not found"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"Not Found"}}`)) // Echo's, for a route it lacks
	}, "term-old", "term-forgot")
	if text := farOp(t, a, "term-old"); !strings.Contains(text, "runs on replica far, which did not answer") {
		t.Errorf("a session whose owner lacks the route: %q", text)
	}
	if text := farOp(t, a, "term-forgot"); !strings.Contains(text, "there is no session") {
		t.Errorf("a session its owner no longer holds: %q", text)
	}
}

// A person's operations on sessions of other replicas are limited (each takes one of
// the nonces the owner remembers, past which it refuses every hop): a flood is refused
// here, past a burst, without reaching the owner.
func TestTerminalOpsToOtherReplicasLimited(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{Builtin: true})
	hits := farOwner(t, a, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"content":[{"type":"text","text":"far output"}]}`))
	}, "term-far")
	const flood = 60
	limited := 0
	for range flood {
		text := farOp(t, a, "term-far")
		switch {
		case strings.Contains(text, "too many operations on sessions of other replicas"):
			limited++
		case !strings.Contains(text, "far output"):
			t.Fatalf("an operation sent to the owner: %q", text)
		}
	}
	if limited == 0 || hits.Load() > flood-int64(limited) || hits.Load() == 0 {
		t.Fatalf("%d operations at once: %d reached the owner, %d refused; want those past a burst refused", flood, hits.Load(), limited)
	}
}
