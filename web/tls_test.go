package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// signIn posts the login form with extra headers and returns the answer's cookies and HSTS.
func signIn(t *testing.T, srv *webtest.Server, c *http.Client, base string, headers map[string]string) (map[string]*http.Cookie, string) {
	t.Helper()
	form := url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", res.StatusCode)
	}
	out := map[string]*http.Cookie{}
	for _, ck := range res.Cookies() {
		out[ck.Name] = ck
	}
	return out, res.Header.Get("Strict-Transport-Security")
}

// hostSession is the session cookie's name when it is Secure.
const hostSession = "__Host-tw_session"

// Cookies are Secure and HSTS is sent whenever the request came over TLS: directly, or
// through a trusted proxy whose X-Forwarded-Proto says https. The header from anyone
// else changes nothing.
func TestSecureCookiesAndHSTSOverTLS(t *testing.T) {
	t.Parallel()
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	https := "X-Forwarded-Proto"

	// Plain HTTP, no proxy named: the header is anyone's, so nothing changes.
	plain := webtest.Start(t, nil)
	ck, hsts := signIn(t, plain, plain.Client(t), plain.URL, map[string]string{https: "https"})
	if ck["tw_session"] == nil || ck["tw_session"].Secure || hsts != "" {
		t.Errorf("plain HTTP with a forged X-Forwarded-Proto: Secure=%v HSTS=%q, want neither", ck["tw_session"] != nil && ck["tw_session"].Secure, hsts)
	}

	// Behind a trusted proxy (the test client is on loopback).
	proxied := webtest.Start(t, &webtest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}})
	ck, hsts = signIn(t, proxied, proxied.Client(t), proxied.URL, map[string]string{https: "https"})
	if ck[hostSession] == nil || !ck[hostSession].Secure || ck[hostSession].Path != "/" || ck[hostSession].Domain != "" || !strings.Contains(hsts, "max-age=") {
		t.Errorf("trusted proxy over https: session cookie %+v, HSTS %q; want Secure and HSTS", ck[hostSession], hsts)
	}
	ck, hsts = signIn(t, proxied, proxied.Client(t), proxied.URL, map[string]string{https: "http"})
	if ck["tw_session"] == nil || ck["tw_session"].Secure || hsts != "" {
		t.Errorf("trusted proxy over http: Secure=%v HSTS=%q, want neither", ck["tw_session"] != nil && ck["tw_session"].Secure, hsts)
	}

	// Directly over TLS: the same App behind a TLS listener.
	tlsSrv := httptest.NewTLSServer(plain.Web)
	t.Cleanup(tlsSrv.Close)
	c := tlsSrv.Client()
	c.CheckRedirect = noRedirect
	ck, hsts = signIn(t, plain, c, tlsSrv.URL, nil)
	if ck[hostSession] == nil || !ck[hostSession].Secure || !strings.Contains(hsts, "max-age=") {
		t.Errorf("direct TLS: session cookie %+v, HSTS %q; want Secure and HSTS", ck[hostSession], hsts)
	}
	// Over TLS only the __Host- cookie is read: one without the prefix can be planted by
	// a sibling host under the same domain, to sign a person into the planter's account.
	for name, want := range map[string]int{hostSession: http.StatusOK, "tw_session": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodGet, tlsSrv.URL+"/api/v1/tokens", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: ck[hostSession].Value})
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("direct TLS, the session in a cookie named %s: %d, want %d", name, res.StatusCode, want)
		}
	}
	// The flash cookie of a page's form is Secure there too.
	res, err := c.Get(tlsSrv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("Strict-Transport-Security") == "" {
		t.Error("direct TLS: the sign-in page has no HSTS")
	}
}

// /mcp and /sse keep the SDK's DNS-rebinding protection: a loopback listener reached
// under another name is refused, from a trusted proxy too (a page rebound to 127.0.0.1
// would be a loopback peer as well); a proxy on this machine sends a loopback Host
// (docs/deploy.md), and that is served.
func TestMCPRebindingProtection(t *testing.T) {
	t.Parallel()
	call := func(srv *webtest.Server, path, host string) (int, string) {
		method, body := http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		if path == "/sse" {
			method, body = http.MethodGet, ""
		}
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+srv.Token(t, "admin"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			return res.StatusCode, "" // an SSE stream never ends: its status says enough
		}
		b := new(strings.Builder)
		_, _ = io.Copy(b, res.Body)
		return res.StatusCode, b.String()
	}
	proxied := webtest.Start(t, &webtest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}})
	for _, path := range []string{"/mcp", "/sse"} {
		if code, body := call(proxied, path, "tools.example.com"); code != http.StatusForbidden || !strings.Contains(body, "invalid Host header") {
			t.Errorf("%s under another name: %d %q; want 403 invalid Host header", path, code, body)
		}
	}
	if code, _ := call(proxied, "/mcp", "127.0.0.1:8080"); code == http.StatusForbidden {
		t.Errorf("/mcp with a loopback Host, as the documented proxies send: %d; want it served", code)
	}
}
