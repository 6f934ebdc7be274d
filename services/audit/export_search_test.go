package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// An export of a search for an old name (a word in more than fewMatches entries, all
// of them old) writes what the pages show, entry for entry and in their order, and
// reads about as many rows as it writes: it used to read the log newest first checking
// each entry's words, every newer entry before the first match. The log is that of
// TestSearchManyOldMatchesReadsTheMatches; rows read are PostgreSQL's own counts.
func TestExportOldMatchesIsThePages(t *testing.T) {
	// Not parallel: it lowers the package's thresholds.
	defer func(few, walk, ahead int) { fewMatches, searchWalk, exportAhead = few, walk, ahead }(fewMatches, searchWalk, exportAhead)
	fewMatches, searchWalk = 1_000, 500
	lookAhead := exportAhead

	const old, newer = 3_000, 30_000 // "leaver" in 1…3000 only
	ctx := context.Background()
	url := dbtest.NewURL(t)
	pool, err := db.NewPool(ctx, url+" pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	start := seedLeaver(t, pool, old, newer)
	l := NewLog(pool)
	defer l.Close()
	if _, err := l.IndexSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE audit_log, audit_search`); err != nil {
		t.Fatal(err)
	}
	rowsRead := func() (n int64) {
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
	// pages is every page of f, as the API writes its entries (one JSON line each).
	pages := func(f Filter) []byte {
		t.Helper()
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		for n := 0; ; n++ {
			p, err := l.List(ctx, f)
			if err != nil || n > 1000 {
				t.Fatalf("%+v: %v (page %d)", f, err, n)
			}
			for _, r := range p.Items {
				if err := enc.Encode(r.Export()); err != nil {
					t.Fatal(err)
				}
			}
			if p.NextCursor == 0 {
				return out.Bytes()
			}
			f.Cursor = p.NextCursor
		}
	}
	lines := func(b []byte) int { return bytes.Count(b, []byte("\n")) }

	alice := Actor{Kind: ActorUser, ID: "00000000-0000-4000-8000-00000000a11c", Name: "alice"}
	for _, tc := range []struct {
		name  string
		f     Filter
		min   int // entries at least
		ahead int // exportAhead: 1,200 looks the 3,000 matches up in three steps
		reads bool
	}{
		{"old name", Filter{Q: "leaver", Limit: 200}, old, lookAhead, true},
		{"old name, in steps", Filter{Q: "leaver"}, old, 1_200, false},
		{"old name, a time range", Filter{Q: "leaver", From: start.Add(1000 * time.Millisecond), To: start.Add(2500 * time.Millisecond)}, 1500, 1_200, false},
		{"old name, a group", Filter{Q: "leaver", Action: "auth"}, old / 7, 1_200, false},
		{"common word, old actor", Filter{Q: "common", Actor: "leaver"}, old / 5, 1_200, false},
	} {
		exportAhead = tc.ahead
		var export bytes.Buffer
		before := rowsRead()
		if err := l.Export(ctx, alice, tc.f, FormatJSONL, &export); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		read := rowsRead() - before
		want := pages(tc.f) // after the export: its own entry (which names the filter) is in both
		t.Logf("%s: export of %d entries read %d rows", tc.name, lines(export.Bytes()), read)
		if !bytes.Equal(export.Bytes(), want) || lines(want) < tc.min {
			t.Errorf("%s: the export has %d entries, %.300s…; the pages %d, %.300s…", tc.name,
				lines(export.Bytes()), export.Bytes(), lines(want), want)
		}
		// The search alone, without another filter that narrows it, reads the matches.
		if tc.reads && read > newer/2 {
			t.Errorf("%s: the export read %d rows of audit_log and audit_search; want about the %d matches, not the %d newer entries",
				tc.name, read, old, newer)
		}
	}
	// The plan of each batch of the old name's export: entries looked up by id, not the
	// log read newest first with each entry's words checked (audit_search in the plan).
	exportAhead = lookAhead
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	rec := &sqlRecorder{}
	cfg.ConnConfig.Tracer = rec
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	tl := NewLog(traced)
	defer tl.Close()
	if err := tl.Export(ctx, alice, Filter{Q: "leaver"}, FormatCSV, io.Discard); err != nil {
		t.Fatal(err)
	}
	batches := 0
	for _, q := range rec.taken() {
		if !strings.HasPrefix(q.SQL, "/* audit.List */") {
			continue
		}
		batches++
		rows, err := pool.Query(ctx, "EXPLAIN "+q.SQL, q.Args...)
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !byIDs.MatchString(plan) || strings.Contains(plan, "audit_search") {
			t.Errorf("a batch of the export of q=leaver is not read by id:\n%.300s\n%.1000s", q.SQL, plan)
		}
	}
	if batches < 3 {
		t.Errorf("the export of q=leaver read %d batches, want at least 3 (100, then up to 1,000 entries)", batches)
	}
}

// byIDs is the condition of an index scan by a list of ids.
var byIDs = regexp.MustCompile(`Index Cond: \(+id = ANY `)

// sqlRecorder keeps the SQL and arguments of every query, to EXPLAIN them.
type sqlRecorder struct {
	mu      sync.Mutex
	queries []pgx.TraceQueryStartData
}

func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, d)
	return ctx
}

func (r *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *sqlRecorder) taken() []pgx.TraceQueryStartData {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pgx.TraceQueryStartData(nil), r.queries...)
}
