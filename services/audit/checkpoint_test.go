package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A checkpoint key that went missing while its .pub is still there (left behind on a
// host move, say) is refused, not replaced: a new key would overwrite the .pub and its
// checkpoints would no longer be checked against the old key's, losing the check that
// the chain still reaches them. With both files gone a new key is made, as on a first start.
func TestOpenSignerRefusesLostKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	old, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	pubPath := PublicKeyPath(keyPath)
	pubBefore, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	_, err = OpenSigner(keyPath)
	if err == nil || !strings.Contains(err.Error(), "checkpoint.key is missing but "+pubPath+" is there") || !strings.Contains(err.Error(), "--public-key") {
		t.Fatalf("key gone, .pub kept: got %v; want a refusal naming both files and --public-key", err)
	}
	if _, err := os.Stat(keyPath); err == nil {
		t.Errorf("key gone, .pub kept: a new key file was made")
	}
	if after, err := os.ReadFile(pubPath); err != nil || !bytes.Equal(after, pubBefore) {
		t.Errorf("key gone, .pub kept: the .pub was changed (%v)", err)
	}

	// Moved aside, as the error says: a new key, with its own .pub.
	if err := os.Rename(pubPath, filepath.Join(dir, "old.pub")); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatalf("both gone: %v, want a new key", err)
	}
	if s.Public().Equal(old.Public()) {
		t.Fatal("both gone: got the old key back")
	}
	if pub, err := ReadPublicKey(pubPath); err != nil || !pub.Equal(s.Public()) {
		t.Fatalf("both gone: .pub %v, want the new key's", err)
	}
	if again, err := OpenSigner(keyPath); err != nil || !again.Public().Equal(s.Public()) {
		t.Fatalf("reopen the new key: %v, want the same key", err)
	}
}
