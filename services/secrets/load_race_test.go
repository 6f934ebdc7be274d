package secrets

import (
	"errors"
	"os"
	"testing"
)

// A rotation that renames its new key file in while LoadKeyring reads the old one is
// seen: a value sealed with the new key decrypts, and the next look at the file makes
// the new key the one that encrypts. (With the file's stamp taken after the read, the
// keyring held the old keys under the new file's stamp until the file changed again.)
// Not parallel: it sets afterLoadRead.
func TestLoadKeyringBesideARotation(t *testing.T) {
	path, _ := legacyKeyFile(t)
	var added Key
	afterLoadRead = func() {
		afterLoadRead = nil
		var err error
		if added, err = AddKeyToFile(path); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterLoadRead = nil })
	kr, err := LoadKeyring(path)
	if err != nil || added.ID == "" {
		t.Fatalf("load: %v (key added: %q)", err, added.ID)
	}
	ahead, err := NewKeyring(added)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := ahead.EncryptString("new", "aad")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := kr.DecryptString(sealed, "aad"); err != nil || got != "new" {
		t.Fatalf("a value under the key the rotation added: %q %v", got, err)
	}
	kr.checked.Store(0) // its next look at the file is due
	if id := kr.PrimaryID(); id != added.ID {
		t.Fatalf("primary after the next look at the file: %s, want the added %s", id, added.ID)
	}
}

// PrependKeyToFile adds the caller's key as the primary, and refuses one whose id the
// file holds already, leaving the file as it is.
func TestPrependKeyToFile(t *testing.T) {
	t.Parallel()
	path, _ := legacyKeyFile(t)
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := PrependKeyToFile(path, k); err != nil {
		t.Fatal(err)
	}
	kr, err := LoadKeyring(path)
	if err != nil || kr.PrimaryID() != k.ID || len(kr.IDs()) != 2 {
		t.Fatalf("after adding %s: %v %v", k.ID, kr, err)
	}
	before, _ := os.ReadFile(path)
	if err := PrependKeyToFile(path, k); !errors.Is(err, errKeyIDTaken) {
		t.Fatalf("a key id the file holds: %v, want errKeyIDTaken", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a refused key changed the file")
	}
}
