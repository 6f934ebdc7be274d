package audit

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The word index (audit_search) is outside the chain: whoever can write the database
// can edit it. Words planted on entries that do not hold them make no page and no export
// show those entries: each entry named is checked against its own words. (Rows deleted
// from the index still hide their entries: docs/audit.md says so.) Every path a search
// takes: few matches (their ids), many (looked up from the index), and narrowed by an
// actor (read on with the index checked entry by entry).
func TestSearchRechecksTheEntries(t *testing.T) {
	// Not parallel: it lowers the package's thresholds.
	defer func(few, walk int) { fewMatches, searchWalk = few, walk }(fewMatches, searchWalk)
	fewMatches, searchWalk = 3, 2

	ctx := context.Background()
	pool := dbtest.New(t)
	appendWords(t, pool, "zebra", 10) // entry i+1 holds zebra and zebra<i>
	l := NewLog(pool)
	t.Cleanup(l.Close)
	if _, err := l.IndexSearch(ctx); err != nil {
		t.Fatal(err)
	}
	// As the owner: words planted on entries 2 to 9 (not the newest, which the indexer
	// checks on each pass and would index again).
	if _, err := pool.Exec(ctx, `UPDATE audit_search SET doc = to_tsvector('simple', 'zebra4 planted') WHERE id BETWEEN 2 AND 9 AND id <> 5`); err != nil {
		t.Fatal(err)
	}
	exported := func(f Filter) []int64 {
		t.Helper()
		ids := []int64{}
		if err := l.Each(ctx, f, func(r Record) error { ids = append(ids, r.ID); return nil }); err != nil {
			t.Fatalf("export %s: %v", f.Query().Encode(), err)
		}
		return ids
	}
	for _, tc := range []struct {
		f    Filter
		want []int64
	}{
		{Filter{Q: "zebra4"}, []int64{5}},                  // few matches
		{Filter{Q: "planted"}, []int64{}},                  // many: from the index
		{Filter{Q: "planted", Actor: "system"}, []int64{}}, // narrowed: read on
		{Filter{Q: "zebra4", ActorKind: ActorSystem}, []int64{5}},
	} {
		for _, limit := range []int{MaxLimit, 2} {
			f := tc.f
			f.Limit = limit
			var ids []int64
			for page := 0; ; page++ {
				p, err := l.List(ctx, f)
				if err != nil {
					t.Fatalf("search %s: %v", f.Query().Encode(), err)
				}
				for _, r := range p.Items {
					ids = append(ids, r.ID)
				}
				if p.NextCursor == 0 || page > 10 {
					break
				}
				f.Cursor = p.NextCursor
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.want) && !(len(ids) == 0 && len(tc.want) == 0) {
				t.Errorf("search %s, limit %d: got %v, want %v", tc.f.Query().Encode(), limit, ids, tc.want)
			}
		}
		if got := exported(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("export %s: got %v, want %v", tc.f.Query().Encode(), got, tc.want)
		}
		// The "N new entries" banner counts what a page would show.
		if n, err := l.CountNewer(ctx, tc.f, 1); err != nil || n != int64(len(tc.want)) {
			t.Errorf("new entries of %s: %d, %v; want %d", tc.f.Query().Encode(), n, err, len(tc.want))
		}
	}
}
