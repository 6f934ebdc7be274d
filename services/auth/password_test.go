package auth_test

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"

	"github.com/toolwarden/toolwarden/services/auth"
)

var phcPattern = regexp.MustCompile(`^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$`)

func TestHashPasswordFormat(t *testing.T) {
	t.Parallel()
	const pw = "tr0ub4dor&3 is not enough"
	h1, err := auth.HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := auth.HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{h1, h2} {
		m := phcPattern.FindStringSubmatch(h)
		if m == nil {
			t.Fatalf("hash %q: does not match %s", h, phcPattern)
		}
		// OWASP password storage cheat sheet minimum for argon2id: m=19 MiB, t=2, p=1.
		for i, min := range []struct {
			name string
			min  int
		}{{"m", 19456}, {"t", 2}, {"p", 1}} {
			got, err := strconv.Atoi(m[i+1])
			if err != nil {
				t.Fatalf("hash %q: %s: %v", h, min.name, err)
			}
			if got < min.min {
				t.Errorf("hash %q: got %s=%d, want >= %d", h, min.name, got, min.min)
			}
		}
		parts := strings.Split(h, "$")
		salt, err := base64.RawStdEncoding.DecodeString(parts[4])
		if err != nil || len(salt) < 16 {
			t.Errorf("hash %q: got salt of %d bytes (%v), want >= 16", h, len(salt), err)
		}
		key, err := base64.RawStdEncoding.DecodeString(parts[5])
		if err != nil || len(key) < 32 {
			t.Errorf("hash %q: got key of %d bytes (%v), want >= 32", h, len(key), err)
		}
		if strings.Contains(h, pw) {
			t.Errorf("hash %q contains the password", h)
		}
	}
	if h1 == h2 {
		t.Fatalf("two hashes of the same password: got both %q, want different", h1)
	}
	if s1, s2 := strings.Split(h1, "$")[4], strings.Split(h2, "$")[4]; s1 == s2 {
		t.Fatalf("two hashes of the same password: got the same salt %q, want different", s1)
	}

	for _, tc := range []struct {
		hash, pw string
		want     bool
	}{
		{h1, pw, true},
		{h2, pw, true},
		{h1, pw + " ", false},
		{h1, "", false},
	} {
		got, err := auth.VerifyPassword(tc.hash, tc.pw)
		if err != nil {
			t.Errorf("VerifyPassword(%q): %v", tc.pw, err)
		}
		if got != tc.want {
			t.Errorf("VerifyPassword(%q): got %v, want %v", tc.pw, got, tc.want)
		}
	}
}

// phc formats an argon2id hash by hand, so tests can choose its parameters.
func phc(version int, params, salt, key string) string {
	return fmt.Sprintf("$argon2id$v=%d$%s$%s$%s", version, params, salt, key)
}

func TestVerifyPasswordMalformed(t *testing.T) {
	t.Parallel()
	salt := base64.RawStdEncoding.EncodeToString([]byte("0123456789abcdef"))
	key := base64.RawStdEncoding.EncodeToString(make([]byte, 32))
	const params = "m=19456,t=2,p=1"
	for _, tc := range []struct{ name, hash string }{
		{"empty", ""},
		{"plain text", "correct horse battery staple"},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{"argon2i", strings.Replace(phc(19, params, salt, key), "argon2id", "argon2i", 1)},
		{"argon2d", strings.Replace(phc(19, params, salt, key), "argon2id", "argon2d", 1)},
		{"old version", phc(16, params, salt, key)},
		{"version not a number", strings.Replace(phc(19, params, salt, key), "v=19", "v=x", 1)},
		{"no version", "$argon2id$" + params + "$" + salt + "$" + key},
		{"extra field", phc(19, params, salt, key) + "$" + key},
		{"no key", phc(19, params, salt, "")},
		{"m=0", phc(19, "m=0,t=2,p=1", salt, key)},
		{"t=0", phc(19, "m=19456,t=0,p=1", salt, key)},
		{"p=0", phc(19, "m=19456,t=2,p=0", salt, key)},
		{"p overflows", phc(19, "m=19456,t=2,p=300", salt, key)},
		{"params not numbers", phc(19, "m=lots,t=2,p=1", salt, key)},
		{"params missing", phc(19, "", salt, key)},
		{"salt not base64", phc(19, params, "not*base64!", key)},
		{"padded salt", phc(19, params, salt+"=", key)},
		{"key not base64", phc(19, params, salt, "%%%%")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ok, err := auth.VerifyPassword(tc.hash, "correct horse battery staple")
			if err == nil || ok {
				t.Fatalf("VerifyPassword(%q): got %v, %v; want false and an error", tc.hash, ok, err)
			}
		})
	}
}

// A hash made with other (valid) parameters, say before the defaults were raised, still
// verifies: VerifyPassword takes them from the string.
func TestVerifyPasswordUsesStoredParameters(t *testing.T) {
	t.Parallel()
	const pw = "an older, cheaper hash"
	salt := []byte("sixteen byte slt")
	type params struct {
		m, t   uint32
		p      uint8
		keyLen uint32
	}
	for _, p := range []params{
		{m: 8 * 1024, t: 1, p: 2, keyLen: 16},
		{m: 4 * 1024, t: 4, p: 1, keyLen: 64},
	} {
		key := argon2.IDKey([]byte(pw), salt, p.t, p.m, p.p, p.keyLen)
		enc := base64.RawStdEncoding.EncodeToString
		hash := phc(19, fmt.Sprintf("m=%d,t=%d,p=%d", p.m, p.t, p.p), enc(salt), enc(key))
		if !phcPattern.MatchString(hash) {
			t.Fatalf("test hash %q does not match the PHC pattern", hash)
		}
		if ok, err := auth.VerifyPassword(hash, pw); err != nil || !ok {
			t.Errorf("%+v: right password: got %v, %v; want true", p, ok, err)
		}
		if ok, err := auth.VerifyPassword(hash, pw+"!"); err != nil || ok {
			t.Errorf("%+v: wrong password: got %v, %v; want false", p, ok, err)
		}
		// The same salt and key under other parameters must not verify: proof that the
		// parameters are read from the string rather than assumed.
		other := phc(19, fmt.Sprintf("m=%d,t=%d,p=%d", p.m, p.t+1, p.p), enc(salt), enc(key))
		if ok, err := auth.VerifyPassword(other, pw); err != nil || ok {
			t.Errorf("%+v with t+1: got %v, %v; want false", p, ok, err)
		}
	}
}

func TestGeneratePassword(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 20 {
		pw := auth.GeneratePassword()
		if len(pw) < auth.MinPasswordLength || len(pw) > auth.MaxPasswordLength {
			t.Fatalf("generated password %q: got length %d, want %d..%d", pw, len(pw), auth.MinPasswordLength, auth.MaxPasswordLength)
		}
		if seen[pw] {
			t.Fatalf("generated password %q twice", pw)
		}
		seen[pw] = true
	}
}
