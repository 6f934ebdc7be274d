// Package secrets encrypts secret values (HTTP header values, env values, tokens of
// MCP server registrations) at rest, and recognises values and names that hold
// secrets (docs/security.md).
//
// Ciphertexts are text, so they fit the same columns and JSON fields as the
// plaintext they replace:
//
//	v1:<kid>:<base64url(nonce || AES-256-GCM ciphertext and tag)>
//
// The key id travels with every value so keys can be rotated without a flag day:
// the first key of the key file encrypts, every key decrypts, and a background job
// re-encrypts old values with [Keyring.Rotate] at its own pace. Callers pass
// associated data that names the row and field a value belongs to
// ("mcp_servers/<uuid>/headers/Authorization"), so a ciphertext copied into another
// row or field fails to decrypt instead of leaking there.
//
// No error returned by this package contains plaintext or key material, so errors
// may be logged and shown as they are.
package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
)

// KeySize is the length of a key in bytes: AES-256.
const KeySize = 32

const (
	version   = "v1"
	nonceSize = 12
	tagSize   = 16
	// maxKeyIDLen bounds key ids so they stay cheap to carry in every ciphertext.
	maxKeyIDLen = 16
	// maxKeyFileSize keeps a wrong --secret-key-file (a log, a database dump) from
	// being read into memory whole; a key line is ~60 bytes.
	maxKeyFileSize = 1 << 20
)

// Sentinel errors of Decrypt and Rotate, for errors.Is. The errors returned wrap
// them with the detail of what went wrong.
var (
	// ErrMalformed means the value is not a ciphertext of this package (or is
	// truncated); it was never produced by Encrypt, or was damaged in storage.
	ErrMalformed = errors.New("malformed ciphertext")
	// ErrUnknownKey means the value names a key id the keyring does not hold,
	// which usually means a key line was removed from the key file too early.
	ErrUnknownKey = errors.New("unknown key id")
	// ErrDecrypt means authentication failed: the associated data differs from
	// the one used to encrypt (the value was moved to another row or field), or
	// the ciphertext was altered.
	ErrDecrypt = errors.New("decryption failed")
)

// Key is one AES-256 key and the id that ciphertexts use to name it.
type Key struct {
	// ID matches [a-z0-9]{1,16}; it is stored in clear in every ciphertext.
	ID string
	// Bytes is the 32-byte key.
	Bytes []byte
}

// GenerateKey returns a new random key whose ID is derived from its bytes (see
// [KeyID]), so a key written without an id gets the same id when read back.
func GenerateKey() (Key, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return Key{}, fmt.Errorf("secrets: generate key: %w", err)
	}
	return Key{ID: KeyID(b), Bytes: b}, nil
}

// KeyID is the id given to a key that has none: the first 8 hex characters of
// the SHA-256 of its bytes. The legacy key file holds one bare key line; deriving
// its id from the key keeps that id stable across restarts without rewriting the file.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// String names the key by id only, so a Key that ends up in a log line or an
// error message through %v or %s does not print its bytes.
func (k Key) String() string { return "secrets.Key(" + k.ID + ")" }

// GoString is String for %#v, for the same reason.
func (k Key) GoString() string { return k.String() }

// LogValue is String for log/slog, for the same reason.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// ring is one immutable set of keys: the ones that may decrypt and the primary that
// encrypts. A Keyring holds the current one.
type ring struct {
	primary string
	ids     []string // in file order, primary first
	aeads   map[string]cipher.AEAD
	macs    [][]byte // each key's MAC key, the primary's first (see MAC)
}

// NewKeyring builds a keyring; the first key is the primary. A key with an empty
// ID gets [KeyID] of its bytes. The key bytes are copied into the ciphers, so the
// caller may wipe or reuse its slices afterwards.
func NewKeyring(keys ...Key) (*Keyring, error) {
	r, err := newRing(keys)
	if err != nil {
		return nil, err
	}
	kr := &Keyring{}
	kr.cur.Store(r)
	return kr, nil
}

func newRing(keys []Key) (*ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("secrets: keyring needs at least one key")
	}
	kr := &ring{aeads: make(map[string]cipher.AEAD, len(keys))}
	for i, k := range keys {
		id := k.ID
		if id == "" {
			id = KeyID(k.Bytes)
		}
		if !validKeyID(id) {
			return nil, fmt.Errorf("secrets: key %d: bad key id (want 1 to %d characters a-z, 0-9)", i+1, maxKeyIDLen)
		}
		if len(k.Bytes) != KeySize {
			return nil, fmt.Errorf("secrets: key %q is %d bytes, want %d (AES-256)", id, len(k.Bytes), KeySize)
		}
		if _, dup := kr.aeads[id]; dup {
			return nil, fmt.Errorf("secrets: key id %q is used twice", id)
		}
		aead, err := newAEAD(k.Bytes)
		if err != nil {
			return nil, fmt.Errorf("secrets: key %q: %w", id, err)
		}
		kr.aeads[id] = aead
		kr.ids = append(kr.ids, id)
	}
	kr.primary = kr.ids[0]
	for _, k := range keys {
		mac, err := hkdf.Key(sha256.New, k.Bytes, nil, "toolwarden mac v1", sha256.Size)
		if err != nil {
			return nil, fmt.Errorf("secrets: derive a MAC key: %w", err)
		}
		kr.macs = append(kr.macs, mac)
	}
	return kr, nil
}

// MAC is HMAC-SHA256 of data under a key derived from the primary key: a digest that
// can be stored beside what it covers and checked later (VerifyMAC), which nobody
// without the key file can forge, and which does not reveal secret values the way a
// plain hash of a weak secret could be guessed offline. It changes when the primary
// key does.
func (kr *ring) MAC(data []byte) []byte {
	return macWith(kr.macs[0], data)
}

// VerifyMAC reports whether mac is the MAC of data under any key of the keyring, so
// what was sealed before a rotation still verifies until its key is retired.
func (kr *ring) VerifyMAC(data, mac []byte) bool {
	for _, k := range kr.macs {
		if hmac.Equal(macWith(k, data), mac) {
			return true
		}
	}
	return false
}

func macWith(key, data []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(data)
	return h.Sum(nil)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	// The standard 12-byte nonce and 16-byte tag; GCM's Seal and Open keep no
	// state between calls, which is what makes Keyring safe for concurrent use.
	return cipher.NewGCM(block)
}

// PrimaryID is the id of the key that Encrypt uses.
func (kr *ring) PrimaryID() string { return kr.primary }

// IDs lists every key id, primary first, in key file order; for status pages and
// for checking that no stored value still needs a key before it is removed.
func (kr *ring) IDs() []string { return append([]string(nil), kr.ids...) }

// LoadKeyring reads a key file (see [ParseKeyFile] for the format) and refuses
// one that group or others may access, because whoever reads it can decrypt
// every stored secret.
func LoadKeyring(path string) (*Keyring, error) {
	// The stamp is taken before the read, as reloadLocked does: a file renamed over it in
	// between (a rotation's new key) then differs from the stamp and is read at the next
	// look. Taken after, it would be the new file's, and the keys of the old one held
	// until the file changed again.
	st := stampOf(path)
	keys, _, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	if afterLoadRead != nil {
		afterLoadRead()
	}
	kr, err := NewKeyring(keys...)
	if err != nil {
		return nil, err
	}
	kr.path = path
	kr.stamp.Store(st)
	kr.checked.Store(time.Now().UnixNano())
	return kr, nil
}

// afterLoadRead, when set (by tests), runs in LoadKeyring between the read of the key
// file and the keyring's making: where a rotation's write may fall.
var afterLoadRead func()

// readKeyFile returns the parsed keys and the raw contents of the key file at path.
func readKeyFile(path string) ([]Key, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: key file: %w", err)
	}
	defer f.Close()
	// Stat the open file rather than the path, so the mode checked is the mode of
	// the file read even if the path is swapped in between.
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("secrets: key file %s is not a regular file", path)
	}
	// Windows reports made-up permission bits; its ACLs are out of our reach.
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, nil, fmt.Errorf("secrets: key file %s has mode %04o, so group or others may read it: chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: read key file %s: %w", path, err)
	}
	if len(data) > maxKeyFileSize {
		return nil, nil, fmt.Errorf("secrets: key file %s is larger than %d bytes; is it the right file?", path, maxKeyFileSize)
	}
	keys, err := ParseKeyFile(path, data)
	if err != nil {
		return nil, nil, err
	}
	return keys, data, nil
}

// ParseKeyFile parses the contents of a key file; name is used in error messages
// only. The format stays compatible with the single line that the first run
// writes (base64 of 32 random bytes):
//
//   - blank lines and lines starting with # are ignored;
//   - every other line is "<base64 key>" or "<kid>:<base64 key>", with kid
//     matching [a-z0-9]{1,16} and the key in standard, padded base64;
//   - a line without kid gets kid = [KeyID] of the key;
//   - the first key is the primary.
//
// Errors name the file and line, never the key text.
func ParseKeyFile(name string, data []byte) ([]Key, error) {
	var keys []Key
	seen := map[string]int{} // kid → line
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kid, enc, hasKid := strings.Cut(line, ":")
		if !hasKid {
			kid, enc = "", line
		}
		kid, enc = strings.TrimSpace(kid), strings.TrimSpace(enc)
		if hasKid && !validKeyID(kid) {
			return nil, fmt.Errorf("secrets: key file %s line %d: bad key id before \":\" (want 1 to %d characters a-z, 0-9)", name, n, maxKeyIDLen)
		}
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			// The decoder's error quotes an offset only, but keep it out anyway:
			// nothing about the key text belongs in a message that gets logged.
			return nil, fmt.Errorf("secrets: key file %s line %d: key is not valid base64 (want standard base64 of %d random bytes)", name, n, KeySize)
		}
		if len(b) != KeySize {
			return nil, fmt.Errorf("secrets: key file %s line %d: key is %d bytes, want %d (AES-256)", name, n, len(b), KeySize)
		}
		if !hasKid {
			kid = KeyID(b)
		}
		if first, dup := seen[kid]; dup {
			return nil, fmt.Errorf("secrets: key file %s line %d: duplicate key id %q (first on line %d)", name, n, kid, first)
		}
		seen[kid] = n
		keys = append(keys, Key{ID: kid, Bytes: b})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("secrets: key file %s holds no keys", name)
	}
	return keys, nil
}

// AddKeyToFile rotates keys: it generates a new key and writes it as the new
// first line "<kid>:<base64>" of the key file at path, keeping the old lines (and
// so the old keys) below it. Processes that load the file afterwards encrypt with
// the new key and still decrypt everything encrypted before.
//
// The file must already exist and load cleanly, so a mistyped path cannot
// produce a fresh key file that nothing reads. It is replaced atomically (a temp
// file in the same directory, fsync, rename, mode 0600); a symlinked path is
// followed, so the link's target is what gets replaced. Two concurrent calls on
// the same file may lose one of the new keys, so callers serialize them
// (`toolwarden secrets` locks <file>.lock and the database first).
func AddKeyToFile(path string) (Key, error) {
	for {
		k, err := GenerateKey()
		if err != nil {
			return Key{}, err
		}
		// A clash with an id already in the file (possible only with hand-picked
		// ids) would make the file unloadable, so draw again.
		if err := PrependKeyToFile(path, k); !errors.Is(err, errKeyIDTaken) {
			if err != nil {
				return Key{}, err
			}
			return k, nil
		}
	}
}

// errKeyIDTaken is PrependKeyToFile's refusal of a key whose id the file holds already.
var errKeyIDTaken = errors.New("key id taken")

// PrependKeyToFile is AddKeyToFile with the key k the caller made (GenerateKey), so it
// can record the key's id before the file changes. A key whose id the file holds
// already is refused, and the file left as it is.
func PrependKeyToFile(path string, k Key) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("secrets: key file: %w", err)
	}
	old, data, err := readKeyFile(real)
	if err != nil {
		return err
	}
	if !validKeyID(k.ID) || len(k.Bytes) != KeySize {
		return fmt.Errorf("secrets: add key %q: not a key of %d bytes with an id of 1 to %d characters a-z, 0-9", k.ID, KeySize, maxKeyIDLen)
	}
	if hasKeyID(old, k.ID) {
		return fmt.Errorf("secrets: key file %s holds a key %q already: %w", path, k.ID, errKeyIDTaken)
	}
	var buf bytes.Buffer
	buf.WriteString(k.ID + ":" + base64.StdEncoding.EncodeToString(k.Bytes) + "\n")
	buf.Write(data)
	if err := atomicfile.Write(real, buf.Bytes()); err != nil {
		return fmt.Errorf("secrets: write key file %s: %w", path, err)
	}
	return nil
}

func hasKeyID(keys []Key, id string) bool {
	for _, k := range keys {
		if k.ID == id {
			return true
		}
	}
	return false
}

// Encrypt seals plaintext with the primary key and a fresh random nonce. aad is
// authenticated but not stored: pass the same string to Decrypt. Use a string
// that names the row and field ("mcp_servers/<uuid>/headers/Authorization") so
// the ciphertext is useless anywhere else.
func (kr *ring) Encrypt(plaintext []byte, aad string) (string, error) {
	aead := kr.aeads[kr.primary]
	// Random nonces are safe for 2^32 encryptions per key (NIST SP 800-38D);
	// secrets of server registrations stay far below that, and rotation resets it.
	nonce := make([]byte, nonceSize, nonceSize+len(plaintext)+tagSize)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets: encrypt: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, plaintext, []byte(aad))
	return version + ":" + kr.primary + ":" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Decrypt opens a ciphertext made by Encrypt with any key of the keyring. aad
// must be the string given to Encrypt. Errors wrap ErrMalformed, ErrUnknownKey or
// ErrDecrypt.
func (kr *ring) Decrypt(ciphertext, aad string) ([]byte, error) {
	kid, sealed, err := parse(ciphertext)
	if err != nil {
		return nil, err
	}
	aead, ok := kr.aeads[kid]
	if !ok {
		return nil, fmt.Errorf("secrets: key %q is not in the keyring (was it removed from the key file? keys held: %s): %w",
			kid, strings.Join(kr.ids, ", "), ErrUnknownKey)
	}
	plain, err := aead.Open(nil, sealed[:nonceSize], sealed[nonceSize:], []byte(aad))
	if err != nil {
		return nil, fmt.Errorf("secrets: key %q: the value was altered or belongs to another field: %w", kid, ErrDecrypt)
	}
	return plain, nil
}

// NeedsRotation reports whether ciphertext was sealed with a key other than the
// primary, so a rotation job can skip values that are already current without
// decrypting them. Values that are not ciphertexts report false; use
// IsCiphertext to find plaintext left from before encryption.
func (kr *ring) NeedsRotation(ciphertext string) bool {
	kid, _, err := parse(ciphertext)
	return err == nil && kid != kr.primary
}

// IsCiphertext reports whether s has the shape of a value made by Encrypt
// (version, key id, nonce and tag present); it does not check that any key opens
// it. Storage code uses it to tell encrypted values from legacy plaintext.
func IsCiphertext(s string) bool {
	_, _, err := parse(s)
	return err == nil
}

// parse splits a ciphertext into its key id and nonce||sealed bytes. Its errors
// never quote the input: a value that fails to parse may well be plaintext.
func parse(s string) (kid string, sealed []byte, err error) {
	rest, ok := strings.CutPrefix(s, version+":")
	if !ok {
		return "", nil, fmt.Errorf("secrets: not a %s ciphertext: %w", version, ErrMalformed)
	}
	kid, enc, ok := strings.Cut(rest, ":")
	if !ok || !validKeyID(kid) {
		return "", nil, fmt.Errorf("secrets: ciphertext has no valid key id: %w", ErrMalformed)
	}
	// Strict decoding rejects non-canonical encodings, so each ciphertext has
	// exactly one text form and an edited character is never silently ignored.
	sealed, err = base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", nil, fmt.Errorf("secrets: ciphertext body is not base64url: %w", ErrMalformed)
	}
	if len(sealed) < nonceSize+tagSize {
		return "", nil, fmt.Errorf("secrets: ciphertext is truncated (%d bytes, want at least %d): %w", len(sealed), nonceSize+tagSize, ErrMalformed)
	}
	return kid, sealed, nil
}

func validKeyID(id string) bool {
	if len(id) == 0 || len(id) > maxKeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func joinIDs(ids []string) string { return strings.Join(ids, ",") }
