package handlers

import (
	"context"
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
	if o, ok := r.Context().Value(forwardedOrigin{}).(string); ok && o != "" {
		return o
	}
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

// SessionCookieName is the session cookie's name in answer to c: with the __Host-
// prefix whenever the cookie is Secure, so that a browser refuses one planted by another
// host under the same domain (a sibling subdomain signing the victim into the planter's
// account); a cookie without the prefix is then not read either.
func SessionCookieName(c echo.Context, always bool) string {
	if secureCookie(c, always) {
		return "__Host-" + SessionCookie
	}
	return SessionCookie
}

type forwardedOrigin struct{}

// Forwarded is r as the replica that forwarded it served it (a verified replica hop):
// from client's address, reached at origin ("https://tw.example.com"), so what this
// replica records, and whether it answers as over TLS, are as if the client had asked
// it directly. Empty values leave r's own.
func Forwarded(r *http.Request, client, origin string) *http.Request {
	ctx := r.Context()
	if origin != "" {
		ctx = context.WithValue(ctx, forwardedOrigin{}, origin)
	}
	r = r.WithContext(ctx) // a copy, whatever changes
	if a, err := netip.ParseAddr(client); err == nil {
		r.RemoteAddr = netip.AddrPortFrom(a, 0).String()
	}
	return r
}
