package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// Terminals of other replicas (docs/architecture.md, Terminals on several replicas),
// with one server standing in for the cluster: a replica whose address leads back
// here shows that a forwarded request is never forwarded again (no loop); a
// terminal of a replica that is gone answers 410 and is soon listed as ended with it;
// a request claiming to be a replica's without the key, or too late, is refused; and
// the internal route runs an operation on a session of this replica, for the session's
// own conversation only.
func TestTerminalForwarding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	loop, dead := uuid.NewString(), uuid.NewString()
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO replicas (id, name, address, host, pid) VALUES ($1, 'loop', $2, 'h', 1)`, loop, srv.URL); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ id, replicaID, replica string }{{"term-loop", loop, "loop"}, {"term-dead", dead, "gone"}} {
		if _, err := srv.Pool.Exec(ctx, `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
			VALUES ($1, $2, $3, 'pty', 'conv-x', '/tmp', now())`, r.id, r.replicaID, r.replica); err != nil {
			t.Fatal(err)
		}
	}
	// The loop replica stays alive while the test runs.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
				_, _ = srv.Pool.Exec(ctx, `UPDATE replicas SET seen_at = now() WHERE id = $1`, loop)
			}
		}
	}()

	if b := body(t, srv.Get(t, admin, "/terminals")); !strings.Contains(b, "term-loop") || !strings.Contains(b, ">loop<") {
		t.Fatalf("the list lacks the other replica's terminal:\n%s", b)
	}
	res := srv.Get(t, admin, "/terminals/term-loop")
	if b := body(t, res); res.StatusCode != http.StatusBadGateway || !strings.Contains(b, "possibly a restart of it, answers at its address") {
		t.Fatalf("a terminal whose replica's address leads back here: %d\n%s", res.StatusCode, b)
	}
	if res.Header.Get("Content-Security-Policy") == "" {
		t.Error("the forwarder's own error page lacks its security headers")
	}
	self := srv.App.Replicas.Self().ID
	// Even when a replica's hop reaches here (its address was this one), the terminal is
	// not forwarded a second time.
	loopReq, _ := http.NewRequest(http.MethodGet, srv.URL+"/terminals/term-loop", nil)
	replicahop.SignRequest(srv.Keys, replicahop.Hop{From: "loop", To: self}, loopReq, nil, time.Now())
	if res, err := admin.Do(loopReq); err != nil {
		t.Fatal(err)
	} else if b := body(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(b, "term-loop is not on replica") {
		t.Fatalf("a forwarded request for a terminal not here: %d\n%s", res.StatusCode, b)
	}
	// Gone only once this replica's heartbeats are steady (before, 503: try again).
	webtest.WaitFor(t, 20*time.Second, srv.App.Replicas.Steady, "this replica's heartbeats never became steady")
	res = srv.Get(t, admin, "/terminals/term-dead")
	if b := body(t, res); res.StatusCode != http.StatusGone || !strings.Contains(b, "ran on replica gone, which stopped or is not answering") {
		t.Fatalf("a terminal of a replica that is gone: %d\n%s", res.StatusCode, b)
	}
	webtest.WaitFor(t, 20*time.Second, func() bool {
		return strings.Contains(body(t, srv.Get(t, admin, "/terminals")), "ended: replica gone stopped")
	}, "the terminal of the replica that is gone was never listed as ended")

	// When the other replicas' records cannot be read, the list still has this
	// replica's terminals and says what is missing.
	mineDir, err := srv.App.Builtin.Workspace("conv-mine")
	if err != nil {
		t.Fatal(err)
	}
	srv.App.Enable(t, builtin.TerminalToolName) // who types into it must be able to call it
	mine, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserName: "admin"}, "conv-mine", mineDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE terminals RENAME TO terminals_away`); err != nil {
		t.Fatal(err)
	}
	res = srv.Get(t, admin, "/terminals")
	b := body(t, res)
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE terminals_away RENAME TO terminals`); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.Contains(b, mine.ID) || strings.Contains(b, "term-loop") ||
		!strings.Contains(b, "the other replicas' could not be read") {
		t.Fatalf("/terminals while the records cannot be read: %d\n%s", res.StatusCode, b)
	}

	// A hop that is not a replica's, or not for this one, or already used: refused on
	// any route.
	fresh := replicahop.Sign(srv.Keys, replicahop.Hop{From: "loop", To: self}, http.MethodGet, "/terminals", nil, time.Now())
	for _, h := range []struct {
		name, value string
		want        int
	}{
		{"forged", "v2 " + strings.Repeat("1", 13) + " AAAAAAAAAAAAAAAAAAAAAA loop " + self + " 127.0.0.1 http%3A%2F%2Fx AAAA", http.StatusForbidden},
		{"stale", replicahop.Sign(srv.Keys, replicahop.Hop{From: "loop", To: self}, http.MethodGet, "/terminals", nil, time.Now().Add(-time.Minute)), http.StatusForbidden},
		{"misdirected", replicahop.Sign(srv.Keys, replicahop.Hop{From: "loop", To: loop}, http.MethodGet, "/terminals", nil, time.Now()), http.StatusMisdirectedRequest},
		{"fresh", fresh, http.StatusOK},
		{"replayed", fresh, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/terminals", nil)
		req.Header.Set(replicahop.Header, h.value)
		res, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != h.want {
			t.Errorf("a %s hop: %d, want %d", h.name, res.StatusCode, h.want)
		}
		if res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("X-Frame-Options") == "" {
			t.Errorf("a %s hop: the answer lacks the security headers", h.name)
		}
	}

	// A forwarded request is answered and recorded as the client the other replica
	// served: its address and the origin it used (HSTS over https).
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/servers", nil)
	req.Header.Set("Authorization", "Bearer tw_not-a-token")
	replicahop.SignRequest(srv.Keys, replicahop.Hop{From: "loop", To: self, Client: "203.0.113.7", Origin: "https://tw.example.com"}, req, nil, time.Now())
	if res, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if res.Body.Close(); res.StatusCode != http.StatusUnauthorized || res.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("a forwarded request with a bad token: %d, HSTS %q", res.StatusCode, res.Header.Get("Strict-Transport-Security"))
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		var n int
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND ip = '203.0.113.7'`).Scan(&n)
		return n == 1
	}, "the refused forwarded request was not recorded with its client's address")

	// The internal route, as a replica calls it.
	ws, err := srv.App.Builtin.Workspace("conv-op")
	if err != nil {
		t.Fatal(err)
	}
	term, _, err := srv.App.Terminals.OpenPTY(builtin.TerminalCaller{UserName: "agent"}, "conv-op", ws)
	if err != nil {
		t.Fatal(err)
	}
	op := func(path, conv string, args map[string]any, sign bool) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"operation": args["operation"], "arguments": args, "call": map[string]any{"conversation_id": conv}})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if sign {
			replicahop.SignRequest(srv.Keys, replicahop.Hop{From: "loop", To: self}, req, b, time.Now())
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return res.StatusCode, out
	}
	path := "/internal/v1/terminals/" + term.ID + "/op"
	if code, out := op(path, "conv-op", map[string]any{"operation": "send_input", "sessionId": term.ID, "input": "echo internal-$((3*3))\n"}, true); code != http.StatusOK || out["isError"] == true {
		t.Fatalf("send_input through the internal route: %d %v", code, out)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		code, out := op(path, "conv-op", map[string]any{"operation": "get_output", "sessionId": term.ID}, true)
		st, _ := out["structuredContent"].(map[string]any)
		o, _ := st["output"].(string)
		return code == http.StatusOK && strings.Contains(o, "internal-9")
	}, "get_output through the internal route never showed the command's output")
	if code, out := op(path, "conv-other", map[string]any{"operation": "get_output", "sessionId": term.ID}, true); code != http.StatusOK || out["isError"] != true {
		t.Fatalf("another conversation through the internal route: %d %v", code, out)
	}
	if code, _ := op(path, "conv-op", map[string]any{"operation": "get_output", "sessionId": "term-other"}, true); code != http.StatusBadRequest {
		t.Fatalf("a sessionId that is not the path's: %d", code)
	}
	if code, _ := op("/internal/v1/terminals/term-nowhere/op", "conv-op", map[string]any{"operation": "get_output", "sessionId": "term-nowhere"}, true); code != http.StatusNotFound {
		t.Fatalf("a session not on this replica: %d", code)
	}
	if code, _ := op(path, "conv-op", map[string]any{"operation": "get_output", "sessionId": term.ID}, false); code == http.StatusOK {
		t.Fatalf("the internal route without a hop: %d", code)
	}

	// Each forwarded request takes one of the nonces the owner remembers for a minute,
	// past which it refuses every hop: one person's requests for another replica's
	// terminal are limited (as runs' are), so they cannot use up everyone's.
	const flood = 60
	codes := make(chan string, flood)
	for range flood {
		go func() {
			res, err := admin.Get(srv.URL + "/terminals/term-loop")
			if err != nil {
				codes <- err.Error()
				return
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusTooManyRequests && strings.Contains(string(raw), "other replicas") {
				raw = []byte("limited")
			}
			codes <- string(raw)
		}()
	}
	limited := 0
	for range flood {
		if <-codes == "limited" {
			limited++
		}
	}
	if limited == 0 {
		t.Errorf("%d requests at once for a terminal of another replica: all forwarded, want those past a burst refused (429)", flood)
	}
}
