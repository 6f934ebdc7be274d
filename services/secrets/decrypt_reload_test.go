package secrets

import (
	"errors"
	"strings"
	"testing"
)

// A value naming a key the keyring lacks makes it read the key file again once per
// change of the file, not for each value: anyone who may submit a sealed value (an
// import's `sealed=v1:…`) can name a made-up key. A key added to the file is still read
// at once, and a changed file that does not load is read once and its failure said
// each time.
func TestDecryptReadsTheFileOncePerChange(t *testing.T) {
	t.Parallel()
	path, _ := legacyKeyFile(t)
	kr, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	kr.r() // its look at the file is now recent
	stranger, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewKeyring(stranger)
	if err != nil {
		t.Fatal(err)
	}
	made, err := other.EncryptString("s3cret", "aad")
	if err != nil {
		t.Fatal(err)
	}
	reads := kr.reads.Load()
	for range 50 {
		if _, err := kr.DecryptString(made, "aad"); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("a value under a key the file lacks: %v, want ErrUnknownKey", err)
		}
	}
	if n := kr.reads.Load() - reads; n != 0 {
		t.Fatalf("50 values under an unknown key read the unchanged key file %d times, want 0", n)
	}

	added, err := AddKeyToFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := NewKeyring(added)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := ahead.EncryptString("new", "aad")
	if err != nil {
		t.Fatal(err)
	}
	reads = kr.reads.Load()
	if got, err := kr.DecryptString(fresh, "aad"); err != nil || got != "new" {
		t.Fatalf("a value under a key just added to the file: %q %v", got, err)
	}
	for range 50 {
		if _, err := kr.DecryptString(made, "aad"); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("a value under a key the file lacks: %v, want ErrUnknownKey", err)
		}
	}
	if n := kr.reads.Load() - reads; n != 1 {
		t.Fatalf("reads of the key file after it changed once: %d, want 1", n)
	}

	writeFile(t, path, "not a key\n", 0o600)
	reads = kr.reads.Load()
	for range 50 {
		if _, err := kr.DecryptString(made, "aad"); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "reading the key file again failed") {
			t.Fatalf("a value under an unknown key with a key file that does not load: %v, want ErrUnknownKey and why", err)
		}
	}
	if n := kr.reads.Load() - reads; n != 1 {
		t.Fatalf("reads of a changed key file that does not load: %d, want 1", n)
	}
	if got, err := kr.DecryptString(fresh, "aad"); err != nil || got != "new" {
		t.Fatalf("a value under a key held, beside a key file that does not load: %q %v", got, err)
	}
}
