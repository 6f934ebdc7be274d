package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http/httpproxy"
)

// forwardProxy is a forward proxy that records the requests it is sent and answers
// them itself, connecting nowhere.
type forwardProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

// startProxy listens on addr ("127.0.0.2:0": an address apart from the one the
// targets resolve to, so that the dialer's check of the proxy's address passes).
func startProxy(t *testing.T, addr string) *forwardProxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	fp := &forwardProxy{}
	fp.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp.mu.Lock()
		fp.seen = append(fp.seen, r.Method+" "+r.URL.String())
		fp.mu.Unlock()
		_, _ = io.WriteString(w, "via proxy")
	}))
	fp.srv.Listener.Close()
	fp.srv.Listener = ln
	fp.srv.Start()
	t.Cleanup(fp.srv.Close)
	return fp
}

func (fp *forwardProxy) take() []string {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	s := fp.seen
	fp.seen = nil
	return s
}

// get sends GET url through a transport built as Transport builds it, with env.
func get(p *Policy, env *httpproxy.Config, url string) (string, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy, tr.DialContext = p.Proxy(env), p.DialContext
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// Through a forward proxy the dialer only sees the proxy's address: the request's own
// host is checked before it goes to the proxy, its name resolved here. "LocalHost"
// goes through the proxy (only "localhost" written so, and loopback addresses, are
// sent direct) and resolves here to 127.0.0.1, which is denied; the proxy, on
// 127.0.0.2, is not.
func TestProxiedRequestChecksTheTarget(t *testing.T) {
	t.Parallel()
	fp := startProxy(t, "127.0.0.2:0")
	env := &httpproxy.Config{HTTPProxy: fp.srv.URL, HTTPSProxy: fp.srv.URL}
	deny, err := Parse("", "127.0.0.1/32, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p      *Policy
		url    string
		refuse string // "" when the request goes through the proxy
	}{
		// A name resolving into a denied range; the refusal names the host, not the address.
		{deny, "http://LocalHost:1/mcp", "the egress policy refuses localhost: an address it resolves to is on the deny list"},
		{deny, "https://LocalHost:1/mcp", "the egress policy refuses localhost: an address it resolves to is on the deny list"},
		// Literal addresses the proxy would be sent (0.0.0.0 is not a loopback address to
		// the proxy chooser; it reaches this host).
		{deny, "http://0.0.0.0:1/", "refuses 127.0.0.1: it is on the deny list"},
		{nil, "http://169.254.169.254/latest/meta-data", "refuses 169.254.169.254: it is a cloud metadata address"},
		{nil, "http://[64:ff9b::a9fe:a9fe]/", "cloud metadata address"},
		// Names refused before they are resolved.
		{nil, "http://metadata.google.internal/computeMetadata/v1/", "refuses metadata.google.internal: it is a cloud metadata endpoint"},
		// Allowed: through the proxy.
		{nil, "http://LocalHost:1/mcp", ""},
		{deny, "http://192.0.2.10/mcp", ""},
	} {
		body, err := get(tc.p, env, tc.url)
		seen := fp.take()
		if tc.refuse != "" {
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.refuse) {
				t.Errorf("GET %s: %v, want the policy's refusal %q", tc.url, err, tc.refuse)
			}
			if strings.Contains(tc.url, "LocalHost") && strings.Contains(fmt.Sprint(err), "127.0.0.1") {
				t.Errorf("GET %s: %v names the address the host resolves to", tc.url, err)
			}
			if len(seen) > 0 {
				t.Errorf("GET %s: the proxy was sent %q", tc.url, seen)
			}
			continue
		}
		if err != nil || body != "via proxy" || len(seen) != 1 {
			t.Errorf("GET %s: %q, %v, proxy saw %q; want it through the proxy", tc.url, body, err, seen)
		}
	}

	// What NO_PROXY sends direct keeps the dialer's check.
	direct := &httpproxy.Config{HTTPProxy: fp.srv.URL, NoProxy: "localhost"}
	if _, err := get(deny, direct, "http://LocalHost:1/"); !strings.Contains(fmt.Sprint(err), "the egress policy refuses localhost") {
		t.Errorf("GET through NO_PROXY: %v, want the dialer's refusal", err)
	}
	if seen := fp.take(); len(seen) > 0 {
		t.Errorf("NO_PROXY: the proxy was sent %q", seen)
	}
}

// A name that does not resolve here (the proxy may resolve names this host cannot)
// goes through only when the metadata denial is the only rule its addresses face;
// with network rules set it is refused. A name resolving to a metadata address is
// refused whatever the rules (169.254.169.254.nip.io, resolved by a stub here).
func TestProxiedNameResolution(t *testing.T) {
	t.Parallel()
	fp := startProxy(t, "127.0.0.1:0")
	env := &httpproxy.Config{HTTPProxy: fp.srv.URL}
	stub := func(ctx context.Context, _, host string) ([]netip.Addr, error) {
		switch host {
		case "169.254.169.254.nip.io":
			return []netip.Addr{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("169.254.169.254")}, nil
		case "inside.corp.example":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "public.example.com":
			return []netip.Addr{netip.MustParseAddr("203.0.113.5")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	policy := func(allow, deny string) *Policy {
		p, err := Parse(allow, deny)
		if err != nil {
			t.Fatal(err)
		}
		p.lookup = stub
		return p
	}
	def := policy("", "")
	tenDenied := policy("", "10.0.0.0/8")
	// With an allow list, the proxy's own address must be on it.
	byName := policy("*.only-proxy.example, 127.0.0.1", "")
	nets := policy("203.0.113.0/24, 127.0.0.1", "")
	for _, tc := range []struct {
		p      *Policy
		url    string
		refuse string
	}{
		{def, "http://169.254.169.254.nip.io/latest/meta-data", "refuses 169.254.169.254.nip.io: an address it resolves to is a cloud metadata address"},
		{tenDenied, "http://inside.corp.example/", "refuses inside.corp.example: an address it resolves to is on the deny list"},
		{tenDenied, "http://public.example.com/", ""},
		{nets, "http://public.example.com/", ""},
		{nets, "http://inside.corp.example/", "not on the allow list"},
		// Not resolvable here.
		{def, "http://x.only-proxy.example/", ""},
		{byName, "http://x.only-proxy.example/", ""},
		{tenDenied, "http://x.only-proxy.example/", "its addresses cannot be checked"},
		{nets, "http://x.only-proxy.example/", "its addresses cannot be checked"},
	} {
		body, err := get(tc.p, env, tc.url)
		seen := fp.take()
		if tc.refuse != "" {
			if !strings.Contains(fmt.Sprint(err), tc.refuse) || len(seen) > 0 {
				t.Errorf("GET %s: %v, proxy saw %q; want refused (%q) and nothing sent", tc.url, err, seen, tc.refuse)
			}
			continue
		}
		if err != nil || body != "via proxy" || len(seen) != 1 {
			t.Errorf("GET %s: %q, %v, proxy saw %q; want it through the proxy", tc.url, body, err, seen)
		}
	}

	// The request's context bounds the lookup: a cancelled request is not let through.
	slow := policy("", "")
	slow.lookup = func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x.only-proxy.example/", nil)
	if u, err := slow.Proxy(env)(req); u != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: proxy %v, %v; want context.Canceled", u, err)
	}
}

// Transport sends requests through the proxies WithProxy gave it, checked, and warns
// once that names are resolved here; without WithProxy it goes direct, whatever the
// environment says (the command line reads the environment, once, and passes it in).
func TestTransportUsesTheGivenProxy(t *testing.T) {
	fp := startProxy(t, "127.0.0.2:0")
	t.Setenv("HTTP_PROXY", fp.srv.URL)
	t.Setenv("http_proxy", fp.srv.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	deny, err := Parse("", "127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	proxied := deny.WithProxy(&httpproxy.Config{HTTPProxy: fp.srv.URL})
	for range 2 {
		tr := proxied.Transport(log)
		_, err := (&http.Client{Transport: tr}).Get("http://LocalHost:1/")
		if !strings.Contains(fmt.Sprint(err), "the egress policy refuses localhost") {
			t.Errorf("GET through the proxy: %v, want refused", err)
		}
		tr.CloseIdleConnections()
	}
	if seen := fp.take(); len(seen) > 0 {
		t.Errorf("the proxy was sent %q", seen)
	}
	if n := strings.Count(logs.String(), "HTTP_PROXY/HTTPS_PROXY is set"); n != 1 {
		t.Errorf("warned %d times, want once: %s", n, logs)
	}

	// An allowed host goes through the given proxy, and direct without one ("LocalHost",
	// unlike "localhost" and loopback addresses, is one net/http sends to a proxy).
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "direct") }))
	t.Cleanup(up.Close)
	target := "http://LocalHost:" + up.URL[strings.LastIndex(up.URL, ":")+1:] + "/x"
	for _, c := range []struct {
		name string
		pol  *Policy
		via  bool
	}{{"given the proxy", (&Policy{}).WithProxy(&httpproxy.Config{HTTPProxy: fp.srv.URL}), true},
		{"nil policy given the proxy", (*Policy)(nil).WithProxy(&httpproxy.Config{HTTPProxy: fp.srv.URL}), true},
		{"no proxy given", &Policy{}, false}, {"nil policy", nil, false}} {
		tr := c.pol.Transport(nil)
		res, err := (&http.Client{Transport: tr}).Get(target)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_ = res.Body.Close()
		tr.CloseIdleConnections()
		if seen := fp.take(); (len(seen) > 0) != c.via {
			t.Errorf("%s: the proxy was sent %q, want through it %v", c.name, seen, c.via)
		}
	}
}
