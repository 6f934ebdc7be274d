package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// The internal terminal route answers a session it does not hold with a code of its
// own, which the sending replica takes for "no such session"; a route the replica
// lacks answers not_found, which it must not.
func TestTerminalOpNotHereCode(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	self := srv.App.Replicas.Self().ID
	code := func(path string) (int, string) {
		t.Helper()
		b := []byte(`{"operation":"get_output","arguments":{"sessionId":"term-nowhere"},"call":{"conversation_id":"conv-x"}}`)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		replicahop.SignRequest(srv.Keys, replicahop.Hop{From: "other", To: self}, req, b, time.Now())
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		return res.StatusCode, e.Error.Code
	}
	if status, c := code("/internal/v1/terminals/term-nowhere/op"); status != http.StatusNotFound || c != builtin.TerminalNotHereCode {
		t.Errorf("a session not on this replica: %d %q, want 404 %q", status, c, builtin.TerminalNotHereCode)
	}
	if status, c := code("/internal/v1/terminals/term-nowhere/op-of-a-later-release"); status != http.StatusNotFound || c == builtin.TerminalNotHereCode {
		t.Errorf("a route this replica lacks: %d %q", status, c)
	}
}
