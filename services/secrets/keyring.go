package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolwarden/toolwarden/internal/atomicfile"
)

// Keyring holds the keys that may decrypt and the primary key that encrypts. It is
// safe for concurrent use. A keyring loaded from a key file follows the file: when
// `toolwarden secrets rotate` adds a key (or `retire-key` removes one) while the
// server runs, the server sees the change within ReloadEvery, and at once when it
// meets a value sealed with a key it does not hold yet.
type Keyring struct {
	cur     atomic.Pointer[ring]
	path    string                  // the key file; "" for a keyring built in memory
	stamp   atomic.Value            // the file's fileStamp when last read
	failed  atomic.Pointer[failure] // the last read that failed (reloadChanged's)
	checked atomic.Int64            // unix nanoseconds of the last look at the file
	reads   atomic.Int64            // reads of the file since it was loaded (for tests)
	mu      sync.Mutex              // one reload at a time
}

// failure is a read of the key file that failed: the file's fileStamp then, and why.
type failure struct {
	stamp fileStamp
	err   error
}

// ReloadEvery is how often a keyring loaded from a file looks whether it changed.
const ReloadEvery = 5 * time.Second

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: st.ModTime(), size: st.Size()}
}

// r is the current ring, after a look at the key file when one is due.
func (kr *Keyring) r() *ring {
	if kr.path != "" && time.Now().UnixNano()-kr.checked.Load() > int64(ReloadEvery) {
		kr.checked.Store(time.Now().UnixNano())
		if stampOf(kr.path) != kr.stamp.Load() {
			_ = kr.Reload() // a key file that does not load keeps the keys held
		}
	}
	return kr.cur.Load()
}

// Reload reads the key file again (a keyring built in memory has none: no-op). A file
// that does not load leaves the keyring as it was.
func (kr *Keyring) Reload() error {
	if kr.path == "" {
		return nil
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	return kr.reloadLocked()
}

// reloadLocked is Reload with kr.mu held.
func (kr *Keyring) reloadLocked() error {
	kr.reads.Add(1)
	st := stampOf(kr.path)
	keys, _, err := readKeyFile(kr.path)
	if err != nil {
		return err
	}
	r, err := newRing(keys)
	if err != nil {
		return err
	}
	kr.cur.Store(r)
	kr.stamp.Store(st)
	return nil
}

// MAC is HMAC-SHA256 of data under a key derived from the primary key (see ring.MAC).
func (kr *Keyring) MAC(data []byte) []byte { return kr.r().MAC(data) }

// VerifyMAC reports whether mac is the MAC of data under any key of the keyring. A
// MAC that matches none makes a keyring loaded from a file read it again first when
// the file changed: another process may have just made that MAC with a key it added.
func (kr *Keyring) VerifyMAC(data, mac []byte) bool {
	if kr.r().VerifyMAC(data, mac) {
		return true
	}
	if kr.path == "" {
		return false
	}
	if read, _ := kr.reloadChanged(); !read {
		return false
	}
	return kr.cur.Load().VerifyMAC(data, mac)
}

// reloadChanged reads the key file again when it changed since it was last read and
// since a read of it last failed, and reports whether the keyring now holds a newer read
// of it (this call's or another's); err is why the read of the file as it is now failed
// (this time or before). Once per change of the file: a wrong
// MAC or a value naming a made-up key, which anyone can send, must not make each request
// read, parse and derive the keys of the file under kr.mu.
func (kr *Keyring) reloadChanged() (read bool, err error) {
	// Looked at before the lock, so requests that find nothing to read do not queue on
	// it, and again under it: those that found a change wait for one read of it.
	if same, err := kr.sameFile(stampOf(kr.path)); same {
		return false, err
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	st := stampOf(kr.path)
	if same, err := kr.sameFile(st); same {
		// Another request read it meanwhile: the keyring is as of the file now.
		return err == nil, err
	}
	if err := kr.reloadLocked(); err != nil {
		kr.failed.Store(&failure{stamp: st, err: err})
		return false, err
	}
	return true, nil
}

// sameFile reports whether the key file, at stamp st, is the one last read, or the one
// whose read last failed (err is then why).
func (kr *Keyring) sameFile(st fileStamp) (bool, error) {
	if st == kr.stamp.Load() {
		return true, nil
	}
	if f := kr.failed.Load(); f != nil && f.stamp == st {
		return true, f.err
	}
	return false, nil
}

// PrimaryID is the id of the key that Encrypt uses.
func (kr *Keyring) PrimaryID() string { return kr.r().PrimaryID() }

// IDs lists every key id, primary first, in key file order.
func (kr *Keyring) IDs() []string { return kr.r().IDs() }

// String lists key ids only, so a keyring printed by accident shows no key bytes.
func (kr *Keyring) String() string { return "secrets.Keyring(" + joinIDs(kr.cur.Load().ids) + ")" }

// Encrypt seals plaintext with the primary key (see ring.Encrypt).
func (kr *Keyring) Encrypt(plaintext []byte, aad string) (string, error) {
	return kr.r().Encrypt(plaintext, aad)
}

// EncryptString is Encrypt for string values.
func (kr *Keyring) EncryptString(plaintext, aad string) (string, error) {
	return kr.Encrypt([]byte(plaintext), aad)
}

// Decrypt opens a ciphertext made by Encrypt with any key of the keyring. A value
// sealed with a key the keyring does not hold makes a keyring loaded from a file read
// it again first when the file changed: another process may have just added that key.
func (kr *Keyring) Decrypt(ciphertext, aad string) ([]byte, error) {
	plain, err := kr.r().Decrypt(ciphertext, aad)
	if errors.Is(err, ErrUnknownKey) && kr.path != "" {
		read, rerr := kr.reloadChanged()
		if rerr != nil {
			// Say why the key may be missing: a key file this process cannot read
			// (its owner or mode changed) looks otherwise like a retired key.
			return nil, fmt.Errorf("%w; reading the key file again failed: %v", err, rerr)
		}
		if !read {
			return nil, err // the file has not changed since it was read: it lacks the key
		}
		return kr.cur.Load().Decrypt(ciphertext, aad)
	}
	return plain, err
}

// DecryptString is Decrypt for string values.
func (kr *Keyring) DecryptString(ciphertext, aad string) (string, error) {
	b, err := kr.Decrypt(ciphertext, aad)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// NeedsRotation reports whether ciphertext was sealed with a key other than the primary.
func (kr *Keyring) NeedsRotation(ciphertext string) bool { return kr.r().NeedsRotation(ciphertext) }

// Rotate re-encrypts ciphertext with the primary key under the same aad; a value
// already sealed with the primary key is returned unchanged.
func (kr *Keyring) Rotate(ciphertext, aad string) (string, error) {
	plain, err := kr.Decrypt(ciphertext, aad)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	r := kr.cur.Load()
	if !r.NeedsRotation(ciphertext) {
		return ciphertext, nil
	}
	return r.Encrypt(plain, aad)
}

// KeyOf is the id of the key ciphertext was sealed with, or "" when it is not a
// ciphertext of this package.
func KeyOf(ciphertext string) string {
	kid, _, err := parse(ciphertext)
	if err != nil {
		return ""
	}
	return kid
}

// RemoveKeyFromFile retires key id: its line is removed from the key file at path
// (atomically, as AddKeyToFile writes), and so are the temporary copies of the file
// crashed writes left beside it. The primary key (the first) cannot be retired,
// nor a key the file does not hold. The caller checks first that no stored value
// still needs it: values sealed with it no longer decrypt afterwards.
func RemoveKeyFromFile(path, id string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("secrets: key file: %w", err)
	}
	keys, data, err := readKeyFile(real)
	if err != nil {
		return err
	}
	if !hasKeyID(keys, id) {
		return fmt.Errorf("secrets: key file %s holds no key %q (it holds %s)", path, id, joinIDs(idsOf(keys)))
	}
	if keys[0].ID == id {
		return fmt.Errorf("secrets: key %q is the primary key, which encrypts new values; rotate first (toolwarden secrets rotate)", id)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			if k, err := ParseKeyFile(path, []byte(t)); err == nil && len(k) == 1 && k[0].ID == id {
				continue
			}
		}
		out = append(out, line)
	}
	if err := atomicfile.Write(real, []byte(strings.Join(out, "\n"))); err != nil {
		return fmt.Errorf("secrets: write key file %s: %w", path, err)
	}
	// A copy of the file a crashed write left beside it still holds the retired key.
	if _, err := atomicfile.RemoveLeftovers(real); err != nil {
		return fmt.Errorf("secrets: key %q was retired from %s, but a temporary copy of the file a crashed write left beside it (holding the key) could not be removed: %w", id, path, err)
	}
	return nil
}

func idsOf(keys []Key) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

// CountByKey counts the sealed values that rows (one text column each) hold by the id of
// the key that sealed them, for `secrets status` and retiring a key. Values that are not
// sealed are left out.
func CountByKey(rows pgx.Rows) (map[string]int, error) {
	out := map[string]int{}
	var v string
	_, err := pgx.ForEachRow(rows, []any{&v}, func() error {
		if kid := KeyOf(v); kid != "" {
			out[kid]++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("secrets: key usage: %w", err)
	}
	return out, nil
}
