package grants_test

import (
	"context"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A removed person's workspace is still known, owned by nobody (""): not a directory
// no conversation claimed, which a grant would open.
func TestOwnerOfDirRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice := addUser(t, pool, "alice")
	if _, err := s.Claim(ctx, "proj", "proj", alice.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	if owner, known, err := s.OwnerOfDir(ctx, "proj"); err != nil || !known || owner != "" {
		t.Fatalf("the workspace of a removed person: %q %v %v, want known, owned by nobody", owner, known, err)
	}
	if owner, known, err := s.OwnerOfDir(ctx, "nobodys"); err != nil || known || owner != "" {
		t.Fatalf("a workspace nobody claimed: %q %v %v", owner, known, err)
	}
}

// A conversation claimed with another directory (an id with capitals once named its
// own) moves to the one it has now, so that its owner owns it; not onto a directory
// another conversation has.
func TestClaimMovesDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	s := grants.New(pool, nil)
	alice, bob := addUser(t, pool, "alice"), addUser(t, pool, "bob")
	for _, c := range [][2]string{{"MyProj", "MyProj"}, {"Other", "Other"}} {
		if _, err := s.Claim(ctx, c[0], c[1], alice.ID, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if owner, err := s.Claim(ctx, "MyProj", "c-1111", alice.ID, "alice"); err != nil || owner != alice.ID {
		t.Fatalf("claim in the new directory: %q %v", owner, err)
	}
	if owner, known, err := s.OwnerOfDir(ctx, "c-1111"); err != nil || !known || owner != alice.ID {
		t.Fatalf("the new directory's owner: %q %v %v, want alice", owner, known, err)
	}
	if _, known, err := s.OwnerOfDir(ctx, "MyProj"); err != nil || known {
		t.Fatalf("the old directory is still claimed: %v %v", known, err)
	}
	// Bob holds the directory Other would move to: Other does not get it.
	if _, err := s.Claim(ctx, "c-2222", "c-2222", bob.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	if owner, err := s.Claim(ctx, "Other", "c-2222", alice.ID, "alice"); err == nil {
		t.Fatalf("Other moved onto bob's directory: owner %q", owner)
	}
	if owner, _, err := s.OwnerOfDir(ctx, "c-2222"); err != nil || owner != bob.ID {
		t.Fatalf("bob's directory: %q %v", owner, err)
	}
}
