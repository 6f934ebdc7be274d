package audit

import (
	"context"
	"fmt"
	"strings"
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

// An entry whose text would make a tsvector over PostgreSQL's 1 MB (here 2 MB of
// distinct words) is indexed by its first SearchTextChars characters: before, its
// indexing failed, and with it the indexing of every later entry and every search.
func TestSearchIndexTakesAHugeEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	l := NewLog(pool)
	var b strings.Builder
	for i := 0; b.Len() < 2<<20; i++ {
		fmt.Fprintf(&b, "w%x ", i*7919)
	}
	for _, e := range []Entry{
		{Actor: System, Action: "test.huge", TargetType: "test", TargetID: "1", Payload: map[string]any{"text": b.String()}},
		{Actor: System, Action: "test.after", TargetType: "test", TargetID: "2", Payload: map[string]any{"text": "afterword"}},
	} {
		if err := AppendAlone(ctx, pool, e); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.IndexSearch(ctx); err != nil || n != 2 {
		t.Fatalf("IndexSearch: %d, %v; want both entries indexed", n, err)
	}
	for word, want := range map[string]string{"w0 w1eef": "test.huge", "afterword": "test.after", "test.huge": "test.huge"} {
		p, err := l.List(ctx, Filter{Q: word})
		if err != nil || len(p.Items) != 1 || p.Items[0].Action != want {
			t.Errorf("search %q: %+v, %v; want the entry %s", word, p.Items, err, want)
		}
	}
	// The worst text for the size of a tsvector under the cluster's C locale: every
	// character a 4-byte letter, words joined by hyphens (each indexed whole and in its
	// parts), none repeated.
	next := rune(0x10000)
	letter := func() rune { next++; return next }
	for _, parts := range []int{2, 6} {
		var w strings.Builder
		for w.Len() < 4*SearchTextChars*2 {
			for p := range parts {
				if p > 0 {
					w.WriteByte('-')
				}
				w.WriteRune(letter())
				if parts == 2 {
					w.WriteRune(letter())
				}
			}
			w.WriteByte(' ')
		}
		if err := AppendAlone(ctx, pool, Entry{Actor: System, Action: "test.wide", TargetType: "test", TargetID: "3",
			Payload: map[string]any{"text": w.String()}}); err != nil {
			t.Fatal(err)
		}
		if n, err := l.IndexSearch(ctx); err != nil || n != 1 {
			t.Fatalf("IndexSearch of 4-byte words of %d hyphenated parts: %d, %v", parts, n, err)
		}
		var size int
		if err := pool.QueryRow(ctx, `SELECT pg_column_size(doc) FROM audit_search ORDER BY id DESC LIMIT 1`).Scan(&size); err != nil {
			t.Fatal(err)
		}
		t.Logf("4-byte words of %d hyphenated parts: a tsvector of %d bytes (PostgreSQL's limit 1,048,575)", parts, size)
	}

	// A word beyond the first SearchTextChars characters is not found.
	last := strings.Fields(b.String())
	if p, err := l.List(ctx, Filter{Q: last[len(last)-1]}); err != nil || len(p.Items) != 0 {
		t.Errorf("a word past the searchable text: %+v, %v; want none", p.Items, err)
	}
}
