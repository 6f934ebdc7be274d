package handlers

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/http/httpguts"
)

// Origin is the scheme and host by which the client reached this server
// ("https://tw.example.com"), for the URLs a page hands out to be used elsewhere (the
// MCP endpoint on /tokens). It is the request's own, unless the request comes from one
// of the trusted proxies (--trusted-proxy, the ones whose X-Forwarded-For is believed):
// then their X-Forwarded-Proto and X-Forwarded-Host say what the client used. Those
// headers from anyone else are ignored.
func Origin(r *http.Request, proxies []netip.Prefix) string {
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if fromTrustedProxy(r, proxies) {
		if p := strings.ToLower(firstValue(r.Header.Get("X-Forwarded-Proto"))); p == "https" || p == "http" {
			scheme = p
		}
		if h := firstValue(r.Header.Get("X-Forwarded-Host")); h != "" && httpguts.ValidHostHeader(h) {
			host = h
		}
	}
	return scheme + "://" + host
}

// firstValue is the first of a header's comma-separated values: the one the proxy
// nearest the client set.
func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

func fromTrustedProxy(r *http.Request, proxies []netip.Prefix) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range proxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// secureKey marks a request that came over TLS (see MarkSecure).
const secureKey = "tw.secure"

// OverTLS reports whether the client reached this server over TLS: the connection
// is TLS itself, or it comes from one of the trusted proxies and their
// X-Forwarded-Proto says https. Such requests get Secure cookies and HSTS.
func OverTLS(r *http.Request, proxies []netip.Prefix) bool {
	return strings.HasPrefix(Origin(r, proxies), "https://")
}

// MarkSecure records on the request that it came over TLS (OverTLS), for the cookies
// the handlers set.
func MarkSecure(c echo.Context) { c.Set(secureKey, true) }

// secureCookie is whether a cookie set in answer to c gets the Secure flag: always with
// --secure-cookies, and whenever the request came over TLS.
func secureCookie(c echo.Context, always bool) bool {
	v, _ := c.Get(secureKey).(bool)
	return always || v
}
