package audit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A word with more than fewMatches entries, all of them old (a person who left after
// many actions): a search for it reads about as many entries as it finds, not every
// newer one. Before, it read the log newest first checking each entry's words, the
// whole log to find one page. The thresholds are lowered so a small log shows it; the
// rows read are PostgreSQL's own counts, on a pool of one connection so they can be
// flushed before they are read.
func TestSearchManyOldMatchesReadsTheMatches(t *testing.T) {
	// Not parallel: it lowers the package's thresholds.
	defer func(few, walk int) { fewMatches, searchWalk = few, walk }(fewMatches, searchWalk)
	fewMatches, searchWalk = 1_000, 500

	const old, newer = 3_000, 30_000 // "leaver" in 1…3000 only; 3001…33000 without it
	ctx := context.Background()
	pool, err := db.NewPool(ctx, dbtest.NewURL(t)+" pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	start := seedLeaver(t, pool, old, newer)
	l := NewLog(pool)
	if _, err := l.IndexSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE audit_log, audit_search`); err != nil {
		t.Fatal(err)
	}

	// rowsRead runs fn and returns how many rows of audit_log and audit_search it read.
	rowsRead := func(fn func()) int64 {
		t.Helper()
		read := func() (n int64) {
			t.Helper()
			if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
				t.Fatal(err)
			}
			if err := pool.QueryRow(ctx, `SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::bigint
				FROM pg_stat_user_tables WHERE relname IN ('audit_log', 'audit_search')`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := read()
		fn()
		return read() - before
	}
	desc := func(from, to int64, keep func(int64) bool) []int64 {
		var out []int64
		for id := to; id >= from; id-- {
			if keep == nil || keep(id) {
				out = append(out, id)
			}
		}
		return out
	}
	all := func(f Filter) (got []int64, pages int) {
		t.Helper()
		for {
			p, err := l.List(ctx, f)
			if err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			pages++
			for _, r := range p.Items {
				got = append(got, r.ID)
			}
			if p.NextCursor == 0 {
				return got, pages
			}
			if pages > 1000 {
				t.Fatalf("%+v: no last page", f)
			}
			f.Cursor = p.NextCursor
		}
	}

	// The first page: the newest 50 of the leaver's entries, reading far fewer rows
	// than the 30,000 newer entries.
	var p Page
	n := rowsRead(func() {
		if p, err = l.List(ctx, Filter{Q: "leaver"}); err != nil {
			t.Fatal(err)
		}
	})
	var first []int64
	for _, r := range p.Items {
		first = append(first, r.ID)
	}
	if want := desc(old-49, old, nil); !slices.Equal(first, want) || p.NextCursor != old-49 {
		t.Errorf("first page: %v, next %d; want %v, next %d", first, p.NextCursor, want, old-49)
	}
	t.Logf("first page of q=leaver: %d rows read", n)
	if n > newer/2 {
		t.Errorf("first page of q=leaver read %d rows of audit_log and audit_search; want about the %d matches, not the %d newer entries", n, old, newer)
	}
	// A filter most entries pass (result=success, the calls group, the most common
	// action) does not narrow the search: it reads the matches too.
	for _, f := range []Filter{{Q: "leaver", Result: ResultSuccess}, {Q: "leaver", Action: "calls"}, {Q: "leaver", Action: "tool.call"}} {
		n = rowsRead(func() {
			if p, err = l.List(ctx, f); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("first page of %s: %d rows read", f.Query().Encode(), n)
		if len(p.Items) != 50 || p.Items[0].ID > old || n > newer/2 {
			t.Errorf("first page of %s: %d entries from %v, %d rows read; want 50 of the %d matches, not the %d newer entries read",
				f.Query().Encode(), len(p.Items), head(ids(p)), n, old, newer)
		}
	}
	// The banner's count of entries newer than an old page's top.
	var c int64
	n = rowsRead(func() {
		if c, err = l.CountNewer(ctx, Filter{Q: "leaver"}, 100); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("CountNewer of q=leaver: %d rows read", n)
	if c != MaxNewer || n > newer/2 {
		t.Errorf("CountNewer after 100: %d, having read %d rows; want %d, without reading the %d newer entries", c, n, MaxNewer, newer)
	}
	// And after the newest of them, as the banner of the first page asks: none.
	n = rowsRead(func() {
		if c, err = l.CountNewer(ctx, Filter{Q: "leaver"}, old); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("CountNewer of q=leaver after the first page: %d rows read", n)
	if c != 0 || n > newer/2 {
		t.Errorf("CountNewer after %d: %d, having read %d rows; want 0, without reading the %d newer entries", old, c, n, newer)
	}
	if c, err = l.CountNewer(ctx, Filter{Q: "leaver", Action: "auth"}, old-100); err != nil || c != 14 {
		t.Errorf("CountNewer of sign-ins after %d: %d, %v; want 14", old-100, c, err)
	}

	// Every page, complete and in order: alone, with another filter, with a time range.
	for _, tc := range []struct {
		f    Filter
		want []int64
	}{
		{Filter{Q: "leaver", Limit: 200}, desc(1, old, nil)},
		{Filter{Q: "leaver", Action: "auth", Limit: 30}, desc(1, old, func(id int64) bool { return id%7 == 0 })},
		{Filter{Q: "LEAVER", Action: "tool.call", Cursor: 2000, Limit: 500}, desc(1, 1999, func(id int64) bool { return id%7 != 0 })},
		{Filter{Q: "leaver", From: start.Add(1000 * time.Millisecond), To: start.Add(2500 * time.Millisecond), Limit: 100}, desc(1000, 2499, nil)},
		{Filter{Q: "leaver", From: start, Limit: 700}, desc(1, old, nil)},
		{Filter{Q: "leaver", Actor: "user3"}, nil},
		{Filter{Q: "leaver", Result: ResultSuccess, Limit: 200}, desc(1, old, nil)},
		{Filter{Q: "leaver", Result: ResultFailure}, nil},
		// A word in one of five entries, old and new.
		{Filter{Q: "common", Actor: "leaver", Limit: 100}, desc(1, old, func(id int64) bool { return id%5 == 0 })},
	} {
		got, pages := all(tc.f)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %d ids in %d pages, %v…; want %d, %v…", tc.f, len(got), pages, head(got), len(tc.want), head(tc.want))
		}
	}
	if p, err = l.List(ctx, Filter{Q: "common", Limit: 3}); err != nil || !slices.Equal(ids(p), []int64{old + newer, old + newer - 5, old + newer - 10}) {
		t.Errorf("q=common: %v, %v; want the newest three", ids(p), err)
	}
	// A deep page reads about as much as the first.
	n = rowsRead(func() {
		if p, err = l.List(ctx, Filter{Q: "leaver", Cursor: 1000}); err != nil {
			t.Fatal(err)
		}
	})
	if len(p.Items) != 50 || p.Items[0].ID != 999 || n > newer/2 {
		t.Errorf("q=leaver below 1000: %d entries from %v, %d rows read", len(p.Items), head(ids(p)), n)
	}
}

func head(ids []int64) []int64 { return ids[:min(len(ids), 5)] }

func ids(p Page) []int64 {
	out := make([]int64, len(p.Items))
	for i, r := range p.Items {
		out[i] = r.ID
	}
	return out
}

// seedLeaver writes ids 1…old+newer to pool's audit log, "leaver" the actor of the first
// old only; every 7th entry a sign-in (the auth group), and one in 5 of the others
// mentions "common"; times 1 ms apart from start (returned), so a time range picks ids too.
func seedLeaver(t *testing.T, pool *pgxpool.Pool, old, newer int) time.Time {
	t.Helper()
	ctx := context.Background()
	start := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	if _, err := pool.Exec(ctx, `INSERT INTO audit_log (id, at, actor_kind, actor_name, action, target_type, target_id,
			target_name, payload, prev_hash, hash)
		SELECT g, $1::timestamptz + g * interval '1 millisecond', 'user', CASE WHEN g <= $2 THEN 'leaver' ELSE 'user' || (g % 50) END,
			CASE WHEN g % 7 = 0 THEN 'user.login' ELSE 'tool.call' END, 'tool', 't' || g, 'tool-' || (g % 100),
			json_build_object('note', CASE WHEN g % 5 = 0 THEN 'common ' || g ELSE 'n' || g END), '\x00'::bytea, decode(md5(g::text), 'hex')
		FROM generate_series(1, $3::bigint) g`, start, old, old+newer); err != nil {
		t.Fatal(err)
	}
	return start
}
