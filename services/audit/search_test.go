package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The free-text index is filled behind the appends in steps, and a search indexes what
// it needs before it reads, so it finds entries no indexer has reached yet, also while
// other searches and indexers work at the same time.
func TestSearchIndexBehindTheAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	l := NewLog(pool)
	count := func() (n int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_search`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	find := func(word string) []int64 {
		t.Helper()
		p, err := l.List(ctx, Filter{Q: word})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, r := range p.Items {
			out = append(out, r.ID)
		}
		return out
	}

	const first = 2*searchBatch + 500 // three steps
	prev := loadChain(t, pool, 1, genesis, first)
	if n := count(); n != 0 {
		t.Fatalf("%d entries indexed before any indexer ran", n)
	}
	if n, err := l.IndexSearch(ctx); err != nil || n != first {
		t.Fatalf("IndexSearch: %d, %v; want %d", n, err, first)
	}
	if n, err := l.IndexSearch(ctx); err != nil || n != 0 {
		t.Fatalf("IndexSearch again: %d, %v; want 0", n, err)
	}
	if got := find(fmt.Sprintf("c%d", first)); len(got) != 1 || got[0] != first {
		t.Errorf("the last indexed entry: found %v", got)
	}

	// Appended after the last indexing: searches and an indexer race for them.
	const more = searchBatch + 1000
	loadChain(t, pool, first+1, prev, more)
	last := int64(first + more)
	var wg sync.WaitGroup
	found := make([][]int64, 4)
	errs := make([]error, 5)
	for i := range found {
		wg.Go(func() {
			p, err := l.List(ctx, Filter{Q: fmt.Sprintf("c%d", last-int64(i))})
			errs[i] = err
			for _, r := range p.Items {
				found[i] = append(found[i], r.ID)
			}
		})
	}
	wg.Go(func() { _, errs[4] = l.IndexSearch(ctx) })
	wg.Wait()
	for i, got := range found {
		if errs[i] != nil || len(got) != 1 || got[0] != last-int64(i) {
			t.Errorf("search %d for an entry not indexed yet: %v, %v; want [%d]", i, got, errs[i], last-int64(i))
		}
	}
	if errs[4] != nil {
		t.Errorf("IndexSearch beside the searches: %v", errs[4])
	}
	if n := count(); n != last {
		t.Errorf("%d entries indexed, want %d (each once)", n, last)
	}
	// A word in every entry, with another filter: the newest first, as without q.
	p, err := l.List(ctx, Filter{Q: "hello", Limit: 3})
	if err != nil || len(p.Items) != 3 || p.Items[0].ID != last || p.NextCursor != last-2 {
		t.Errorf("a word of every entry: %v, next %d, %v", p.Items, p.NextCursor, err)
	}
	if n, err := l.CountNewer(ctx, Filter{Q: "hello"}, last-10); err != nil || n != 10 {
		t.Errorf("CountNewer with q: %d, %v; want 10", n, err)
	}
}
