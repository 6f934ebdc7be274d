package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// numericForms are 169.254.169.254 as inet_aton (and so a proxy's getaddrinfo) reads
// it, in forms netip does not parse.
var numericForms = []string{
	"2852039166",          // one 32-bit number
	"0xa9.0xfe.0xa9.0xfe", // hexadecimal parts
	"0XA9FEA9FE",
	"0251.0376.0251.0376", // octal parts
	"169.254.43518",       // a.b.c, c 16 bits
	"169.16689662",        // a.b, b 24 bits
	"169.254.169.0xfe",
	"2852039166.", // with the root's dot
	"169.254.169.254..",
}

const numericWhy = "it is a numeric host name (an IPv4 address in another notation): write the address in dotted decimal"

// A host whose last label is a number is no name (no top-level domain is numeric): C
// resolvers read it as an IPv4 address, so it is refused at registration, by the
// dialer and before a proxy; an address with the root's dot is judged as the address.
func TestNumericHostsRefused(t *testing.T) {
	t.Parallel()
	def, err := Parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Policy{nil, def} {
		for _, h := range numericForms {
			u := "http://" + h + "/latest/meta-data"
			if got := p.CheckURL(u); !strings.Contains(got, "refuses "+strings.ToLower(h)+": "+numericWhy) {
				t.Errorf("CheckURL(%s) = %q, want the numeric-host refusal", u, got)
			}
			_, err := p.DialContext(context.Background(), "tcp", net.JoinHostPort(h, "80"))
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), numericWhy) {
				t.Errorf("DialContext(%s): %v, want the numeric-host refusal", h, err)
			}
		}
		if got := p.CheckURL("http://169.254.169.254./"); !strings.Contains(got, "refuses 169.254.169.254: it is a cloud metadata address") {
			t.Errorf("CheckURL with the root's dot = %q, want the metadata refusal", got)
		}
		// Names with digits, and a numeric label that is not the last, are names.
		for _, u := range []string{"http://a1.example.com/", "http://123.example.com/", "http://0x1.example/", "http://x.com./"} {
			if got := p.CheckURL(u); got != "" {
				t.Errorf("CheckURL(%s) = %q, want allowed", u, got)
			}
		}
	}
	// A rule written so would never match: refused when the policy is parsed.
	for _, rule := range []string{"10.1", "2852039166", "0x0a.0x01.0x02.0x03", "*.10"} {
		if _, err := Parse("", rule); err == nil || !strings.Contains(err.Error(), "numeric host name") {
			t.Errorf("Parse(deny %q): %v, want refused as a numeric host name", rule, err)
		}
		if _, err := Parse(rule, ""); err == nil {
			t.Errorf("Parse(allow %q): accepted", rule)
		}
	}
}

// Through a proxy, a numeric host is refused before the request goes to the proxy
// (Go's resolver does not resolve it, and with no network rules a name that does not
// resolve here would be let through, for the proxy's getaddrinfo to read as
// 169.254.169.254).
func TestNumericHostsRefusedBeforeTheProxy(t *testing.T) {
	t.Parallel()
	fp := startProxy(t, "127.0.0.1:0")
	env := &httpproxy.Config{HTTPProxy: fp.srv.URL}
	p, err := Parse("", "")
	if err != nil {
		t.Fatal(err)
	}
	p.lookup = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	for _, h := range numericForms {
		u := "http://" + h + "/latest/meta-data"
		_, err := get(p, env, u)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), numericWhy) {
			t.Errorf("GET %s: %v, want the numeric-host refusal", u, err)
		}
		if seen := fp.take(); len(seen) > 0 {
			t.Errorf("GET %s: the proxy was sent %q", u, seen)
		}
	}
	if _, err := get(p, env, "http://169.254.169.254./latest/meta-data"); !strings.Contains(fmt.Sprint(err), "refuses 169.254.169.254: it is a cloud metadata address") {
		t.Errorf("GET with the root's dot: %v, want the metadata refusal", err)
	}
	if _, err := get(p, env, "http://x.only-proxy.example/"); err != nil {
		t.Errorf("GET of a name only the proxy resolves: %v, want it through the proxy", err)
	}
	if seen := fp.take(); len(seen) != 1 {
		t.Errorf("the proxy was sent %q, want the one allowed request", seen)
	}
}

// Proxy keeps a name's verdict for verdictTTL: a second request within it does not look
// the name up again, one after it does; a refusal is kept too, a cancelled request's
// outcome is not.
func TestProxyCachesVerdicts(t *testing.T) {
	t.Parallel()
	env := &httpproxy.Config{HTTPProxy: "http://127.0.0.2:3128"}
	p, err := Parse("", "10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	p.lookup = func(ctx context.Context, _, host string) ([]netip.Addr, error) {
		mu.Lock()
		calls[host]++
		mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if host == "inside.corp.example" {
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("203.0.113.5")}, nil
	}
	lookups := func(host string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[host]
	}
	var clock atomic.Int64 // nanoseconds past start
	start := time.Now()
	p.now = func() time.Time { return start.Add(time.Duration(clock.Load())) }
	proxy := p.Proxy(env)
	ask := func(ctx context.Context, url string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		u, err := proxy(req)
		if err == nil && u == nil {
			t.Fatalf("%s: not sent through the proxy", url)
		}
		return err
	}
	bg := context.Background()

	for i := range 3 {
		if err := ask(bg, "http://public.example.com/mcp"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if err := ask(bg, "http://inside.corp.example/mcp"); !strings.Contains(fmt.Sprint(err), "deny list") {
			t.Fatalf("request %d to a denied name: %v", i, err)
		}
		clock.Add(int64(verdictTTL / 3))
	}
	if n, m := lookups("public.example.com"), lookups("inside.corp.example"); n != 1 || m != 1 {
		t.Errorf("within %v: %d and %d lookups, want 1 each", verdictTTL, n, m)
	}
	clock.Add(int64(verdictTTL))
	if err := ask(bg, "http://public.example.com/mcp"); err != nil {
		t.Fatal(err)
	}
	if n := lookups("public.example.com"); n != 2 {
		t.Errorf("after %v: %d lookups, want 2", verdictTTL, n)
	}

	// A cancelled request's outcome is not kept: the next request looks up again.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ask(ctx, "http://fresh.example.com/mcp"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	if err := ask(bg, "http://fresh.example.com/mcp"); err != nil {
		t.Fatal(err)
	}
	if err := ask(bg, "http://fresh.example.com/mcp"); err != nil {
		t.Fatal(err)
	}
	if n := lookups("fresh.example.com"); n != 2 {
		t.Errorf("after a cancelled request: %d lookups, want 2 (the cancelled one's and one after)", n)
	}

	// Concurrent requests (run with -race).
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = ask(bg, fmt.Sprintf("http://h%d.example.com/mcp", i%4))
		}()
	}
	wg.Wait()
}

// The cache holds at most verdictMax hosts: the expired are dropped first, and when
// all are fresh it starts again empty.
func TestVerdictsBounded(t *testing.T) {
	t.Parallel()
	var now time.Time
	c := newVerdicts(func() time.Time { return now })
	for i := range verdictMax {
		c.put(fmt.Sprint("h", i), nil)
	}
	now = now.Add(verdictTTL)
	c.put("fresh", nil)
	if len(c.m) != 1 {
		t.Errorf("after expiry: %d hosts kept, want 1", len(c.m))
	}
	for i := range verdictMax + 10 {
		c.put(fmt.Sprint("h", i), nil)
		if len(c.m) > verdictMax {
			t.Fatalf("%d hosts kept, want at most %d", len(c.m), verdictMax)
		}
	}
	if _, ok := c.get(fmt.Sprint("h", verdictMax+9)); !ok {
		t.Error("the newest host was not kept")
	}
	var none *verdicts
	none.put("x", nil)
	if _, ok := none.get("x"); ok {
		t.Error("a nil cache kept a verdict")
	}
}
