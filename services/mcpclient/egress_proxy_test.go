package mcpclient

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
	"golang.org/x/net/http/httpproxy"
)

// recordingProxy is a forward proxy on 127.0.0.2 that records the requests it is sent
// and forwards them (direct, never through a proxy of its own).
type recordingProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func startRecordingProxy(t *testing.T) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	rp := &recordingProxy{}
	fwd := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL }, // a forward proxy's request has the absolute URL
		Transport: &http.Transport{},
	}
	rp.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.mu.Lock()
		rp.seen = append(rp.seen, r.Method+" "+r.URL.String())
		rp.mu.Unlock()
		fwd.ServeHTTP(w, r)
	}))
	rp.srv.Listener.Close()
	rp.srv.Listener = ln
	rp.srv.Start()
	t.Cleanup(rp.srv.Close)
	return rp
}

func (rp *recordingProxy) take() []string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	s := rp.seen
	rp.seen = nil
	return s
}

// Through a forward proxy (the command line passes HTTP_PROXY's), the dialer only sees the proxy's address: an HTTP server's URL
// (as a session or "Test connection" opens it) and a template's HTTP tool are checked
// on their own host first. "LocalHost" goes through the proxy (net/http sends only
// "localhost" so written direct) and resolves here to 127.0.0.1, which the policy
// denies; the proxy, on 127.0.0.2, is allowed. Unrefused, the same URL reaches the
// server through the proxy.
func TestEgressThroughEnvironmentProxy(t *testing.T) {
	rp := startRecordingProxy(t)
	via := &httpproxy.Config{HTTPProxy: rp.srv.URL}
	// The SDK refuses a Host other than "localhost" on a loopback listener (DNS rebinding).
	echo := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(echo, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echo },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	t.Cleanup(up.Close)
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	target := "http://LocalHost:" + port
	deny, err := egress.Parse("", "127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	deny = deny.WithProxy(via)
	open := func(typ, url string, eg *egress.Policy) (*mcp.ClientSession, *endpoint, error) {
		lim, _ := testLimit(1 << 20)
		ep, err := newEndpoint(registry.Connection{Name: "px", Type: typ, URL: url, Template: url, Timeout: 10 * time.Second},
			nil, nil, newLineBuffer(10, 100), lim, template.Options{}, nil, eg)
		if err != nil {
			t.Fatal(err)
		}
		cs, cancel, err := connect(context.Background(), mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil), ep, 30*time.Second)
		if err == nil {
			t.Cleanup(func() {
				_ = cs.Close()
				cancel()
				ep.cleanup()
			})
		}
		return cs, ep, err
	}

	for _, typ := range []string{registry.TypeStreamableHTTP, registry.TypeSSE} {
		_, _, err := open(typ, target+"/mcp", deny)
		if !strings.Contains(fmt.Sprint(err), "the egress policy refuses localhost: an address it resolves to is on the deny list") {
			t.Errorf("%s server at %s with 127.0.0.1 denied: %v, want the egress refusal", typ, target, err)
		}
		if seen := rp.take(); len(seen) > 0 {
			t.Errorf("%s server refused: the proxy was sent %q", typ, seen)
		}
	}

	// Allowed, it goes through the proxy.
	cs, _, err := open(registry.TypeStreamableHTTP, target+"/mcp", (*egress.Policy)(nil).WithProxy(via))
	if err != nil {
		t.Fatalf("through the proxy, default policy: %v", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via proxy"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "via proxy" {
		t.Fatalf("echo through the proxy: %v, %v", res, err)
	}
	if seen := rp.take(); len(seen) == 0 || !strings.Contains(seen[0], "LocalHost:"+port) {
		t.Errorf("the proxy saw %q, want the session's requests", seen)
	}

	// A template's HTTP tool.
	yaml := `tools:
  - name: fetch
    http: {method: GET, url: "` + target + `/anything"}
`
	lim, _ := testLimit(1 << 20)
	ep, err := newEndpoint(registry.Connection{Name: "tpl", Type: registry.TypeTemplate, Template: yaml, Timeout: 10 * time.Second},
		nil, nil, newLineBuffer(10, 100), lim, template.Options{}, nil, deny)
	if err != nil {
		t.Fatal(err)
	}
	tcs, cancel, err := connect(context.Background(), mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil), ep, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tcs.Close()
		cancel()
		ep.cleanup()
	})
	res, err = tcs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetch", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(res.Content[0].(*mcp.TextContent).Text); !res.IsError || !strings.Contains(text, "the egress policy refuses localhost") {
		t.Errorf("template HTTP tool with 127.0.0.1 denied: %v %q, want the egress refusal", res.IsError, text)
	}
	if seen := rp.take(); len(seen) > 0 {
		t.Errorf("template HTTP tool refused: the proxy was sent %q", seen)
	}
}
