package main

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The egress policy serve and import build carries the forward proxy the environment
// names when they start (HTTP_PROXY), so that an HTTP server's requests go through it,
// checked: the policy's package reads no environment itself.
func TestEgressPolicyTakesTheEnvironmentsProxy(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		_, _ = io.WriteString(w, "via proxy "+r.URL.Host)
	}))
	t.Cleanup(proxy.Close)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	policy := egressFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	p, err := policy()
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Transport(nil)
	defer tr.CloseIdleConnections()
	// "LocalHost" (not "localhost" or a loopback address) is a host net/http sends to a proxy.
	res, err := (&http.Client{Transport: tr}).Get("http://LocalHost:9/x")
	if err != nil {
		t.Fatalf("GET through HTTP_PROXY: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if proxied.Load() != 1 || !strings.Contains(string(b), "via proxy LocalHost:9") {
		t.Errorf("GET with HTTP_PROXY=%s: %q, proxy saw %d requests; want it through the proxy", proxy.URL, b, proxied.Load())
	}
}
