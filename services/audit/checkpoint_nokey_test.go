package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// With no trusted key (serve --checkpoint-every 0 never made one, and there is no
// .pub), the server's check uses no checkpoint and says so: a checkpoint anyone can
// drop into the directory, signed with their own key for the chain they left, would
// otherwise be shown as the one the chain was checked against. Once the key is there,
// that checkpoint is refused.
func TestServerCheckNeedsTrustedKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := t.TempDir()
	cps, keyPath := filepath.Join(dir, "checkpoints"), filepath.Join(dir, "checkpoint.key")
	chainOf(t, pool, 10)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	planted, err := MakeCheckpoint(ctx, pool, NewSigner(other))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteCheckpoint(cps, planted); err != nil {
		t.Fatal(err)
	}
	src := CheckpointSource{Dir: cps, KeyFile: keyPath, NeedsKey: true}
	if cp, note, err := LoadCheckpoint(src); cp != nil || note != NoTrustedKeyNote || err != nil {
		t.Fatalf("LoadCheckpoint with no key: %v, %q, %v; want none, %q", cp, note, err, NoTrustedKeyNote)
	}
	l := NewLog(pool)
	t.Cleanup(l.Close)
	l.UseCheckpoints(src)
	res, note, err := l.Verify(ctx, nil)
	if err != nil || !res.OK() || res.Checkpoint != nil || note != NoTrustedKeyNote {
		t.Fatalf("the server's check with no key: checkpoint %v, note %q, %v; want none, %q", res.Checkpoint, note, err, NoTrustedKeyNote)
	}
	// The CLI still checks it against the key it names, and says so.
	src.NeedsKey = false
	if cp, _, err := LoadCheckpoint(src); err != nil || cp == nil || cp.ID != planted.ID {
		t.Fatalf("LoadCheckpoint for the CLI: %v, %v; want the checkpoint of entry %d", cp, err, planted.ID)
	}
	// A key made since (a serve with checkpoints on) is trusted: the planted one is refused.
	if _, err := OpenSigner(keyPath); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Verify(ctx, nil); !errors.Is(err, ErrCheckpointSignature) {
		t.Fatalf("the server's check once the key is there: %v; want the planted checkpoint refused (%v)", err, ErrCheckpointSignature)
	}
}
