package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A checkpoint key lost while its .pub stayed (not copied on a host move) stops serve
// and `audit checkpoint` with the way out, instead of starting a new key whose
// checkpoints no longer check the chain against the old ones.
func TestLostCheckpointKeyRefused(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	keyPath := filepath.Join(dataDir, "checkpoint.key")
	if _, err := audit.OpenSigner(keyPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	want := "checkpoint.key is missing but " + filepath.Join(dataDir, "checkpoint.pub") + " is there"
	// On a database with the schema: the command opens the key only after finding one.
	if _, _, err := runCmd(t, "", "audit", "checkpoint", "--data-dir", dataDir, "--database-url", dbtest.NewURL(t)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("audit checkpoint: got %v, want %q", err, want)
	}

	// serve must refuse to start; a start shows in its ready file (and is then stopped).
	ready := filepath.Join(dataDir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--ready-file", ready}, nil, new(strings.Builder), new(strings.Builder))
	}()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-time.After(50 * time.Millisecond):
			if _, serr := os.Stat(ready); serr == nil {
				cancel()
				t.Fatalf("serve started (ended with %v), want a refusal", <-done)
			}
		}
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("serve: got %v, want %q", err, want)
	}
	if _, err := os.Stat(keyPath); err == nil {
		t.Error("a new checkpoint key was made")
	}
}
