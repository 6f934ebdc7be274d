package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// Checkpoints signed on another machine (the key never here, serve with
// --checkpoint-every 0) are trusted by the page's check once it is given that key's
// public key; without it the check uses none. A public key that is not the server's own
// signing key's, while the server signs checkpoints itself, is refused at start: the
// page would refuse every checkpoint it writes.
func TestCheckpointsSignedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir, away := t.TempDir(), t.TempDir()
	outside, err := audit.OpenSigner(filepath.Join(away, "checkpoint.key")) // writes its .pub beside it
	if err != nil {
		t.Fatal(err)
	}
	pub := audit.PublicKeyPath(filepath.Join(away, "checkpoint.key"))
	cc := app.CheckpointConfig{Dir: filepath.Join(dataDir, "checkpoints"), KeyFile: filepath.Join(dataDir, "checkpoint.key"), PublicKey: pub}
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) { c.Checkpoints = cc }})
	a.CreateUser(t, "carol", "auditor", "correct horse battery staple")
	cp, err := audit.MakeCheckpoint(ctx, a.Pool, outside)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.WriteCheckpoint(cc.Dir, cp); err != nil {
		t.Fatal(err)
	}
	res, note, err := a.AuditLog.Verify(ctx, nil)
	if err != nil || !res.OK() || res.Checkpoint == nil || res.Checkpoint.ID != cp.ID {
		t.Fatalf("the page's check with the outside key's public key: checkpoint %v, note %q, %v; want the checkpoint of entry %d", res.Checkpoint, note, err, cp.ID)
	}

	// The server signing with its own key while told to trust another's: refused.
	cc.Every = 3600e9
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.New(ctx, app.Config{Pool: dbtest.New(t), Keys: keys, Version: "test", AdminPassword: apptest.AdminPassword, Checkpoints: cc})
	if err == nil || !strings.Contains(err.Error(), "is not that of the key this server signs checkpoints with") {
		t.Fatalf("a public key not the server's own while it signs: %v; want it refused", err)
	}
}
