package audit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
const SearchTextChars = 50_000

// indexSearchSQL indexes, for the free-text filter, the next entries after the last one
// indexed. Appends commit in id order under the journal lock, so the indexed ids are
// always a prefix of the chain and their maximum is where to go on from.
const indexSearchSQL = `/* audit.IndexSearch */ INSERT INTO audit_search (id, doc)
	SELECT id, to_tsvector('simple'::regconfig,
		left(audit_search_text(actor_name, action, target_type, target_id, target_name, payload), $2))
	FROM audit_log WHERE id > (SELECT coalesce(max(id), 0) FROM audit_search) ORDER BY id LIMIT $1`

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
		b.Queue(indexSearchSQL, searchBatch, SearchTextChars).Exec(func(tag pgconn.CommandTag) error {
			n = tag.RowsAffected()
			return nil
		})
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
// ids (Filter.matches).
const fewMatches = 10_000

// searchable makes sure a search by f finds every entry committed so far, and finds
// out whether its words are rare. PostgreSQL estimates a rare word's entries from the
// least frequent words it keeps statistics of, thousands of times too many at 10
// million entries, and so reads the log newest first checking each entry's words (a
// second or more) instead of looking the word up. So the entries are looked up here,
// up to fewMatches of them, and the page is read from those ids; a search that finds
// more is common enough that reading newest first finds a page soon.
func (l *Log) searchable(ctx context.Context, f Filter) (Filter, error) {
	f.matches = nil
	if f.Q == "" {
		return f, nil
	}
	if _, err := l.IndexSearch(ctx); err != nil {
		return f, err
	}
	rows, err := l.pool.Query(ctx, `/* audit.searchable */ SELECT id FROM audit_search
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
