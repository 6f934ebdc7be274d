package tools_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestSortByNameInDB: where the database's collation is not C, discovery validates a
// server's tools in the order the database sorts their names, as ORDER BY name did.
// The test database's collation is C, so that order is the names' bytes.
func TestSortByNameInDB(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names := []string{"b", "B", "_a", "a_b", "a", "é", "Z", "a-b", "ab", "a.b", "0", "zz", "Ä"}
	ts := make([]toolstate.Pending, len(names))
	for i, n := range names {
		ts[i] = toolstate.Pending{ID: n, Def: schema.Tool{Name: n}}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	if err := tools.SortByNameInDB(f.ctx, tx, ts); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(ts))
	for i, p := range ts {
		got[i] = p.Def.Name
		if p.ID != p.Def.Name {
			t.Fatalf("tool %q carries the id of %q: sorting separated them", p.Def.Name, p.ID)
		}
	}
	want := slices.Clone(names)
	slices.SortFunc(want, strings.Compare)
	if !slices.Equal(got, want) {
		t.Fatalf("got order %q, want %q", got, want)
	}
}
