package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
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

// With the key and its .pub both lost (kept outside the data dir, not copied on a host
// move) and the checkpoints kept, the new key's checkpointer checks the chain against
// the old key's newest checkpoint: a chain cut back since is refused, not signed.
func TestCheckpointerContinuesFromALostKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	a, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	chainOf(t, pool, 5)
	signed, err := NewCheckpointer(pool, a, cps).Write(ctx)
	if err != nil || signed == "" {
		t.Fatalf("key A: got %q, %v; want a checkpoint", signed, err)
	}
	for _, p := range []string{keyPath, PublicKeyPath(keyPath)} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id = 5`)
	chainOf(t, pool, 2) // the application appends after the cut: ids 5 and 6 again
	b, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewCheckpointer(pool, b, cps).Write(ctx)
	if !errors.Is(err, ErrChainRewound) || got != "" || !strings.Contains(err.Error(), "entry 5, signed at") ||
		!strings.Contains(err.Error(), "by key "+Fingerprint(a.Public())+", not this one") {
		t.Fatalf("key B after the chain was cut below key A's checkpoint: got %q, %v; want ErrChainRewound naming entry 5 and key A", got, err)
	}
	if latest, _ := LatestCheckpoint(cps); latest != signed {
		t.Fatalf("newest checkpoint: got %q, want still key A's %q", latest, signed)
	}
}

// A new key whose chain still reaches the old key's checkpoint signs the head, even
// unchanged, so its own series starts; from then on it extends its own.
func TestCheckpointerNewKeyReachingTheOldOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	a, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	chainOf(t, pool, 5)
	if got, err := NewCheckpointer(pool, a, cps).Write(ctx); err != nil || got == "" {
		t.Fatalf("key A: got %q, %v; want a checkpoint", got, err)
	}
	for _, p := range []string{keyPath, PublicKeyPath(keyPath)} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	b, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	w := NewCheckpointer(pool, b, cps)
	got, err := w.Write(ctx)
	if err != nil || got == "" {
		t.Fatalf("key B, head unchanged: got %q, %v; want its first checkpoint", got, err)
	}
	if cp, err := ReadCheckpoint(got); err != nil || cp.Verify(b.Public()) != nil || cp.ID != 5 {
		t.Fatalf("key B's first checkpoint: %+v, %v; want entry 5 signed by key B", cp, err)
	}
	if again, err := NewCheckpointer(pool, b, cps).Write(ctx); err != nil || again != "" {
		t.Fatalf("key B again, head unchanged: got %q, %v; want nothing written", again, err)
	}
}
