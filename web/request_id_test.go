package web_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// The request id the audit log records is always the server's own: the audit page
// links "every entry of this request" by it, so a client naming it could tie its
// entries to other people's. What the response says is the id recorded. That holds
// behind a trusted proxy too: proxies commonly pass a client's X-Request-ID through.
func TestRequestIDNotTakenFromClient(t *testing.T) {
	t.Parallel()
	for name, proxies := range map[string][]netip.Prefix{
		"direct":        nil,
		"trusted proxy": {netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := webtest.Start(t, &webtest.Options{TrustedProxies: proxies})
			const forged = "someone-elses-request.42"
			var seen []string
			for _, user := range []string{"rid-mallory", "rid-trudy"} {
				res := srv.PostFormHeaders(t, srv.Client(t), "/login", url.Values{"username": {user}, "password": {"wrong-password"}},
					map[string]string{"X-Request-ID": forged, "X-Forwarded-For": "203.0.113.7"})
				res.Body.Close()
				if res.StatusCode != http.StatusUnauthorized {
					t.Fatalf("failed sign-in as %s: %d, want 401", user, res.StatusCode)
				}
				var recorded string
				if err := srv.Pool.QueryRow(context.Background(),
					`SELECT request_id FROM audit_log WHERE action = 'user.login_failed' AND actor_name = $1`, user).Scan(&recorded); err != nil {
					t.Fatalf("the failed sign-in as %s was not audited: %v", user, err)
				}
				if recorded == forged || recorded == "" {
					t.Fatalf("failed sign-in as %s: audit recorded request id %q, the client sent %q", user, recorded, forged)
				}
				if got := res.Header.Get("X-Request-ID"); got != recorded {
					t.Fatalf("failed sign-in as %s: response X-Request-ID %q, audit recorded %q", user, got, recorded)
				}
				seen = append(seen, recorded)
			}
			if seen[0] == seen[1] {
				t.Fatalf("two sign-ins recorded under one request id %q", seen[0])
			}
		})
	}
}
