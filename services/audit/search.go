package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
)

// searchBatch bounds one indexing statement, so a long backlog is indexed in steps that
// each commit (and a search waiting behind one waits for a step, not the backlog).
const searchBatch = 20_000

// SearchTextChars is how much of an entry's text (actor, action, target, payload) the
// free-text filter finds words in: its first 50,000 characters. PostgreSQL refuses a
// tsvector over 1 MB, and an entry past that would stop the indexing of every entry
// after it (the index is a prefix of the chain), so every search would fail. The
// costliest text per character (distinct 4-byte letters in hyphenated words, each
// indexed whole and in its parts) makes about 10 bytes of tsvector a character:
// 100,000 characters measured 966 KB, too near the limit; 50,000 stay near half of it.
// The cut is made by audit_search_doc (migration 58), which both indexes an entry and
// checks a row indexed; a test checks that it cuts here.
const SearchTextChars = 50_000

// indexSearchSQL indexes, for the free-text filter, up to $1 entries after the last one
// indexed, and returns how many (audit_search_index, migration 58: the application may
// not write audit_search itself, so it holds nothing the log did not). Appends commit in
// id order under the journal lock, so the indexed ids are always a prefix of the chain
// and the last of them is where to go on from. That is not the highest id in
// audit_search when a superuser deleted the log's tail and its ids were used again, or
// rows were planted ahead of the log's head before migration 58: audit_search_trim finds
// the newest row that still holds its entry's words, checking the newest first and
// halving when it does not, and removes the rows after it, so they are indexed again.
const indexSearchSQL = `/* audit.IndexSearch */ SELECT audit_search_index($1)`

// IndexSearch indexes the entries the free-text filter cannot find yet (audit_search,
// migration 42) and returns how many it indexed. The index is kept behind the appends
// rather than by them, so no call waits for it: the server runs this a few times a
// second, and every search runs it before it reads, so a search sees every committed
// entry. Indexers (replicas, searches) take turns on an advisory lock; a step commits
// without waiting for the disk, since a crash that loses one only means it is redone.
func (l *Log) IndexSearch(ctx context.Context) (int64, error) {
	var total int64
	for {
		var n int64
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(db.AsyncCommitSQL)
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('toolwarden.audit_search', 0))`)
		b.Queue(indexSearchSQL, searchBatch).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
		b.Queue("COMMIT")
		if err := l.pool.SendBatch(ctx, b).Close(); err != nil {
			return total, fmt.Errorf("audit: index for search: %w", err)
		}
		total += n
		if n < searchBatch {
			return total, nil
		}
	}
}

// fewMatches is how many entries a search may find and still be answered from their
// ids (Filter.matches). A variable so a test can lower it.
var fewMatches = 10_000

// maxMatches bounds how many matches of a search's words a page reads from the words'
// index (manyMatches): past it the search is refused as too broad (ErrTooBroad's
// words), as reading and checking each match costs a lookup a match, millions at 10 M
// entries for a common word. A variable for tests.
var maxMatches = 100_000

// searchWalk is how many of the newest entries the other filters select manyMatches
// checks word by word before it looks the words up instead. A variable for tests.
var searchWalk = 5_000

// querier runs a page's statements: the pool (an export) or a page's transaction
// (bounded), in which a statement can begin a savepoint of its own.
type querier interface {
	db.Querier
	db.TxBeginner
}

// indexed makes sure a search by f finds every entry committed so far (IndexSearch).
// It runs on connections of its own, so before a page's transaction begins.
func (l *Log) indexed(ctx context.Context, f Filter) error {
	if f.Q == "" {
		return nil
	}
	_, err := l.IndexSearch(ctx)
	return err
}

// searchable finds out whether the words of f (indexed first) are rare. PostgreSQL
// estimates a rare word's entries from the least frequent words it keeps statistics
// of, thousands of times too many at 10 million entries, and so reads the log newest
// first checking each entry's words (a second or more) instead of looking the word up.
// So the entries are looked up here, up to fewMatches of them, and the page is read
// from those ids; a search that finds more is paged by manyMatches.
func (l *Log) searchable(ctx context.Context, q db.Querier, f Filter) (Filter, error) {
	f.matches = nil
	if f.Q == "" {
		return f, nil
	}
	rows, err := q.Query(ctx, `/* audit.searchable */ SELECT id FROM audit_search
		WHERE doc @@ plainto_tsquery('simple'::regconfig, $1) LIMIT $2`, f.Q, fewMatches+1)
	if err != nil {
		return f, fmt.Errorf("audit: search: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return f, fmt.Errorf("audit: search: %w", err)
	}
	if len(ids) <= fewMatches {
		f.matches = ids // never nil: CollectRows starts from an empty slice
	}
	return f, nil
}

// manyMatches returns the ids of the first n entries f selects, in the page's order,
// when f.Q finds more than fewMatches entries. Words that common are usually among the
// newest entries, so the newest searchWalk entries the other filters select are checked
// word by word first, which stops at n. Only when that does not fill the page (the
// matches are old: a person who left, a tool removed) are the matches looked up from
// the words' index and the other filters checked on each: that reads the matches, where
// reading on newest first read every newer entry, the whole log of 10 M for an old name.
// With another filter that narrows the entries (Filter.narrowed), walk is true instead:
// reading on through those (the page's own query) beats reading every match of a word.
// ahead (at least n) is how many ids the lookup in the words' index returns: an export
// takes many at once, as each lookup reads every match below its cursor. most (0: no
// bound, an export's) bounds the matches the lookup may read: past it the search is
// refused as too broad.
func (l *Log) manyMatches(ctx context.Context, q querier, f Filter, n, ahead, most int) ([]int64, bool, error) {
	g := f
	g.Q, g.matches = "", nil
	where, args := g.where()
	qp := "$" + strconv.Itoa(len(args)+1)
	walk := `SELECT id, at FROM audit_log` + where + g.order() + ` LIMIT ` + strconv.Itoa(searchWalk)
	rows, err := q.Query(ctx, `/* audit.manyMatches.walk */ SELECT id FROM (`+walk+`) audit_log
		WHERE EXISTS (SELECT 1 FROM audit_search s WHERE s.id = audit_log.id AND s.doc @@ plainto_tsquery('simple'::regconfig, `+qp+`))`+
		g.order()+` LIMIT `+strconv.Itoa(n), append(args, f.Q)...)
	if err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	if len(ids) == n {
		return ids, false, nil
	}
	var walked int
	if err := q.QueryRow(ctx, `/* audit.manyMatches.walked */ SELECT count(*) FROM (`+walk+`) w`, args...).Scan(&walked); err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	if walked < searchWalk {
		return ids, false, nil // every entry the other filters select was checked
	}
	if f.narrowed() {
		// Another filter (a failure, an actor) narrows the entries: reading on through
		// those, as its index does, beats reading every match of a common word.
		return nil, true, nil
	}

	// From the words' index: each match (within the cursors' ids) is checked against the
	// other filters by its id. Scans that read a table in order are turned off for this
	// statement, as PostgreSQL's estimate of a word's entries may make it choose to read
	// audit_search newest first, which is the walk again. matchesFrom is the matches'
	// select, its parameters numbered from base+1.
	matchesFrom := func(base int) (string, []any) {
		margs := []any{f.Q}
		mconds := []string{`doc @@ plainto_tsquery('simple'::regconfig, $` + strconv.Itoa(base+1) + `)`}
		if f.Cursor > 0 && !f.timed() {
			margs = append(margs, f.Cursor)
			mconds = append(mconds, "id < $"+strconv.Itoa(base+len(margs)))
		}
		if f.After > 0 {
			margs = append(margs, f.After)
			mconds = append(mconds, "id > $"+strconv.Itoa(base+len(margs)))
		}
		if f.through > 0 {
			margs = append(margs, f.through)
			mconds = append(mconds, "id <= $"+strconv.Itoa(base+len(margs)))
		}
		return `SELECT id AS sid FROM audit_search WHERE ` + strings.Join(mconds, " AND "), margs
	}
	matches, margs := matchesFrom(len(args))
	args = append(args, margs...)
	conds := "audit_log.id = m.sid"
	if where != "" {
		conds += " AND " + strings.TrimPrefix(where, " WHERE ")
	}
	// In id order the matches are sorted first, so the checks stop at the page's end; in
	// time order every match is checked. OFFSET 0 keeps each check a lookup by id.
	sort, order := " ORDER BY id DESC", " ORDER BY m.sid DESC"
	if f.timed() {
		sort, order = "", " ORDER BY a.at DESC, a.id DESC"
	}
	sql := `/* audit.manyMatches */ SELECT a.id FROM (` + matches + sort + `) m
		CROSS JOIN LATERAL (SELECT id, at FROM audit_log WHERE ` + conds + ` OFFSET 0) a` + order + ` LIMIT ` + strconv.Itoa(max(n, ahead))
	// In a savepoint (or a transaction of its own on the pool), rolled back once read:
	// the planner's settings go with it, and do not reach the page's own query.
	sp, err := q.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	defer sp.Rollback(ctx) //nolint:errcheck // read only: nothing to keep
	if _, err := sp.Exec(ctx, `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true),
			set_config('enable_indexonlyscan', 'off', true)`); err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	if most > 0 {
		// Counted up to one past the bound first (reading at most that many), as every
		// match is read to be sorted or checked.
		var found int
		counted, cargs := matchesFrom(0)
		if err := sp.QueryRow(ctx, `/* audit.manyMatches.count */ SELECT count(*) FROM (`+counted+` LIMIT `+strconv.Itoa(most+1)+`) m`,
			cargs...).Scan(&found); err != nil {
			return nil, false, fmt.Errorf("audit: search: %w", err)
		}
		if found > most {
			return nil, false, tooManyMatches(f, most)
		}
	}
	rows, err = sp.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return nil, false, fmt.Errorf("audit: search: %w", err)
	}
	return ids, false, nil
}
