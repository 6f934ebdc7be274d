package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// canary is a plaintext no error message may ever contain.
const canary = "canary-7f3a9"

func testKeyring(t *testing.T, ids ...string) *Keyring {
	t.Helper()
	var keys []Key
	for _, id := range ids {
		k, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		k.ID = id
		keys = append(keys, k)
	}
	kr, err := NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// legacyKeyFile writes a key file exactly as cmd/toolwarden's ensureSecretKey does.
func legacyKeyFile(t *testing.T) (path string, key []byte) {
	t.Helper()
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "secret.key")
	writeFile(t, path, base64.StdEncoding.EncodeToString(key)+"\n", 0o600)
	return path, key
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	// Chmod too, so the umask cannot change the mode a test relies on.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t, "k1", "k2")
	for _, tc := range []struct {
		name, plain, aad string
	}{
		{"empty", "", "mcp_servers/1/env/EMPTY"},
		{"header", "Bearer " + canary, "mcp_servers/1/headers/Authorization"},
		{"empty aad", canary, ""},
		{"unicode", "päss✓wörd", "mcp_servers/1/env/PW"},
		{"binary", "\x00\xff\x01\n", "x"},
		{"long", strings.Repeat("x", 1<<16), "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ct, err := kr.EncryptString(tc.plain, tc.aad)
			if err != nil {
				t.Fatalf("EncryptString: got error %v, want nil", err)
			}
			if !strings.HasPrefix(ct, "v1:k1:") {
				t.Errorf("ciphertext prefix: got %.10q, want %q", ct, "v1:k1:")
			}
			if tc.plain != "" && strings.Contains(ct, tc.plain) {
				t.Errorf("ciphertext contains the plaintext")
			}
			if !IsCiphertext(ct) {
				t.Errorf("IsCiphertext(ciphertext): got false, want true")
			}
			got, err := kr.DecryptString(ct, tc.aad)
			if err != nil {
				t.Fatalf("DecryptString: got error %v, want nil", err)
			}
			if got != tc.plain {
				t.Errorf("DecryptString: got %d bytes, want the %d bytes encrypted", len(got), len(tc.plain))
			}
		})
	}
}

func TestNoncesDiffer(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t, "k1")
	a, err := kr.EncryptString(canary, "aad")
	if err != nil {
		t.Fatal(err)
	}
	b, err := kr.EncryptString(canary, "aad")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two encryptions of the same text: got equal ciphertexts, want different")
	}
	na, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(a, ":", 3)[2])
	nb, _ := base64.RawURLEncoding.DecodeString(strings.SplitN(b, ":", 3)[2])
	if bytes.Equal(na[:nonceSize], nb[:nonceSize]) {
		t.Fatalf("two encryptions of the same text: got the same nonce %x, want different", na[:nonceSize])
	}
}

func TestDecryptErrors(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t, "k1", "k2")
	other := testKeyring(t, "zz")
	const aad = "mcp_servers/11111111-1111-1111-1111-111111111111/headers/Authorization"
	ct, err := kr.EncryptString(canary, aad)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.SplitN(ct, ":", 3)[2]
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		return "v1:k1:" + base64.RawURLEncoding.EncodeToString(b)
	}
	fromOther, err := other.EncryptString(canary, aad)
	if err != nil {
		t.Fatal(err)
	}
	// The same kid on a different key: authentication must fail, not return garbage.
	sameKidOtherKey, err := testKeyring(t, "k1").EncryptString(canary, aad)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, ct, aad string
		want          error
	}{
		{"aad of another row", ct, "mcp_servers/22222222-2222-2222-2222-222222222222/headers/Authorization", ErrDecrypt},
		{"aad of another field", ct, "mcp_servers/11111111-1111-1111-1111-111111111111/headers/Cookie", ErrDecrypt},
		{"empty aad", ct, "", ErrDecrypt},
		{"flipped nonce byte", flip(0), aad, ErrDecrypt},
		{"flipped ciphertext byte", flip(nonceSize + 2), aad, ErrDecrypt},
		{"flipped tag byte", flip(len(raw) - 1), aad, ErrDecrypt},
		{"kid changed to another known key", "v1:k2:" + body, aad, ErrDecrypt},
		{"same kid, different key", sameKidOtherKey, aad, ErrDecrypt},
		{"unknown kid", fromOther, aad, ErrUnknownKey},
		{"plaintext", canary, aad, ErrMalformed},
		{"empty", "", aad, ErrMalformed},
		{"other version", "v2:k1:" + body, aad, ErrMalformed},
		{"no body", "v1:k1", aad, ErrMalformed},
		{"empty body", "v1:k1:", aad, ErrMalformed},
		{"empty kid", "v1::" + body, aad, ErrMalformed},
		{"upper-case kid", "v1:K1:" + body, aad, ErrMalformed},
		{"kid too long", "v1:abcdefghijklmnopq:" + body, aad, ErrMalformed},
		{"bad base64", "v1:k1:" + canary + "!!", aad, ErrMalformed},
		{"padded base64", "v1:k1:" + base64.URLEncoding.EncodeToString(raw), aad, ErrMalformed},
		{"std base64 alphabet", "v1:k1:" + strings.Repeat("+/", 20), aad, ErrMalformed},
		{"truncated", "v1:k1:" + base64.RawURLEncoding.EncodeToString(raw[:nonceSize+tagSize-1]), aad, ErrMalformed},
		{"extra field", ct + ":x", aad, ErrMalformed},
		{"canary as body", "v1:k1:" + canary, aad, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := kr.Decrypt(tc.ct, tc.aad)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decrypt: got error %v, want %v", err, tc.want)
			}
			if got != nil {
				t.Errorf("Decrypt: got %d bytes of plaintext with an error, want none", len(got))
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("error message: got %q, want it free of the plaintext", err)
			}
			if _, err := kr.Rotate(tc.ct, tc.aad); !errors.Is(err, tc.want) {
				t.Errorf("Rotate: got error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestUnknownKeyMessage(t *testing.T) {
	t.Parallel()
	ct, err := testKeyring(t, "gone").EncryptString(canary, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = testKeyring(t, "k1").DecryptString(ct, "a")
	for _, want := range []string{`"gone"`, "key file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error: got %v, want it to mention %s", err, want)
		}
	}
}

// A value under a key this process does not hold, when the key file cannot be read
// again, says so: it is not told apart from a retired key otherwise.
func TestUnknownKeyWithAnUnreadableFile(t *testing.T) {
	t.Parallel()
	ct, err := testKeyring(t, "elsewhere").EncryptString(canary, "a")
	if err != nil {
		t.Fatal(err)
	}
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(k.ID+":"+base64.StdEncoding.EncodeToString(k.Bytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kr, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = kr.DecryptString(ct, "a")
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "reading the key file again failed") {
		t.Fatalf("got %v, want ErrUnknownKey saying the key file could not be read again", err)
	}
}

func TestIsCiphertext(t *testing.T) {
	t.Parallel()
	ct, err := testKeyring(t, "k1").EncryptString("x", "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{ct, true},
		{"", false},
		{"hunter2", false},
		{"v1:k1:", false},
		{"v1:k1:abc", false},
		{"Bearer " + ct, false},
	} {
		if got := IsCiphertext(tc.in); got != tc.want {
			t.Errorf("IsCiphertext(%.20q): got %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	path, legacy := legacyKeyFile(t)
	kr1, err := LoadKeyring(path)
	if err != nil {
		t.Fatalf("LoadKeyring(legacy file): got error %v, want nil", err)
	}
	if got, want := kr1.PrimaryID(), KeyID(legacy); got != want {
		t.Fatalf("legacy primary id: got %q, want %q", got, want)
	}
	const aad = "mcp_servers/u/env/GITHUB_TOKEN"
	old, err := kr1.EncryptString(canary, aad)
	if err != nil {
		t.Fatal(err)
	}
	if kr1.NeedsRotation(old) {
		t.Errorf("NeedsRotation before rotation: got true, want false")
	}
	same, err := kr1.Rotate(old, aad)
	if err != nil || same != old {
		t.Errorf("Rotate with the primary key: got (%.12q, %v), want the input unchanged", same, err)
	}

	added, err := AddKeyToFile(path)
	if err != nil {
		t.Fatalf("AddKeyToFile: got error %v, want nil", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 && runtime.GOOS != "windows" {
		t.Errorf("key file mode after AddKeyToFile: got %04o, want 0600", got)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantFile := added.ID + ":" + base64.StdEncoding.EncodeToString(added.Bytes) + "\n" +
		base64.StdEncoding.EncodeToString(legacy) + "\n"
	if string(data) != wantFile {
		t.Errorf("key file after AddKeyToFile: got %d lines, want the new key line above the legacy line", strings.Count(string(data), "\n"))
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("files in the key directory: got %d, want 1 (no temp file left)", len(entries))
	}

	kr2, err := LoadKeyring(path)
	if err != nil {
		t.Fatalf("LoadKeyring after AddKeyToFile: got error %v, want nil", err)
	}
	if got := kr2.PrimaryID(); got != added.ID || got == kr1.PrimaryID() {
		t.Fatalf("primary after rotation: got %q, want the new key %q", got, added.ID)
	}
	if got, want := fmt.Sprint(kr2.IDs()), fmt.Sprint([]string{added.ID, kr1.PrimaryID()}); got != want {
		t.Errorf("IDs after rotation: got %s, want %s", got, want)
	}
	if got, err := kr2.DecryptString(old, aad); err != nil || got != canary {
		t.Fatalf("decrypt old ciphertext after rotation: got error %v, want the plaintext", err)
	}
	if !kr2.NeedsRotation(old) {
		t.Errorf("NeedsRotation(old ciphertext): got false, want true")
	}
	rotated, err := kr2.Rotate(old, aad)
	if err != nil {
		t.Fatalf("Rotate: got error %v, want nil", err)
	}
	if want := "v1:" + added.ID + ":"; !strings.HasPrefix(rotated, want) {
		t.Errorf("rotated ciphertext: got prefix %.14q, want %q", rotated, want)
	}
	if kr2.NeedsRotation(rotated) {
		t.Errorf("NeedsRotation(rotated): got true, want false")
	}
	if got, err := kr2.DecryptString(rotated, aad); err != nil || got != canary {
		t.Errorf("decrypt rotated ciphertext: got error %v, want the plaintext", err)
	}
	// A keyring loaded from the file before the rotation follows the file: it meets a
	// value under the new key and reads the file again (a server running while the CLI
	// rotates). One built in memory with the old key only cannot open it.
	if got, err := kr1.DecryptString(rotated, aad); err != nil || got != canary {
		t.Errorf("keyring loaded before the rotation, decrypting a rotated value: got %v, want the plaintext", err)
	}
	if kr1.PrimaryID() != added.ID {
		t.Errorf("keyring loaded before the rotation: primary %q after reloading, want %q", kr1.PrimaryID(), added.ID)
	}
	oldOnly, err := NewKeyring(Key{Bytes: legacy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oldOnly.DecryptString(rotated, aad); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("old key only, decrypting a rotated value: got %v, want ErrUnknownKey", err)
	}
	if _, err := kr2.Rotate(old, "mcp_servers/other/env/GITHUB_TOKEN"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("Rotate with the wrong aad: got %v, want ErrDecrypt", err)
	}

	// A second rotation keeps both older keys.
	if _, err := AddKeyToFile(path); err != nil {
		t.Fatal(err)
	}
	kr3, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(kr3.IDs()); got != 3 {
		t.Errorf("keys after two rotations: got %d, want 3", got)
	}
	for _, ct := range []string{old, rotated} {
		if got, err := kr3.DecryptString(ct, aad); err != nil || got != canary {
			t.Errorf("decrypt after two rotations: got error %v, want the plaintext", err)
		}
	}
}

func TestAddKeyToFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.key")
	if _, err := AddKeyToFile(missing); err == nil {
		t.Errorf("AddKeyToFile(missing file): got nil error, want one")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("AddKeyToFile(missing file): got a new file, want none")
	}
	bad := filepath.Join(dir, "bad.key")
	writeFile(t, bad, "# nothing here\n", 0o600)
	if _, err := AddKeyToFile(bad); err == nil || !strings.Contains(err.Error(), "no keys") {
		t.Errorf("AddKeyToFile(file without keys): got %v, want a no keys error", err)
	}
	if data, _ := os.ReadFile(bad); string(data) != "# nothing here\n" {
		t.Errorf("file after a failed AddKeyToFile: got %q, want it unchanged", data)
	}
}

func TestLoadKeyringFormat(t *testing.T) {
	t.Parallel()
	k1, _ := GenerateKey()
	k2, _ := GenerateKey()
	b1 := base64.StdEncoding.EncodeToString(k1.Bytes)
	b2 := base64.StdEncoding.EncodeToString(k2.Bytes)
	for _, tc := range []struct {
		name, content string
		wantIDs       []string
	}{
		{"legacy", b1 + "\n", []string{KeyID(k1.Bytes)}},
		{"no trailing newline", b1, []string{KeyID(k1.Bytes)}},
		{"crlf and spaces", "  " + b1 + " \r\n", []string{KeyID(k1.Bytes)}},
		{"comments and blanks", "# rotated 2025-01-01\n\nnew:" + b2 + "\n  # old\n" + b1 + "\n", []string{"new", KeyID(k1.Bytes)}},
		{"explicit ids", "a1:" + b1 + "\nb2:" + b2 + "\n", []string{"a1", "b2"}},
		{"16-char id", "abcdefghij012345:" + b1, []string{"abcdefghij012345"}},
		{"same key under two ids", "a:" + b1 + "\nb:" + b1, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "secret.key")
			writeFile(t, path, tc.content, 0o600)
			kr, err := LoadKeyring(path)
			if err != nil {
				t.Fatalf("LoadKeyring: got error %v, want nil", err)
			}
			if got, want := fmt.Sprint(kr.IDs()), fmt.Sprint(tc.wantIDs); got != want {
				t.Errorf("IDs: got %s, want %s", got, want)
			}
			if got := kr.PrimaryID(); got != tc.wantIDs[0] {
				t.Errorf("PrimaryID: got %q, want %q", got, tc.wantIDs[0])
			}
		})
	}
}

func TestLoadKeyringErrors(t *testing.T) {
	t.Parallel()
	k, _ := GenerateKey()
	good := base64.StdEncoding.EncodeToString(k.Bytes)
	short := base64.StdEncoding.EncodeToString(k.Bytes[:16])
	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    []string // substrings of the error
	}{
		{"empty file", "", 0o600, []string{"no keys"}},
		{"only comments", "# a\n\n# b\n", 0o600, []string{"no keys"}},
		{"short key", good + "\n" + short + "\n", 0o600, []string{"line 2", "16 bytes, want 32"}},
		{"long key", base64.StdEncoding.EncodeToString(append(bytes.Clone(k.Bytes), 1)), 0o600, []string{"line 1", "33 bytes"}},
		{"bad base64", "# c\n" + good[:20] + "!" + good[21:], 0o600, []string{"line 2", "base64"}},
		{"url base64", strings.NewReplacer("+", "-", "/", "_").Replace(good) + "-_", 0o600, []string{"line 1", "base64"}},
		{"upper-case kid", "Main:" + good, 0o600, []string{"line 1", "key id"}},
		{"kid too long", "abcdefghijklmnopq:" + good, 0o600, []string{"line 1", "key id"}},
		{"empty kid", ":" + good, 0o600, []string{"line 1", "key id"}},
		{"kid with dash", "k-1:" + good, 0o600, []string{"line 1", "key id"}},
		{"duplicate kid", "a:" + good + "\n\na:" + base64.StdEncoding.EncodeToString(make([]byte, 32)), 0o600, []string{"line 3", `duplicate key id "a"`, "line 1"}},
		{"duplicate bare key", good + "\n" + good, 0o600, []string{"line 2", "duplicate key id"}},
		{"readable by others", good + "\n", 0o644, []string{"chmod 600 "}},
		{"readable by group", good + "\n", 0o640, []string{"chmod 600 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.mode != 0o600 && runtime.GOOS == "windows" {
				t.Skip("no POSIX modes on windows")
			}
			path := filepath.Join(t.TempDir(), "secret.key")
			writeFile(t, path, tc.content, tc.mode)
			kr, err := LoadKeyring(path)
			if err == nil {
				t.Fatalf("LoadKeyring: got keyring %v, want an error", kr)
			}
			msg := err.Error()
			for _, want := range append([]string{path}, tc.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("error: got %q, want it to contain %q", msg, want)
				}
			}
			if tc.mode != 0o600 && !strings.Contains(msg, "chmod 600 "+path) {
				t.Errorf("error: got %q, want it to say chmod 600 %s", msg, path)
			}
			if strings.Contains(msg, good) || strings.Contains(msg, good[:20]) || strings.Contains(msg, short) {
				t.Errorf("error: got %q, want it free of key material", msg)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		_, err := LoadKeyring(filepath.Join(t.TempDir(), "nope.key"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("LoadKeyring(missing): got %v, want an os.ErrNotExist error", err)
		}
	})
}

func TestNewKeyringErrors(t *testing.T) {
	t.Parallel()
	k, _ := GenerateKey()
	for _, tc := range []struct {
		name string
		keys []Key
	}{
		{"no keys", nil},
		{"short key", []Key{{ID: "a", Bytes: k.Bytes[:31]}}},
		{"bad id", []Key{{ID: "A", Bytes: k.Bytes}}},
		{"duplicate id", []Key{{ID: "a", Bytes: k.Bytes}, {ID: "a", Bytes: k.Bytes}}},
	} {
		if _, err := NewKeyring(tc.keys...); err == nil {
			t.Errorf("NewKeyring(%s): got nil error, want one", tc.name)
		}
	}
	kr, err := NewKeyring(Key{Bytes: k.Bytes})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kr.PrimaryID(), KeyID(k.Bytes); got != want {
		t.Errorf("PrimaryID of a key without id: got %q, want %q", got, want)
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	t.Parallel()
	k, _ := GenerateKey()
	kr, _ := NewKeyring(k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k), fmt.Sprintf("%x", k), fmt.Sprint(kr), fmt.Sprintf("%+v", kr), fmt.Sprintf("%v", *kr.cur.Load())} {
		if strings.Contains(s, base64.StdEncoding.EncodeToString(k.Bytes)) || strings.Contains(s, fmt.Sprintf("%x", k.Bytes)) || strings.Contains(s, fmt.Sprint(k.Bytes)) {
			t.Errorf("formatted key or keyring: got %q, want no key bytes", s)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t, "k1")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			aad := fmt.Sprintf("row/%d", i)
			for range 50 {
				ct, err := kr.EncryptString(canary, aad)
				if err != nil {
					errs <- err
					return
				}
				if got, err := kr.DecryptString(ct, aad); err != nil || got != canary {
					errs <- fmt.Errorf("round trip: got error %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestLooksSecretName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"authorization", true},
		{"Proxy-Authorization", true},
		{"Cookie", true},
		{"Set-Cookie", true},
		{"X-API-Key", true},
		{"x-api-key", true},
		{"api_key", true},
		{"apikey", true},
		{"APIKEY", true},
		{"apiKey", true},
		{"XApiKey", true},
		{"token", true},
		{"access_token", true},
		{"accessToken", true},
		{"ACCESSTOKEN", true},    // one word, but a known run-together form
		{"MYACCESSTOKEN", false}, // one unknown word: no way to find "token" inside it safely
		{"PGPASSWORD", true},     // run together, ending in a word that names only secrets
		{"DBPASSWD", true},
		{"MYAPIKEY", true},
		{"CLIENTSECRET", true},
		{"auth", true},
		{"X-Auth-Token", true},
		{"secret", true},
		{"client_secret", true},
		{"clientSecret", true},
		{"password", true},
		{"passwd", true},
		{"pwd", true},
		{"DB_PASS", true},
		{"private_key", true},
		{"privateKey", true},
		{"credential", true},
		{"credentials", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"session", true},
		{"session_id", true},
		{"JSESSIONID", true},
		{"signature", true},
		{"X-Hub-Signature", true},
		{"OPENAI_API_KEY", true},
		{"ANTHROPIC_API_KEY", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"GITHUB_TOKEN", true},
		{"github.token", true},
		{"oauth2Token", true},
		{"dbPassword", true},
		{"DB_PASSWORD", true},
		{"SLACK_BOT_TOKEN", true},
		{"API_KEY_2", true},
		{"PASSWORD_B64", true},
		{"api_key_value", true},
		{"key1", true},

		{"", false},
		{"---", false},
		{"keyboard", false},
		{"monkey", false},
		{"hotkey", false},
		{"turkey", false},
		{"Content-Type", false},
		{"Accept", false},
		{"User-Agent", false},
		{"path", false},
		{"PATH", false},
		{"HOME", false},
		{"tokenizer_model", false},
		{"tokenizer", false},
		{"max_tokens", false},
		{"maxTokens", false},
		{"token_type", false},
		{"token_url", false},
		{"key_id", false},
		{"keyId", false},
		{"public_key", false},
		{"sort_key", false},
		{"next_page_token", false},
		{"pageToken", false},
		{"oauth", false},
		{"author", false},
		{"bypass", false},
		{"passenger", false},
		{"secretary", false},
		{"NODE_ENV", false},
		{"LOG_LEVEL", false},
		{"value", false},
		{"2", false},
	} {
		if got := LooksSecretName(tc.name); got != tc.want {
			t.Errorf("LooksSecretName(%q): got %v, want %v (words %q)", tc.name, got, tc.want, textcheck.NameWords(tc.name))
		}
	}
}

func TestLooksSecretValue(t *testing.T) {
	t.Parallel()
	random := base64.StdEncoding.EncodeToString([]byte("\x8f\x12\xa9\x07\xee\x31\x5c\xd0\x44\x9b\x7a\x02\xc6\x1f\x83\x5e\xb4\x29\x70\xfa\xd3\x0c\x66\x91"))
	for _, tc := range []struct {
		name, v string
		want    bool
	}{
		{"bearer", "Bearer abcdefghijklmnop0123", true},
		{"bearer lower case", "bearer abcdefghijklmnop0123", true},
		{"token scheme", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789", true},
		{"basic", "Basic dXNlcjpwYXNzd29yZA==", true},
		{"jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", true},
		{"unsigned jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", true},
		{"openai", "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", true},
		{"anthropic", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", true},
		{"stripe", "sk_live_AbCdEfGhIjKlMnOpQr", true},
		{"github classic", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", true},
		{"github oauth", "gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", true},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", true},
		{"gitlab", "glpat-AbCdEfGhIjKlMnOpQrSt", true},
		{"slack bot", "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOp", true},
		{"slack user", "xoxp-1234567890-abcdef", true},
		{"aws key id", "AKIAIOSFODNN7EXAMPLE", true},
		{"aws temp key id", "ASIAIOSFODNN7EXAMPLE", true},
		{"pem", "-----BEGIN PRIVATE KEY-----\nMIIEvQ...\n-----END PRIVATE KEY-----\n", true},
		{"pem rsa", "-----BEGIN RSA PRIVATE KEY-----\nMIIE...", true},
		{"pem openssh", "-----BEGIN OPENSSH PRIVATE KEY-----", true},
		{"url with password", "postgres://app:s3cr3t@db.internal:5432/app", true},
		{"random base64", random, true},
		{"random base64url", strings.NewReplacer("+", "-", "/", "_").Replace(random), true},
		{"surrounding space", "  " + random + "\n", true},

		{"empty", "", false},
		{"short word", "hunter2", false},
		{"bearer too short", "Bearer abc", false},
		{"bearer alone", "Bearer", false},
		{"sentence", "the quick brown fox jumps over the lazy dog again and again", false},
		{"sentence naming a prefix", "use an sk-... key from the dashboard settings page", false},
		{"content type", "application/json", false},
		{"user agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", false},
		{"url", "https://api.example.com/v1/resources?limit=100&cursor=abc", false},
		{"url with user only", "https://key@o0.ingest.example.io/0", false},
		{"url with a git user", "git+ssh://git@github.com/org/repo.git", false},
		{"url with a token as user", "https://ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@github.com/org/repo.git", true},
		{"npm git url with a token as user", "git+https://glpat-AbCdEfGhIjKlMnOpQrSt@gitlab.com/org/mcp.git", true},
		{"url with a secret-named query value", "https://api.example.com/hook?access_token=abc123", true},
		{"url with a password query value", "postgres://db.internal/app?sslmode=require&password=hunter2", true},
		{"url with a token-shaped query value", "https://api.example.com/v1?k=ghp_abcdefghijklmnopqrstuvwxyz0123456789", true},
		{"slack webhook", "https://hooks.slack.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX", true},
		{"url with a random path segment", "https://api.example.com/hooks/Zq3xV9kLm2Pw8RtY4nBc7DfGh6JsKa1E", true},
		{"url with a word path", "https://api.example.com/v1/customers/invoices/latest", false},
		{"url with an empty secret-named value", "https://api.example.com/login?password=", false},
		{"path", "/usr/local/lib/node_modules/@modelcontextprotocol/server-everything/dist/index.js", false},
		{"path with digits", "/home/user2/Projects/App3/src/v1/Index9.ts", false},
		{"data path", "/var/lib/toolwarden/data/pg/16/base/1/2619_fsm", false},
		{"relative path", "packages/server-everything/dist/index.js", false},
		{"sha256 hex", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", false},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", false},
		{"upper uuid", "123E4567-E89B-12D3-A456-426614174000", false},
		{"identifier", "com.example.service.UserAccountManager", false},
		{"snake identifier", "some_really_long_configuration_value_name", false},
		{"pem public key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg...", false},
		{"public cert", "-----BEGIN CERTIFICATE-----", false},
		{"number", "12345678901234567890123456789012345", false},
		{"sk too short", "sk-abc", false},
		{"akia wrong length", "AKIAIOSFODNN7EXAMPL", false},
		{"repeated", strings.Repeat("aB3", 20), false},
	} {
		if got := LooksSecretValue(tc.v); got != tc.want {
			t.Errorf("LooksSecretValue(%s %.30q): got %v, want %v (entropy %.2f)", tc.name, tc.v, got, tc.want, shannonEntropy(tc.v))
		}
	}
}

// TestLooksSecretValueRandom checks the entropy fallback against what it exists
// for: random keys of unknown issuers. A miss is possible by chance (about 1 in
// 2,500 for 32 random bytes), so a handful is tolerated; the bound is far from
// what chance produces, so the test does not flake.
func TestLooksSecretValueRandom(t *testing.T) {
	t.Parallel()
	misses := 0
	for range 1000 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		if !LooksSecretValue(base64.StdEncoding.EncodeToString(b)) {
			misses++
		}
	}
	if misses > 10 {
		t.Errorf("random base64 keys not detected: got %d of 1000, want at most 10", misses)
	}
}
