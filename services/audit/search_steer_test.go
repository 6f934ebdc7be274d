package audit

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// appendWords appends n entries, in one transaction, whose payload holds word and the
// entry's own word (word and its number, "fresh3").
func appendWords(t *testing.T, pool *pgxpool.Pool, word string, n int) {
	t.Helper()
	var entries []Entry
	for i := range n {
		entries = append(entries, Entry{Actor: System, Action: "test." + word, TargetType: "test", TargetID: fmt.Sprint(i),
			Payload: map[string]any{"text": fmt.Sprintf("%s %s%d", word, word, i)}})
	}
	err := db.WithTx(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := AppendBatch(context.Background(), tx, entries)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// found returns the ids and actions of the entries a search for q finds, newest first.
func found(t *testing.T, l *Log, q string) ([]int64, []string) {
	t.Helper()
	p, err := l.List(context.Background(), Filter{Q: q, Limit: MaxLimit})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	var ids []int64
	var actions []string
	for _, r := range p.Items {
		ids = append(ids, r.ID)
		actions = append(actions, r.Action)
	}
	return ids, actions
}

func idRange(from, to int64) []int64 {
	var ids []int64
	for id := to; id >= from; id-- {
		ids = append(ids, id)
	}
	return ids
}

// The application's role cannot add rows to audit_search (only audit_search_index makes
// them, from the log), and rows planted there before (as it could until migration 58)
// with ids ahead of the log's head do not hide the entries that later get those ids.
// Before, the indexer went on from the highest id in audit_search, so it never indexed
// them and no search found them.
func TestSearchIndexIgnoresRowsPlantedAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	app := dbtest.AppPool(t, url)
	owner, err := db.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)
	l := NewLog(app) // as serve runs it
	const plantSQL = `INSERT INTO audit_search (id, doc)
		SELECT g, to_tsvector('simple'::regconfig, 'decoy') FROM generate_series($1::bigint, $2::bigint) g`
	if _, err := app.Exec(ctx, plantSQL, 1_000, 1_000); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("the application inserting into audit_search: %v; want permission denied", err)
	}
	plant := func(from, to int64) {
		t.Helper()
		if _, err := owner.Exec(ctx, plantSQL, from, to); err != nil {
			t.Fatalf("planting rows %d to %d: %v", from, to, err)
		}
	}

	appendWords(t, app, "before", 3) // 1…3
	if n, err := l.IndexSearch(ctx); err != nil || n != 3 {
		t.Fatalf("IndexSearch: %d, %v; want 3", n, err)
	}
	// Planted with no indexer running until the entries with those ids are appended.
	plant(4, 8)
	plant(1_000_000, 1_000_000)
	appendWords(t, app, "fresh", 10) // 4…13
	if ids, _ := found(t, l, "fresh"); !slices.Equal(ids, idRange(4, 13)) {
		t.Errorf("search for the entries appended over planted rows: %v; want 13…4", ids)
	}
	if ids, _ := found(t, l, "fresh7"); !slices.Equal(ids, []int64{11}) {
		t.Errorf("search for one of them by its own word: %v; want [11]", ids)
	}
	if ids, _ := found(t, l, "decoy"); len(ids) != 0 {
		t.Errorf("search for the planted rows' word: %v; want none", ids)
	}

	// Planted while an indexer runs: the rows ahead of the head are removed by its next
	// pass, before the entries that get their ids are appended.
	plant(14, 20)
	if n, err := l.IndexSearch(ctx); err != nil || n != 0 {
		t.Fatalf("IndexSearch over planted rows: %d, %v; want 0", n, err)
	}
	var rows, beyond int64
	if err := app.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE id > 13) FROM audit_search`).Scan(&rows, &beyond); err != nil {
		t.Fatal(err)
	}
	if rows != 13 || beyond != 0 {
		t.Errorf("audit_search holds %d rows, %d of them ahead of the head; want 13 and none", rows, beyond)
	}
	appendWords(t, app, "later", 4) // 14…17
	if ids, _ := found(t, l, "later"); !slices.Equal(ids, idRange(14, 17)) {
		t.Errorf("search for the entries appended after the planted rows were removed: %v; want 17…14", ids)
	}

	// The application may still only add to the index: the removal is the indexer's.
	if _, err := app.Exec(ctx, `DELETE FROM audit_search WHERE id = 1`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("the application deleting from audit_search: %v; want permission denied", err)
	}
}

// When a superuser deletes the log's tail and the ids are used again by new entries, a
// search finds the new entries by their own words, and not by the deleted ones' words.
// Before, the index kept the deleted entries' words under those ids and the new
// entries were never indexed.
func TestSearchIndexAfterTheTailIsUsedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	l := NewLog(pool)

	appendWords(t, pool, "oldtext", 30) // 1…30
	if n, err := l.IndexSearch(ctx); err != nil || n != 30 {
		t.Fatalf("IndexSearch: %d, %v; want 30", n, err)
	}
	// Fewer new entries than were deleted: some old rows are ahead of the new head.
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id > 20`)
	appendWords(t, pool, "newtext", 5) // 21…25
	ids, actions := found(t, l, "newtext")
	if !slices.Equal(ids, idRange(21, 25)) {
		t.Errorf("search for the new entries: %v; want 25…21", ids)
	}
	for _, a := range actions {
		if a != "test.newtext" {
			t.Errorf("search for the new entries found a %s", a)
		}
	}
	if ids, _ := found(t, l, "oldtext"); !slices.Equal(ids, idRange(1, 20)) {
		t.Errorf("search for the deleted entries' word: %v; want only the 20 kept", ids)
	}
	if ids, _ := found(t, l, "oldtext25"); len(ids) != 0 {
		t.Errorf("search for a deleted entry's own word: %v; want none", ids)
	}
	if ids, _ := found(t, l, "newtext2"); !slices.Equal(ids, []int64{23}) {
		t.Errorf("search for a new entry's own word: %v; want [23]", ids)
	}

	// More new entries than were deleted, with no search between: each is found by its
	// own words, the index holding one row an entry.
	asSuperuser(t, pool, `DELETE FROM audit_log WHERE id > 22`)
	appendWords(t, pool, "newer", 8) // 23…30
	if ids, _ := found(t, l, "newer"); !slices.Equal(ids, idRange(23, 30)) {
		t.Errorf("search for the newer entries: %v; want 30…23", ids)
	}
	if ids, _ := found(t, l, "newtext"); !slices.Equal(ids, []int64{22, 21}) {
		t.Errorf("search for the new entries after the second deletion: %v; want [22 21]", ids)
	}
	var rows int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_search`).Scan(&rows); err != nil || rows != 30 {
		t.Errorf("audit_search holds %d rows (%v); want 30", rows, err)
	}
}

// A pass of the indexer reads a few rows when nothing changed, and about two a halving
// of the log (plus the entries it indexes again) when the tail was used again: never
// the whole index. The rows read are PostgreSQL's own counts, on a pool of one
// connection so they can be flushed before they are read.
func TestSearchIndexPassIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.NewPool(ctx, dbtest.NewURL(t)+" pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l := NewLog(pool)
	const n = 30_000
	loadChain(t, pool, 1, genesis, n)
	if got, err := l.IndexSearch(ctx); err != nil || got != n {
		t.Fatalf("IndexSearch: %d, %v; want %d", got, err, n)
	}
	// Analyzed, as a log of that size is: unanalyzed, the planner reads a small table whole.
	if _, err := pool.Exec(ctx, `ANALYZE audit_log, audit_search`); err != nil {
		t.Fatal(err)
	}
	rowsRead := func() int64 {
		t.Helper()
		read := func() (r int64) {
			t.Helper()
			if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
				t.Fatal(err)
			}
			if err := pool.QueryRow(ctx, `SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::bigint
				FROM pg_stat_user_tables WHERE relname IN ('audit_log', 'audit_search')`).Scan(&r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		before := read()
		if _, err := l.IndexSearch(ctx); err != nil {
			t.Fatal(err)
		}
		return read() - before
	}
	if r := rowsRead(); r > 20 {
		t.Errorf("a pass with nothing to index read %d rows; want a few", r)
	}

	const again = 10
	var prev []byte
	if err := pool.QueryRow(ctx, `SELECT hash FROM audit_log WHERE id = $1`, n-again).Scan(&prev); err != nil {
		t.Fatal(err)
	}
	asSuperuser(t, pool, fmt.Sprintf(`DELETE FROM audit_log WHERE id > %d`, n-again))
	loadChain(t, pool, n-again+1, prev, again)
	halvings := int64(bits.Len(n))
	if r, most := rowsRead(), 4*halvings+4*again+20; r > most {
		t.Errorf("a pass after the tail was used again read %d rows; want at most %d", r, most)
	}
	var stale int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_search s JOIN audit_log a USING (id)
		WHERE s.doc <> audit_search_doc(a.actor_name, a.action, a.target_type, a.target_id, a.target_name, a.payload)`).Scan(&stale); err != nil || stale != 0 {
		t.Errorf("%d rows (%v) hold other words than their entry's; want none", stale, err)
	}
}

// audit_search_doc, which indexes an entry and checks a row indexed, keeps the words
// of an entry's first SearchTextChars characters: a word ending there is found, one
// cut there is not.
func TestSearchDocCutsAtSearchTextChars(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	// The entry's text is " a    " then the payload, a JSON string here: its opening
	// quote, then the words.
	var lead int
	if err := pool.QueryRow(ctx, `SELECT length(audit_search_text('', 'a', '', '', '', '""'))`).Scan(&lead); err != nil {
		t.Fatal(err)
	}
	lead-- // the closing quote
	for _, tc := range []struct {
		end   int // the character "edgeword" ends at
		found bool
	}{{SearchTextChars, true}, {SearchTextChars + 1, false}} {
		f := tc.end - len("edgeword") - lead
		filler := strings.Repeat(" ", f%2) + strings.Repeat("x ", f/2)
		payload := `"` + filler + `edgeword tail"`
		var end int
		var got bool
		if err := pool.QueryRow(ctx, `SELECT strpos(audit_search_text('', 'a', '', '', '', $1::json), 'edgeword') + 7,
			audit_search_doc('', 'a', '', '', '', $1::json) @@ to_tsquery('simple', 'edgeword')`, payload).Scan(&end, &got); err != nil {
			t.Fatal(err)
		}
		if end != tc.end {
			t.Fatalf("the word ends at character %d, want %d", end, tc.end)
		}
		if got != tc.found {
			t.Errorf("a word ending at character %d: found %v, want %v (audit_search_doc must cut at SearchTextChars)", tc.end, got, tc.found)
		}
	}
}

// Migration 58 repairs an index the application's role steered before it: a row planted
// ahead made the old indexer skip the entries below its id and carry on past it; the
// migration deletes the rows from the first entry skipped, so they are indexed again.
func TestMigrationRepairsASteeredIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dbtest.RunMigration(t, pool, "000058_audit_search_checked.down.sql")
	// The indexer before migration 58: on from the highest id in audit_search.
	oldIndex := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO audit_search (id, doc)
			SELECT id, to_tsvector('simple'::regconfig, audit_search_text(actor_name, action, target_type, target_id, target_name, payload))
			FROM audit_log WHERE id > (SELECT coalesce(max(id), 0) FROM audit_search) ORDER BY id`); err != nil {
			t.Fatal(err)
		}
	}
	appendWords(t, pool, "before", 3) // 1…3
	oldIndex()
	if _, err := pool.Exec(ctx, `INSERT INTO audit_search (id, doc) VALUES (6, to_tsvector('simple', 'decoy'))`); err != nil {
		t.Fatal(err)
	}
	appendWords(t, pool, "hidden", 3) // 4…6
	appendWords(t, pool, "after", 3)  // 7…9
	oldIndex()                        // from 7 on: 4 and 5 skipped, 6 holds the planted words
	dbtest.RunMigration(t, pool, "000058_audit_search_checked.up.sql")

	// The newest row is honest, so the indexer's own check finds nothing wrong: only the
	// migration's repair brings 4…6 back.
	l := NewLog(pool)
	if ids, _ := found(t, l, "hidden"); !slices.Equal(ids, idRange(4, 6)) {
		t.Errorf("search for the entries the steered indexer skipped: %v; want 6…4", ids)
	}
	if ids, _ := found(t, l, "after"); !slices.Equal(ids, idRange(7, 9)) {
		t.Errorf("search for the entries indexed after them: %v; want 9…7", ids)
	}
	if ids, _ := found(t, l, "decoy"); len(ids) != 0 {
		t.Errorf("search for the planted words: %v; want none", ids)
	}
	if ids, _ := found(t, l, "before"); !slices.Equal(ids, idRange(1, 3)) {
		t.Errorf("search for the entries indexed before: %v; want 3…1", ids)
	}
}
