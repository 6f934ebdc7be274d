package replicahop_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
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

// A hop signed by a replica verifies once on the replica it names, with the same
// keyring; anything else (another key, method, path, body, sender, receiver, client,
// origin, request id or time, a malformed value, the same hop again) is refused.
func TestHop(t *testing.T) {
	kr, other := keyring(t), keyring(t)
	now := time.Now()
	const path = "/internal/v1/terminals/term-1/op"
	body := []byte(`{"operation":"send_input","arguments":{"sessionId":"term-1","input":"ls\n"}}`)
	hop := replicahop.Hop{From: "r0", To: "id-r1", Client: "203.0.113.7", Origin: "https://tw.example.com", RequestID: "rid-victim.1"}
	v := replicahop.NewVerifier(kr, "id-r1")
	good := replicahop.Sign(kr, hop, http.MethodPost, path, body, now)
	if got, err := v.Verify(good, http.MethodPost, path, body, now.Add(time.Second)); err != nil || got != hop {
		t.Fatalf("a replica's hop: %+v, err %v", got, err)
	}
	if _, err := v.Verify(good, http.MethodPost, path, body, now.Add(2*time.Second)); !errors.Is(err, replicahop.ErrReplayed) {
		t.Fatalf("the same hop again: got %v, want ErrReplayed", err)
	}
	if _, err := replicahop.NewVerifier(kr, "id-r2").Verify(replicahop.Sign(kr, hop, http.MethodPost, path, body, now),
		http.MethodPost, path, body, now); !errors.Is(err, replicahop.ErrMisdirected) {
		t.Fatalf("a hop for another replica: got %v, want ErrMisdirected", err)
	}
	fresh := func() string { return replicahop.Sign(kr, hop, http.MethodPost, path, body, now) }
	field := func(value string, i int, to string) string {
		f := strings.Fields(value)
		f[i] = to
		return strings.Join(f, " ")
	}
	forged := []struct {
		name, value, method, path string
		body                      []byte
	}{
		{"another keyring", replicahop.Sign(other, hop, http.MethodPost, path, body, now), http.MethodPost, path, body},
		{"another path", fresh(), http.MethodPost, "/internal/v1/terminals/term-2/op", body},
		{"another method", fresh(), http.MethodGet, path, body},
		{"another body", fresh(), http.MethodPost, path, []byte(`{"operation":"send_input","arguments":{"sessionId":"term-1","input":"rm -rf ~\n"}}`)},
		{"no body", fresh(), http.MethodPost, path, nil},
		{"another time", field(fresh(), 1, strconv.FormatInt(now.UnixMilli()+1, 10)), http.MethodPost, path, body},
		{"another nonce", field(fresh(), 2, "AAAAAAAAAAAAAAAAAAAAAA"), http.MethodPost, path, body},
		{"another sender", field(fresh(), 3, "r9"), http.MethodPost, path, body},
		{"another receiver", field(fresh(), 4, "id-r9"), http.MethodPost, path, body},
		{"another client", field(fresh(), 5, "198.51.100.1"), http.MethodPost, path, body},
		{"another origin", field(fresh(), 6, url.QueryEscape("https://evil.example")), http.MethodPost, path, body},
		// The receiver records and answers the hop's request id as its own: whoever sits
		// between the replicas must not choose it.
		{"another request id", field(fresh(), 7, "rid-mallory.1"), http.MethodPost, path, body},
		{"no request id", field(fresh(), 7, ""), http.MethodPost, path, body},
		{"a v3 hop relabelled v2 without its request id", func() string {
			f := strings.Fields(fresh())
			return strings.Join(append([]string{"v2"}, append(f[1:7], f[8])...), " ")
		}(), http.MethodPost, path, body},
		{"a client that is not an address", field(fresh(), 5, "example.com"), http.MethodPost, path, body},
		{"an origin with a path", field(fresh(), 6, url.QueryEscape("https://tw.example.com/x")), http.MethodPost, path, body},
		{"a short nonce", field(fresh(), 2, "AAAA"), http.MethodPost, path, body},
		{"no MAC", strings.Join(strings.Fields(fresh())[:8], " "), http.MethodPost, path, body},
		{"version 1", "v1 " + strconv.FormatInt(now.UnixMilli(), 10) + " r0 AAAA", http.MethodPost, path, body},
		{"junk", "v2 x y z a b c d", http.MethodPost, path, body},
		{"empty MAC", field(fresh(), 8, ""), http.MethodPost, path, body},
	}
	for _, f := range forged {
		if _, err := v.Verify(f.value, f.method, f.path, f.body, now); !errors.Is(err, replicahop.ErrForged) {
			t.Errorf("%s: got %v, want ErrForged", f.name, err)
		}
	}
	for _, at := range []time.Time{now.Add(-replicahop.MaxSkew - time.Second), now.Add(replicahop.MaxSkew + time.Second)} {
		stale := replicahop.Sign(kr, hop, http.MethodPost, path, body, at)
		if _, err := v.Verify(stale, http.MethodPost, path, body, now); !errors.Is(err, replicahop.ErrStale) {
			t.Errorf("a hop signed %s away: got %v, want ErrStale", at.Sub(now), err)
		}
	}
	// A client address, origin or request id that is not one (a Host header the server
	// took but URLs refuse) is left out by the sender rather than refused by the receiver.
	odd := replicahop.Hop{From: "r0", To: "id-r1", Client: "not-an-address", Origin: "http://a%zz", RequestID: "a\nb"}
	if got, err := v.Verify(replicahop.Sign(kr, odd, http.MethodGet, "/", nil, now), http.MethodGet, "/", nil, now); err != nil ||
		got != (replicahop.Hop{From: "r0", To: "id-r1"}) {
		t.Fatalf("a hop with an odd client and origin: %+v, %v", got, err)
	}
	// Nonces are forgotten once their hops would be stale anyway: memory stays bounded.
	later := now.Add(3 * replicahop.MaxSkew)
	if _, err := v.Verify(replicahop.Sign(kr, hop, http.MethodPost, path, body, later), http.MethodPost, path, body, later); err != nil {
		t.Fatal(err)
	}
	if n := v.Remembered(); n != 1 {
		t.Errorf("after 3×MaxSkew the verifier remembers %d nonces, want 1 (the last)", n)
	}
}

// The v2 header of an earlier release, which carries no request id, still verifies, and
// gives none: the receiver keeps its own id for the request.
func TestHopV2(t *testing.T) {
	kr := keyring(t)
	now := time.Now()
	const path = "/terminals/term-1"
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	const nonce = "AAAAAAAAAAAAAAAAAAAAAA"
	sum := sha256.Sum256(nil)
	mac := kr.MAC([]byte("toolwarden/replica-hop/v2\n" + ms + "\n" + nonce + "\nr0\nid-r1\n203.0.113.7\nhttps://tw.example.com\n" +
		http.MethodGet + "\n" + path + "\n" + base64.RawURLEncoding.EncodeToString(sum[:])))
	v2 := strings.Join([]string{"v2", ms, nonce, "r0", "id-r1", "203.0.113.7", url.QueryEscape("https://tw.example.com"),
		base64.RawURLEncoding.EncodeToString(mac)}, " ")
	v := replicahop.NewVerifier(kr, "id-r1")
	want := replicahop.Hop{From: "r0", To: "id-r1", Client: "203.0.113.7", Origin: "https://tw.example.com"}
	if got, err := v.Verify(v2, http.MethodGet, path, nil, now); err != nil || got != want {
		t.Fatalf("a v2 hop: %+v, err %v", got, err)
	}
	// A request id put beside it (a v3 field) is not signed by it.
	f := strings.Fields(v2)
	withID := strings.Join(append(append([]string{"v3"}, f[1:7]...), "rid-mallory.1", f[7]), " ")
	if _, err := replicahop.NewVerifier(kr, "id-r1").Verify(withID, http.MethodGet, path, nil, now); !errors.Is(err, replicahop.ErrForged) {
		t.Fatalf("a v2 hop given a request id as v3: got %v, want ErrForged", err)
	}
}

// VerifyRequest reads the header of a request as the receiver sees it (path, query and
// body, which it puts back for the handler).
func TestVerifyRequest(t *testing.T) {
	kr := keyring(t)
	v := replicahop.NewVerifier(kr, "id-r0")
	hop := replicahop.Hop{From: "r1", To: "id-r0", RequestID: "rid-1"}
	body := `{"operation":"get_output"}`
	post, _ := http.NewRequest(http.MethodPost, "http://r0.internal:8080/internal/v1/terminals/term-1/op", nil)
	replicahop.SignRequest(kr, hop, post, []byte(body), time.Now())
	in := httptest.NewRequest(http.MethodPost, "/internal/v1/terminals/term-1/op", strings.NewReader(body))
	in.Header = post.Header.Clone()
	if got, ok, err := v.VerifyRequest(in); !ok || err != nil || got != hop {
		t.Fatalf("verify a POST: %+v ok %v err %v", got, ok, err)
	}
	if b, _ := io.ReadAll(in.Body); string(b) != body {
		t.Fatalf("the body after the check: %q", b)
	}
	replicahop.SignRequest(kr, hop, post, []byte(body), time.Now())
	in = httptest.NewRequest(http.MethodPost, "/internal/v1/terminals/term-1/op", strings.NewReader(`{"operation":"close_session"}`))
	in.Header = post.Header.Clone()
	if _, ok, err := v.VerifyRequest(in); ok || !errors.Is(err, replicahop.ErrForged) {
		t.Fatalf("a signed hop with another body: ok %v err %v", ok, err)
	}

	out, _ := http.NewRequest(http.MethodGet, "http://r0.internal:8080/terminals/term-1/ws?from=12", nil)
	replicahop.SignRequest(kr, hop, out, nil, time.Now())
	in = httptest.NewRequest(http.MethodGet, "/terminals/term-1/ws?from=0", nil)
	in.Header = out.Header.Clone()
	if _, ok, err := v.VerifyRequest(in); ok || err == nil {
		t.Fatal("a hop moved to another query verified")
	}
	in = httptest.NewRequest(http.MethodGet, "/terminals/term-1/ws?from=12", nil)
	in.Header = out.Header.Clone()
	if got, ok, err := v.VerifyRequest(in); !ok || err != nil || got != hop {
		t.Fatalf("verify: %+v ok %v err %v", got, ok, err)
	}
	if _, ok, err := v.VerifyRequest(httptest.NewRequest(http.MethodGet, "/", nil)); ok || err != nil {
		t.Fatalf("no header: ok %v err %v", ok, err)
	}
}

// unread fails its test when anything reads it.
type unread struct{ t *testing.T }

func (u unread) Read([]byte) (int, error) {
	u.t.Error("the body was read for a hop that could not be valid here")
	return 0, io.EOF
}

// A header that cannot be a valid hop here (malformed, stale, for another replica) is
// refused without reading the body: anyone may send one, with up to MaxBody behind it.
func TestVerifyRequestRefusesBeforeTheBody(t *testing.T) {
	kr := keyring(t)
	v := replicahop.NewVerifier(kr, "id-r0")
	const path = "/internal/v1/terminals/term-1/op"
	for _, c := range []struct {
		name, value string
		want        error
	}{
		{"malformed", "v3 not a hop", replicahop.ErrForged},
		{"stale", replicahop.Sign(kr, replicahop.Hop{From: "r1", To: "id-r0"}, http.MethodPost, path, nil, time.Now().Add(-time.Hour)), replicahop.ErrStale},
		{"for another replica", replicahop.Sign(kr, replicahop.Hop{From: "r1", To: "id-r9"}, http.MethodPost, path, nil, time.Now()), replicahop.ErrMisdirected},
		{"unsigned, stale", replicahop.Sign(keyring(t), replicahop.Hop{From: "r1", To: "id-r0"}, http.MethodPost, path, nil, time.Now().Add(time.Hour)), replicahop.ErrStale},
	} {
		in := httptest.NewRequest(http.MethodPost, path, io.NopCloser(unread{t}))
		in.Header.Set(replicahop.Header, c.value)
		if _, ok, err := v.VerifyRequest(in); ok || !errors.Is(err, c.want) {
			t.Errorf("a %s hop: ok %v err %v, want %v", c.name, ok, err, c.want)
		}
	}
}
