package secrets_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/secrets"
)

// A Masker hides known values in text and in JSON (escaped, nested, in keys), leaves
// short values and unrelated text alone, and returns JSON without secrets unchanged.
func TestMasker(t *testing.T) {
	t.Parallel()
	m := secrets.NewMasker("sk-live-0123456789", "Bearer tok-abcdefgh", "short", "sk-live-0123456789-longer")
	for _, tc := range []struct{ in, want string }{
		{"key sk-live-0123456789 here", "key *** here"},
		{"longer sk-live-0123456789-longer", "longer ***"},
		{"the header Bearer tok-abcdefgh, the token tok-abcdefgh", "the header ***, the token ***"},
		{"short stays short", "short stays short"},
		{"", ""},
	} {
		if got := m.String(tc.in); got != tc.want {
			t.Errorf("String(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{`{"a":"sk-live-0123456789"}`, `{"a":"***"}`},
		{`{"nested":[{"x":"see sk-live-0123456789"}],"n":1.50}`, `{"n":1.50,"nested":[{"x":"see ***"}]}`},
		{`{"sk-live-0123456789":true}`, `{"***":true}`},
		{`{"a":"sk-live-\u00301234567\u0038\u0039"}`, `{"a":"***"}`}, // spelled with escapes
		{`{"a":"nothing here"}`, `{"a":"nothing here"}`},
		{`{ "a" : "kept as written" }`, `{ "a" : "kept as written" }`},
		{`{"html":"\u003cb\u003e bold \u003c/b\u003e"}`, `{"html":"\u003cb\u003e bold \u003c/b\u003e"}`}, // escapes of nothing secret
	} {
		if got := string(m.JSON(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("JSON(%s): got %s, want %s", tc.in, got, tc.want)
		}
	}
	var none *secrets.Masker
	if none.String("sk-live-0123456789") != "sk-live-0123456789" || !none.Empty() {
		t.Error("a nil masker changed text")
	}
	jm := secrets.NewJSONMasker(json.RawMessage(`"configured-secret-1"`), json.RawMessage(`{"user":"u","pass":"p4ssw0rd-long"}`), nil)
	if got := jm.String("configured-secret-1 and p4ssw0rd-long"); strings.Contains(got, "secret-1") || strings.Contains(got, "p4ssw0rd") {
		t.Errorf("JSON masker: got %q", got)
	}
}

// A MAC verifies under the key that made it, after a rotation too, and not under
// another keyring or for other data.
func TestMAC(t *testing.T) {
	t.Parallel()
	k1, _ := secrets.GenerateKey()
	k2, _ := secrets.GenerateKey()
	old, _ := secrets.NewKeyring(k1)
	rotated, _ := secrets.NewKeyring(k2, k1)
	other, _ := secrets.NewKeyring(k2)
	mac := old.MAC([]byte("approved"))
	switch {
	case !old.VerifyMAC([]byte("approved"), mac):
		t.Error("a MAC does not verify under its own key")
	case !rotated.VerifyMAC([]byte("approved"), mac):
		t.Error("a MAC made before a rotation does not verify after it")
	case other.VerifyMAC([]byte("approved"), mac):
		t.Error("a MAC verifies under a keyring without its key")
	case old.VerifyMAC([]byte("tampered"), mac):
		t.Error("a MAC verifies for other data")
	case string(rotated.MAC([]byte("x"))) == string(old.MAC([]byte("x"))):
		t.Error("the rotated keyring still makes MACs with the old key")
	}
}

// A secret is masked as a URL or base64 encodes it too, and an Authorization value's
// credential alone, whatever the scheme's case: an upstream that echoes the URL it was
// called with, or a Basic header, does not show the secret encoded.
func TestMaskerEncodedForms(t *testing.T) {
	t.Parallel()
	const key = "ab+c/d=e f&g12345"
	basic := base64.StdEncoding.EncodeToString([]byte("user:pass-12345678"))
	m := secrets.NewMasker(key, "basic "+basic, "Token tok-0123456789")
	for _, s := range []string{
		"GET /v1?key=" + url.QueryEscape(key) + " failed",
		"path /" + url.PathEscape(key) + "/x",
		"cred " + base64.StdEncoding.EncodeToString([]byte(key)),
		"cred " + base64.RawURLEncoding.EncodeToString([]byte(key)),
		"Authorization: Basic " + basic,
		"token tok-0123456789 refused",
	} {
		got := m.String(s)
		if !strings.Contains(got, secrets.Masked) || strings.Contains(got, "ab+c") || strings.Contains(got, "ab%2Bc") ||
			strings.Contains(got, basic) || strings.Contains(got, "tok-0123456789") {
			t.Errorf("%q masked as %q", s, got)
		}
	}
}

// A numeric secret parameter is masked where it comes back, as text or as a JSON
// number; a Basic credential is masked decoded too ("user:password" and the password).
func TestMaskerNumbersAndBasic(t *testing.T) {
	t.Parallel()
	jm := secrets.NewJSONMasker(json.RawMessage(`{"account":123456789012,"pin":1234}`))
	if got := jm.String("account 123456789012 charged"); got != "account *** charged" {
		t.Errorf("String: got %q, want the account number masked", got)
	}
	if got := string(jm.JSON(json.RawMessage(`{"account":123456789012,"pin":1234,"n":7}`))); got != `{"account":"***","n":7,"pin":1234}` {
		t.Errorf("JSON: got %s, want the account number masked (the short PIN is under MinMasked)", got)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:correct-horse-battery"))
	m := secrets.NewMasker(basic)
	for _, in := range []string{"denied for alice:correct-horse-battery", "password correct-horse-battery is wrong"} {
		if got := m.String(in); strings.Contains(got, "correct-horse") {
			t.Errorf("String(%q): got %q, want the Basic credential's password masked", in, got)
		}
	}
}
