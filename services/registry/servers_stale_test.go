package registry_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
)

// An update based on the server's current updated_at applies; one based on an older one
// (someone saved since) is refused as stale and changes nothing. Every save moves
// updated_at, so it works as the server's version.
func TestUpdateServerExpectUpdatedAt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("versioned"))
	seen := sv.UpdatedAt
	off := false
	saved := f.update(sv.ID, registry.Patch{Enabled: &off, ExpectUpdatedAt: &seen})
	if !saved.UpdatedAt.After(seen) {
		t.Fatalf("a save left updated_at at %s (was %s)", saved.UpdatedAt, seen)
	}
	again := f.update(sv.ID, registry.Patch{Enabled: &off})
	if !again.UpdatedAt.After(saved.UpdatedAt) {
		t.Fatalf("a second save left updated_at at %s (was %s)", again.UpdatedAt, saved.UpdatedAt)
	}

	desc := "from a stale form"
	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Description: &desc, ExpectUpdatedAt: &seen})
	if ft, ok := fault.As(err); !ok || ft.Kind != fault.KindStale || ft.Code != registry.CodeStale {
		t.Fatalf("an update based on an old updated_at: got %v, want a %s fault", err, registry.CodeStale)
	}
	if cur, _ := f.reg.GetServer(f.ctx, sv.ID); cur.Description == desc || !cur.UpdatedAt.Equal(again.UpdatedAt) {
		t.Errorf("after the stale update: description %q, updated_at %s; want both unchanged", cur.Description, cur.UpdatedAt)
	}
}
