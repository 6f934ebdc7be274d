package replicahop_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/services/secrets"
)

func keyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secrets.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// A hop signed by a replica verifies on another with the same keyring; anything else
// (another key, another method or path, a changed sender, an old or future time, a
// malformed value) is refused.
func TestHop(t *testing.T) {
	kr, other := keyring(t), keyring(t)
	now := time.Now()
	const path = "/internal/v1/terminals/term-1/op"
	body := []byte(`{"operation":"send_input","arguments":{"sessionId":"term-1","input":"ls\n"}}`)
	good := replicahop.Sign(kr, "r0", http.MethodPost, path, body, now)
	if from, err := replicahop.Verify(kr, good, http.MethodPost, path, body, now.Add(time.Second)); err != nil || from != "r0" {
		t.Fatalf("a replica's hop: from %q, err %v", from, err)
	}
	forged := []struct {
		name, value, method, path string
		body                      []byte
	}{
		{"another keyring", replicahop.Sign(other, "r0", http.MethodPost, path, body, now), http.MethodPost, path, body},
		{"another path", good, http.MethodPost, "/internal/v1/terminals/term-2/op", body},
		{"another method", good, http.MethodGet, path, body},
		{"another body", good, http.MethodPost, path, []byte(`{"operation":"send_input","arguments":{"sessionId":"term-1","input":"rm -rf ~\n"}}`)},
		{"no body", good, http.MethodPost, path, nil},
		{"another sender", strings.Replace(good, " r0 ", " r1 ", 1), http.MethodPost, path, body},
		{"another time", strings.Replace(good, "v1 1", "v1 2", 1), http.MethodPost, path, body},
		{"no MAC", strings.Join(strings.Fields(good)[:3], " "), http.MethodPost, path, body},
		{"junk", "v1 x y z", http.MethodPost, path, body},
		{"empty MAC", "v1 1 r0 ", http.MethodPost, path, body},
	}
	for _, f := range forged {
		if _, err := replicahop.Verify(kr, f.value, f.method, f.path, f.body, now); !errors.Is(err, replicahop.ErrForged) {
			t.Errorf("%s: got %v, want ErrForged", f.name, err)
		}
	}
	for _, at := range []time.Time{now.Add(-replicahop.MaxSkew - time.Second), now.Add(replicahop.MaxSkew + time.Second)} {
		stale := replicahop.Sign(kr, "r0", http.MethodPost, path, body, at)
		if _, err := replicahop.Verify(kr, stale, http.MethodPost, path, body, now); !errors.Is(err, replicahop.ErrStale) {
			t.Errorf("a hop signed %s away: got %v, want ErrStale", at.Sub(now), err)
		}
	}
}

// VerifyRequest reads the header of a request as the receiver sees it (path, query and
// body, which it puts back for the handler).
func TestVerifyRequest(t *testing.T) {
	kr := keyring(t)
	body := `{"operation":"get_output"}`
	post, _ := http.NewRequest(http.MethodPost, "http://r0.internal:8080/internal/v1/terminals/term-1/op", nil)
	replicahop.SignRequest(kr, "r1", post, []byte(body))
	in := httptest.NewRequest(http.MethodPost, "/internal/v1/terminals/term-1/op", strings.NewReader(body))
	in.Header = post.Header.Clone()
	if from, ok, err := replicahop.VerifyRequest(kr, in); !ok || err != nil || from != "r1" {
		t.Fatalf("verify a POST: from %q ok %v err %v", from, ok, err)
	}
	if b, _ := io.ReadAll(in.Body); string(b) != body {
		t.Fatalf("the body after the check: %q", b)
	}
	in = httptest.NewRequest(http.MethodPost, "/internal/v1/terminals/term-1/op", strings.NewReader(`{"operation":"close_session"}`))
	in.Header = post.Header.Clone()
	if _, ok, err := replicahop.VerifyRequest(kr, in); ok || !errors.Is(err, replicahop.ErrForged) {
		t.Fatalf("a signed hop with another body: ok %v err %v", ok, err)
	}

	out, _ := http.NewRequest(http.MethodGet, "http://r0.internal:8080/terminals/term-1/ws?from=12", nil)
	replicahop.SignRequest(kr, "r1", out, nil)
	in = httptest.NewRequest(http.MethodGet, "/terminals/term-1/ws?from=12", nil)
	in.Header = out.Header.Clone()
	if from, ok, err := replicahop.VerifyRequest(kr, in); !ok || err != nil || from != "r1" {
		t.Fatalf("verify: from %q ok %v err %v", from, ok, err)
	}
	in = httptest.NewRequest(http.MethodGet, "/terminals/term-1/ws?from=0", nil)
	in.Header = out.Header.Clone()
	if _, ok, err := replicahop.VerifyRequest(kr, in); ok || err == nil {
		t.Fatal("a hop moved to another query verified")
	}
	if _, ok, err := replicahop.VerifyRequest(kr, httptest.NewRequest(http.MethodGet, "/", nil)); ok || err != nil {
		t.Fatalf("no header: ok %v err %v", ok, err)
	}
}
