package db

import (
	"fmt"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
)

// The way out of a dirty database names the versions it may be at: after a failed up
// of N, N or the one before; after a failed down of N (dirty at the one before N), also
// N; after a failed down of the first (dirty at -1), 0 or the first.
func TestDirtyHintNamesTheVersions(t *testing.T) {
	t.Parallel()
	vs := MigrationVersions()
	if len(vs) < 3 {
		t.Fatal("too few migrations to test")
	}
	last, mid := vs[len(vs)-1], vs[len(vs)-2]
	for _, c := range []struct {
		dirty int
		want  []string
	}{
		{int(last), []string{fmt.Sprintf("dirty at version %d", last), fmt.Sprintf("%d if it holds migration %d whole, %d if none of it", last, last, mid)}},
		{int(mid), []string{fmt.Sprintf("%d if it holds migration %d whole, %d if none of it, %d if a down of migration %d was undone", mid, mid, vs[len(vs)-3], last, last)}},
		{-1, []string{"dirty at no version", fmt.Sprintf("0 if it holds none, %d if a down of the first migration was undone", vs[0])}},
	} {
		msg := dirtyHint(migrate.ErrDirty{Version: c.dirty}).Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("dirty at %d: %q\nwant it to say %q", c.dirty, msg, w)
			}
		}
		if !strings.Contains(msg, "toolwarden migrate force V") {
			t.Errorf("dirty at %d: %q names no command", c.dirty, msg)
		}
	}
}
