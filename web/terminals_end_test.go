package web_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// An administrator ends someone's terminal from its page (POST /terminals/:id/end): the
// page offers End to administrators only, the route refuses anyone else (its owner, a
// tool manager), the terminal's processes end, and its record and the audit log say the
// administrator ended it, in one entry. Ending it again says it had ended.
func TestAdministratorEndsATerminal(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	srv.CreateUser(t, "ada", auth.RoleAdmin, "ada-password-123")
	srv.CreateUser(t, "tom", auth.RoleToolManager, "tom-password-123")
	ada := srv.Login(t, "ada", "ada-password-123")
	alice := srv.Login(t, "alice", "alice-password-1")
	tom := srv.Login(t, "tom", "tom-password-123")
	// Busy: a foreground job, which the idle timeout would never end.
	if err := term.Input(builtin.TerminalCaller{UserName: "alice", Source: builtin.BrowserSource}, "while :; do echo tick; sleep 1; done\r"); err != nil {
		t.Fatal(err)
	}

	if b := body(t, srv.Get(t, ada, "/terminals/"+term.ID)); !strings.Contains(b, `action="/terminals/`+term.ID+`/end"`) {
		t.Fatalf("the administrator's page of alice's terminal offers no End:\n%s", b)
	}
	if b := body(t, srv.Get(t, alice, "/terminals/"+term.ID)); strings.Contains(b, "terminal-end-form") {
		t.Fatal("alice's own page offers End")
	}
	for who, c := range map[string]*http.Client{"alice": alice, "tom": tom} {
		res := srv.PostForm(t, c, "/terminals/"+term.ID+"/end", url.Values{})
		if res.Body.Close(); res.StatusCode != http.StatusForbidden {
			t.Errorf("%s ends alice's terminal: %d, want 403", who, res.StatusCode)
		}
	}
	if term.Exited() {
		t.Fatal("the terminal ended before the administrator ended it")
	}

	res := srv.PostForm(t, ada, "/terminals/"+term.ID+"/end", url.Values{})
	if res.Body.Close(); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/terminals" {
		t.Fatalf("the administrator's End: %d to %q, want 303 to /terminals", res.StatusCode, res.Header.Get("Location"))
	}
	if !term.Exited() {
		t.Fatal("the terminal still runs once End answered")
	}
	if b := body(t, srv.Get(t, ada, "/terminals")); !strings.Contains(b, "Terminal "+term.ID+" of alice ended.") {
		t.Errorf("the list does not say the terminal ended:\n%s", b)
	}
	if data, _, _ := term.Output(0); !strings.Contains(string(data), "[ended: ended by ada]") {
		t.Errorf("the terminal's output does not say who ended it: %q", data)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND actor_kind = 'user' AND actor_name = 'ada'
		AND target_id = $1 AND payload->>'ended_reason' = 'ended_by_admin' AND payload->>'owner_name' = 'alice'`, term.ID); n != 1 {
		t.Errorf("the end audited %d times as ada's, want once", n)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM terminals WHERE id = $1 AND ended_reason = 'ended_by_admin'`, term.ID); n != 1 {
		t.Error("the terminal's record does not say an administrator ended it")
	}
	if b := body(t, srv.Get(t, ada, "/terminals/"+term.ID)); strings.Contains(b, "terminal-end-form") {
		t.Error("the page of the ended terminal still offers End")
	}
	res = srv.PostForm(t, ada, "/terminals/"+term.ID+"/end", url.Values{})
	if res.Body.Close(); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("ending it again: %d", res.StatusCode)
	}
	if b := body(t, srv.Get(t, ada, "/terminals")); !strings.Contains(b, "had ended already") {
		t.Errorf("ending it again does not say it had ended:\n%s", b)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'terminal.end' AND target_id = $1`, term.ID); n != 1 {
		t.Errorf("%d terminal.end entries after ending it twice, want one", n)
	}
}

// End on a terminal another replica runs is sent to that replica (a signed hop), which
// ends it there, as its page is.
func TestEndForwardedToTheTerminalsReplica(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ownerID := otherReplica(t, srv, "owner", "http://"+ln.Addr().String(), "term-far")
	hops := replicahop.NewVerifier(srv.Keys, ownerID)
	var got atomic.Value
	owner := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok, err := hops.VerifyRequest(r); !ok {
			http.Error(w, fmt.Sprintf("the hop: %v", err), http.StatusForbidden)
			return
		}
		got.Store(r.Method + " " + r.URL.Path)
		http.Redirect(w, r, "/terminals", http.StatusSeeOther)
	})}
	go func() { _ = owner.Serve(ln) }()
	t.Cleanup(func() { owner.Close() })

	res := srv.PostForm(t, admin, "/terminals/term-far/end", url.Values{})
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if sent, _ := got.Load().(string); res.StatusCode != http.StatusSeeOther || sent != "POST /terminals/term-far/end" {
		t.Fatalf("End of another replica's terminal: %d, the owner got %q", res.StatusCode, sent)
	}
}
