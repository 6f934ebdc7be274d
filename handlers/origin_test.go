package handlers

import (
	"crypto/tls"
	"net/http"
	"net/netip"
	"testing"
)

func TestOrigin(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	cases := []struct {
		name, peer string
		tls        bool
		headers    map[string]string
		want       string
	}{
		{"direct", "192.0.2.1:5000", false, nil, "http://tw.local:8080"},
		{"direct TLS", "192.0.2.1:5000", true, nil, "https://tw.local:8080"},
		{"forwarded headers from a stranger", "192.0.2.1:5000", false,
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"}, "http://tw.local:8080"},
		{"trusted proxy", "10.1.2.3:5000", false,
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "tw.example.com"}, "https://tw.example.com"},
		{"trusted proxy over IPv6", "[::1]:5000", false, map[string]string{"X-Forwarded-Proto": "HTTPS"}, "https://tw.local:8080"},
		{"trusted proxies in a chain: the client's side first", "10.1.2.3:5000", false,
			map[string]string{"X-Forwarded-Proto": "https, http", "X-Forwarded-Host": "tw.example.com, inner:8080"}, "https://tw.example.com"},
		{"an odd scheme is ignored", "10.1.2.3:5000", false, map[string]string{"X-Forwarded-Proto": "javascript"}, "http://tw.local:8080"},
		{"a host that is not one is ignored", "10.1.2.3:5000", false, map[string]string{"X-Forwarded-Host": "a b/<x>"}, "http://tw.local:8080"},
	}
	for _, c := range cases {
		r, _ := http.NewRequest(http.MethodGet, "http://tw.local:8080/tokens", nil)
		r.RemoteAddr = c.peer
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		if got := Origin(r, proxies); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
