package gateway_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// streamWatch is a real client's HTTP transport that adds the API token and tells when
// each GET stream it opened (answered 200) ends.
type streamWatch struct {
	token  string
	opened chan (<-chan struct{})
}

func (s *streamWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || res.StatusCode != http.StatusOK {
		return res, err
	}
	b := &watchedBody{ReadCloser: res.Body, ended: make(chan struct{})}
	res.Body = b
	select {
	case s.opened <- b.ended:
	default:
	}
	return res, nil
}

// watchedBody closes ended when its stream ends (read to its end, failed or closed).
type watchedBody struct {
	io.ReadCloser
	once  sync.Once
	ended chan struct{}
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(func() { close(b.ended) })
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.once.Do(func() { close(b.ended) })
	return b.ReadCloser.Close()
}

// A user whose role loses what a call through /mcp needs (tool_user made guest) loses
// their open streams too, not only their calls under way: a stateful session's GET
// stream and an SSE session's stream carried tools/list_changed and passed-through
// notifications to them until their token ended. A role change that takes nothing away
// leaves the streams open. The stateful client opens its stream again and sees what a
// guest sees.
func TestRoleLostEndsStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	tok := srv.Token(t, "tina")

	watch := &streamWatch{token: tok, opened: make(chan (<-chan struct{}), 8)}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: watch}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "role-test", Version: "1.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}).
		Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	sseWatch := &streamWatch{token: tok, opened: make(chan (<-chan struct{}), 8)}
	sse, err := mcp.NewClient(&mcp.Implementation{Name: "role-test-sse", Version: "1.0"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: srv.URL + "/sse", HTTPClient: &http.Client{Transport: sseWatch}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sse.Close() })
	first := func(w *streamWatch, what string) <-chan struct{} {
		select {
		case ended := <-w.opened:
			return ended
		case <-time.After(10 * time.Second):
			t.Fatalf("the client never opened its %s", what)
			return nil
		}
	}
	getEnded, sseEnded := first(watch, "GET stream"), first(sseWatch, "SSE stream")
	if got, _ := names(t, cs); !slices.Contains(got, "mt__echo") {
		t.Fatalf("tina's tools: %v", got)
	}
	streams := map[string]<-chan struct{}{"the GET stream": getEnded, "the SSE stream": sseEnded}

	// Nothing taken away: the streams stay.
	if _, err := srv.Auth.SetRole(ctx, audit.System, tina.ID, auth.RoleToolManager); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	for what, ch := range streams {
		select {
		case <-ch:
			t.Fatalf("%s ended on a role change that took nothing away", what)
		default:
		}
	}

	if _, err := srv.Auth.SetRole(ctx, audit.System, tina.ID, auth.RoleGuest); err != nil {
		t.Fatal(err)
	}
	for what, ch := range streams {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s outlived its user's loss of tool use (tool_user made guest)", what)
		}
	}
	// The stateful session goes on, as a guest, and its client opens its stream again.
	first(watch, "GET stream again")
	webtest.WaitFor(t, 10*time.Second, func() bool {
		got, _ := names(t, cs)
		return !slices.Contains(got, "mt__echo")
	}, "the session still lists a tool_user's tools to a guest")
}
