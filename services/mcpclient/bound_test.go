package mcpclient_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A call bound to a connection identity runs only on a session with that identity; the
// identity stays the server's while it reconnects, and a changed setting changes it.
func TestCallToolBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	sv := e.create(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Headers: map[string]string{"X-Api-Key": "first-key-0123456789"}})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	id := e.mgr.Identity(ctx, sv.ID)
	if id == "" {
		t.Fatal("a connected server has no identity")
	}
	args := map[string]any{"message": "hi"}
	if _, err := e.mgr.CallToolBound(ctx, sv.ID, id, "echo", args, nil); err != nil {
		t.Fatalf("bound to its identity: %v", err)
	}
	if _, err := e.mgr.CallToolBound(ctx, sv.ID, "another", "echo", args, nil); !errors.Is(err, mcpclient.ErrIdentityChanged) {
		t.Fatalf("bound to another identity: got %v, want ErrIdentityChanged", err)
	}
	if _, err := e.mgr.CallToolBound(ctx, sv.ID, "", "echo", args, nil); err != nil {
		t.Fatalf("bound to nothing: %v", err)
	}
	// Reconnecting changes nothing that was approved, even while there is no session.
	done := make(chan error, 1)
	go func() { done <- e.mgr.Reconnect(ctx, sv.ID) }()
	for range 50 {
		if got := e.mgr.Identity(ctx, sv.ID); got != id {
			t.Fatalf("identity while reconnecting: got %q, want %q", got, id)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A new credential is a new identity.
	key := "second-key-0123456789"
	if _, err := e.reg.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Headers: map[string]*string{"X-Api-Key": &key}}); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(ctx, sv.ID)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	if got := e.mgr.Identity(ctx, sv.ID); got == id || got == "" {
		t.Fatalf("identity after a new credential: got %q, want a new one", got)
	}
	if _, err := e.mgr.CallToolBound(ctx, sv.ID, id, "echo", args, nil); !errors.Is(err, mcpclient.ErrIdentityChanged) {
		t.Fatalf("bound to the old identity: got %v, want ErrIdentityChanged", err)
	}
}

// A session that outlives a key rotation answers with the identity a fresh read of its
// server's settings gives, so a plan approved after the rotation runs on it, as one
// approved before it does.
func TestCallToolBoundAfterKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(k.ID+":"+base64.StdEncoding.EncodeToString(k.Bytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, nil, keys)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	sv := e.create(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		Headers: map[string]string{"X-Api-Key": "first-key-0123456789"}})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	before := e.mgr.Identity(ctx, sv.ID)
	if _, err := secrets.AddKeyToFile(path); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.reg.Connection(ctx, sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Identity == before {
		t.Fatal("the identity did not change with the primary key; the test proves nothing")
	}
	if got := e.mgr.Identity(ctx, sv.ID); got != cfg.Identity {
		t.Fatalf("session identity after rotation: got %q, want the settings' %q", got, cfg.Identity)
	}
	if _, err := e.mgr.CallToolBound(ctx, sv.ID, cfg.Identity, "echo", map[string]any{"message": "hi"}, nil); err != nil {
		t.Fatalf("bound to the identity read after the rotation: %v", err)
	}
	// One approved before the rotation (the old key is still held) runs too: the settings
	// are the same.
	if !e.mgr.IdentityMatches(ctx, sv.ID, before) {
		t.Fatal("the identity of before the rotation no longer matches the same settings")
	}
	if _, err := e.mgr.CallToolBound(ctx, sv.ID, before, "echo", map[string]any{"message": "hi"}, nil); err != nil {
		t.Fatalf("bound to the identity read before the rotation: %v", err)
	}
	other := "f" + before[1:]
	if before[0] == 'f' {
		other = "0" + before[1:]
	}
	if e.mgr.IdentityMatches(ctx, sv.ID, other) || e.mgr.IdentityMatches(ctx, sv.ID, "not hex") {
		t.Fatal("another identity matches")
	}
}
