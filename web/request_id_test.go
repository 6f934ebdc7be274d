package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/auth"
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
				// An existing account: a name no account has is not recorded as typed.
				srv.CreateUser(t, user, auth.RoleGuest, "the-right-password-1")
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

// A request another replica forwards keeps that replica's id, so both replicas record
// and answer one id: the owner keeps the request id its verified hop signs, and the
// forwarder answers the owner's, once. An X-Request-ID beside the hop is not that id:
// whoever sits between the replicas (plain HTTP) could rewrite it, and tie the entries
// the owner records to another request's. A request with a forged hop keeps nothing:
// it is refused.
func TestRequestIDAcrossAForward(t *testing.T) {
	t.Parallel()
	srv, admin, _, ln := forwardFixture(t, &webtest.Options{Builtin: true})
	self := srv.App.Replicas.Self().ID

	// A failed sign-in forwarded by a replica, its hop signing id signed (none: "")
	// and X-Request-ID header beside it (none: "").
	hoppedLogin := func(user, signed, header string) (answered, recorded string) {
		t.Helper()
		srv.CreateUser(t, user, auth.RoleGuest, "the-right-password-1")
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", nil)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if header != "" {
			req.Header.Set("X-Request-ID", header)
		}
		form := url.Values{"username": {user}, "password": {"wrong-password"}}.Encode()
		replicahop.SignRequest(srv.Keys, replicahop.Hop{From: "other", To: self, Client: "203.0.113.9", Origin: srv.URL, RequestID: signed},
			req, []byte(form), time.Now())
		res, err := srv.Client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a forwarded failed sign-in as %s: %d, want 401", user, res.StatusCode)
		}
		if ids := res.Header.Values("X-Request-ID"); len(ids) != 1 {
			t.Fatalf("a forwarded failed sign-in as %s answered request ids %q, want one", user, ids)
		}
		if err := srv.Pool.QueryRow(t.Context(),
			`SELECT request_id FROM audit_log WHERE action = 'user.login_failed' AND actor_name = $1`, user).Scan(&recorded); err != nil {
			t.Fatalf("the forwarded failed sign-in as %s was not audited: %v", user, err)
		}
		return res.Header.Get("X-Request-ID"), recorded
	}
	if answered, recorded := hoppedLogin("rid-hop-signed", "hop-req.1", ""); answered != "hop-req.1" || recorded != "hop-req.1" {
		t.Errorf("a replica's forward signing id hop-req.1: answered %q, recorded %q; want its id", answered, recorded)
	}
	// The header rewritten on the way (or a captured hop raced ahead of its request
	// with another header): the signed id stands.
	if answered, recorded := hoppedLogin("rid-hop-swapped", "hop-req.3", "victims-req.3"); answered != "hop-req.3" || recorded != "hop-req.3" {
		t.Errorf("a forward signing hop-req.3 with X-Request-ID victims-req.3: answered %q, recorded %q; want the signed id", answered, recorded)
	}
	// A hop that signs no id (an earlier release's v2 hop signs none): the owner's own.
	answered, recorded := hoppedLogin("rid-hop-unsigned", "", "victims-req.4")
	if answered != recorded || recorded == "victims-req.4" || recorded == "" {
		t.Errorf("a forward signing no id with X-Request-ID victims-req.4: answered %q, recorded %q; want an id of the owner's", answered, recorded)
	}
	forged, _ := http.NewRequest(http.MethodGet, srv.URL+"/healthz", nil)
	forged.Header.Set("X-Request-ID", "hop-req.2")
	forged.Header.Set(replicahop.Header, "forged")
	if res, err := admin.Do(forged); err != nil {
		t.Fatal(err)
	} else if res.Body.Close(); res.StatusCode != http.StatusForbidden || res.Header.Get("X-Request-ID") == "hop-req.2" {
		t.Errorf("a forged hop: %d, request id %q; want 403 under an id of the server's", res.StatusCode, res.Header.Get("X-Request-ID"))
	}
	var planted int
	if err := srv.Pool.QueryRow(t.Context(), `SELECT count(*) FROM audit_log WHERE request_id = 'hop-req.2'`).Scan(&planted); err != nil || planted != 0 {
		t.Errorf("%d audit entries (%v) carry the id a forged hop sent, want none", planted, err)
	}

	// The owner here answers with the id its hop signs, as a replica does.
	ownerID := otherReplica(t, srv, "owner", "http://"+ln.Addr().String(), "term-owned")
	hops := replicahop.NewVerifier(srv.Keys, ownerID)
	var got atomic.Value
	owner := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hop, ok, err := hops.VerifyRequest(r)
		if !ok {
			http.Error(w, fmt.Sprintf("the hop: %v", err), http.StatusForbidden)
			return
		}
		got.Store(hop.RequestID)
		w.Header().Set("X-Request-ID", hop.RequestID)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "the owner's page")
	})}
	go func() { _ = owner.Serve(ln) }()
	t.Cleanup(func() { owner.Close() })
	a := ask(srv, admin, http.MethodGet, "/terminals/term-owned")
	sent, _ := got.Load().(string)
	if a.err != nil || a.code != http.StatusOK || sent == "" {
		t.Fatalf("the forwarded page: %d %q (%v), the owner got request id %q", a.code, a.body, a.err, sent)
	}
	if ids := a.header.Values("X-Request-ID"); len(ids) != 1 || ids[0] != sent {
		t.Errorf("the forwarded page answered request ids %q, want one, the id the owner got (%q)", ids, sent)
	}
}
