package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A client whose role loses tool use hears tools/list_changed although the role change
// ended its stream at once, before the change's list_changed went out: the stream it
// opens next is sent the one it missed, and the client, listing again, sees what a
// guest sees. A stateful session's client opens its GET stream again by itself; the
// go-sdk's 2026-07-28 client does not open a subscriptions/listen again once it ended,
// so the listen of a client that connects anew stands for it.
func TestRoleLostListChangedOnReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	tok := srv.Token(t, "tina")

	connect := func(era string) (*mcp.ClientSession, chan struct{}) {
		ch := make(chan struct{}, 10)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "owed-test", Version: era}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} }}).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok}}},
				&mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs, ch
	}
	heard := func(what string, ch chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no list_changed", what)
		}
	}
	cs, changed := connect(eras[0])
	_, changed26 := connect(eras[1])
	if got, _ := names(t, cs); !slices.Contains(got, "mt__echo") {
		t.Fatalf("tina's tools: %v", got)
	}
	// The streams are open once a change reaches both.
	srv.App.Enable(t, "mt__sleep")
	heard("a tool enabled, stateful", changed)
	heard("a tool enabled, 2026-07-28", changed26)
	time.Sleep(500 * time.Millisecond)
	for len(changed) > 0 {
		<-changed
	}

	if _, err := srv.Auth.SetRole(ctx, audit.System, tina.ID, auth.RoleGuest); err != nil {
		t.Fatal(err)
	}
	heard("tina's role lost tool use (her GET stream was ended and opened again)", changed)
	if got, _ := names(t, cs); slices.Contains(got, "mt__echo") {
		t.Fatalf("a guest is listed %v", got)
	}
	// Her 2026-07-28 listen was ended too: the next listen she opens is owed one. The
	// guest's client connects after the change's own list_changed has gone out.
	time.Sleep(time.Second)
	_, again := connect(eras[1])
	heard("tina's role lost tool use (her listen was ended; a new one opened)", again)
}
