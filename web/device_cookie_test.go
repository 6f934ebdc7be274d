package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// postLogin posts the sign-in form for admin with the right password, sending cookies,
// and returns the answer's status, body and cookies by name.
func postLogin(t *testing.T, c *http.Client, base string, cookies ...*http.Cookie) (int, string, http.Header, map[string]*http.Cookie) {
	t.Helper()
	form := url.Values{"username": {"admin"}, "password": {webtest.AdminPassword}}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	out := map[string]*http.Cookie{}
	for _, ck := range res.Cookies() {
		out[ck.Name] = ck
	}
	return res.StatusCode, string(body), res.Header, out
}

// A sign-in gives the browser a device cookie (HttpOnly, SameSite=Lax, long-lived;
// Secure and __Host- over TLS); signing out keeps it; while guesses from many addresses
// have the account throttled, the sign-in form refuses a browser without it, saying
// why and what to do, and lets the one that sends it back in.
func TestDeviceCookie(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Auth: &auth.Options{MaxAccountFailuresAnywhere: 3}})
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirect}

	code, _, _, cks := postLogin(t, c, srv.URL)
	dev := cks["tw_device"]
	if code != http.StatusSeeOther || dev == nil {
		t.Fatalf("sign-in: %d, cookies %v; want 303 with tw_device", code, cks)
	}
	if !strings.HasPrefix(dev.Value, "twd_") || !dev.HttpOnly || dev.SameSite != http.SameSiteLaxMode || dev.Path != "/" || dev.Secure ||
		dev.MaxAge < 179*24*3600 || dev.Expires.Before(time.Now().Add(179*24*time.Hour)) {
		t.Errorf("device cookie over plain HTTP: %+v; want twd_, HttpOnly, SameSite=Lax, Path=/, not Secure, about 180 days", dev)
	}
	// Signing out ends the session, not the device cookie.
	session := cks["tw_session"]
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/logout", nil)
	req.Header.Set("Origin", srv.URL)
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "tw_device" {
			t.Errorf("sign-out set the device cookie: %+v", ck)
		}
	}

	// Guesses from many addresses bring admin to the limit.
	for i := range 3 {
		if _, err := srv.Pool.Exec(t.Context(), `INSERT INTO login_failures (username, ip) VALUES ('admin', $1)`, fmt.Sprintf("198.51.100.%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	code, page, hdr, cks := postLogin(t, c, srv.URL)
	if code != http.StatusTooManyRequests || !strings.Contains(page, "sign in from a browser that has signed in to it before") ||
		!strings.Contains(page, "UTC") || hdr.Get("Retry-After") == "" || cks["tw_session"] != nil {
		t.Errorf("sign-in without the device cookie during the attack: %d, Retry-After %q, cookies %v; want 429 saying what to do",
			code, hdr.Get("Retry-After"), cks)
	}
	// The browser that signed in before sends its cookie back and is let in; the cookie
	// is renewed, the same token.
	code, _, _, cks = postLogin(t, c, srv.URL, dev)
	if code != http.StatusSeeOther || cks["tw_session"] == nil || cks["tw_device"] == nil || cks["tw_device"].Value != dev.Value {
		t.Errorf("sign-in with the device cookie during the attack: %d, cookies %v; want 303 and the same device cookie renewed", code, cks)
	}

	// Over TLS it is Secure and __Host- prefixed, as the session cookie; one without the
	// prefix is not read there.
	if _, err := srv.Pool.Exec(t.Context(), `DELETE FROM login_failures`); err != nil {
		t.Fatal(err)
	}
	tlsSrv := httptest.NewTLSServer(srv.Web)
	t.Cleanup(tlsSrv.Close)
	tc := tlsSrv.Client()
	tc.CheckRedirect = noRedirect
	code, _, _, cks = postLogin(t, tc, tlsSrv.URL)
	hostDev := cks["__Host-tw_device"]
	if code != http.StatusSeeOther || hostDev == nil || !hostDev.Secure || !hostDev.HttpOnly || hostDev.SameSite != http.SameSiteLaxMode ||
		hostDev.Path != "/" || hostDev.Domain != "" {
		t.Fatalf("device cookie over TLS: %d, %+v; want __Host-tw_device, Secure, HttpOnly, SameSite=Lax, Path=/", code, hostDev)
	}
	for i := range 3 {
		if _, err := srv.Pool.Exec(t.Context(), `INSERT INTO login_failures (username, ip) VALUES ('admin', $1)`, fmt.Sprintf("198.51.100.%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, _, _ := postLogin(t, tc, tlsSrv.URL, &http.Cookie{Name: "tw_device", Value: hostDev.Value}); code != http.StatusTooManyRequests {
		t.Errorf("over TLS, the device cookie without its prefix: %d, want 429", code)
	}
	if code, _, _, _ := postLogin(t, tc, tlsSrv.URL, hostDev); code != http.StatusSeeOther {
		t.Errorf("over TLS, the __Host- device cookie: %d, want 303", code)
	}
}
