package audit

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolwarden/toolwarden/services/db"
)

// Export formats.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// An export reads a batch of entries, releases the database connection, then writes
// them to its client: a client that reads slowly must not hold one of the pool's
// connections, which the audit of every request shares. A batch is at most
// exportBatch entries and stops once it holds exportBatchBytes, so memory stays that
// of one batch (or of one entry larger than that) whatever the entries' size.
const (
	exportBatch      = 1000
	exportBatchBytes = 8 << 20
	// exportFirstBatch is the first batch's limit, before entries' size is known: a
	// batch cut at exportBatchBytes has read the rest of its rows for nothing.
	exportFirstBatch = 100
)

// exportAhead is how many ids of a search's matches an export looks up in the words'
// index at once (800 KB): a lookup reads every match below its cursor, so one a batch
// would read a common old name's matches once for each 1,000 of them. A variable for
// tests.
var exportAhead = 100_000

// ExportEntry is one entry as an export writes it: the stored fields, its group, and
// its chain position in hex (so an export can be checked against the chain).
type ExportEntry struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	ActorKind  string          `json:"actor_kind"`
	ActorID    *string         `json:"actor_id"`
	ActorName  string          `json:"actor_name"`
	Action     string          `json:"action"`
	Group      string          `json:"group"`
	TargetType string          `json:"target_type"`
	TargetID   string          `json:"target_id"`
	TargetName string          `json:"target_name"`
	Result     string          `json:"result"`
	IP         string          `json:"ip"`
	RequestID  string          `json:"request_id"`
	Payload    json.RawMessage `json:"payload"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
}

// Export returns r as exports and the API write it.
func (r Record) Export() ExportEntry {
	p := r.Payload
	if len(p) == 0 {
		p = json.RawMessage("{}")
	}
	return ExportEntry{ID: r.ID, At: r.At, ActorKind: r.ActorKind, ActorID: r.ActorID, ActorName: r.ActorName, Action: r.Action,
		Group: ActionGroup(r.Action), TargetType: r.TargetType, TargetID: r.TargetID, TargetName: r.TargetName, Result: r.Result,
		IP: r.IP, RequestID: r.RequestID, Payload: p, PrevHash: hex.EncodeToString(r.PrevHash), Hash: hex.EncodeToString(r.Hash)}
}

var csvHeader = []string{"id", "at", "actor_kind", "actor_id", "actor_name", "action", "group", "target_type", "target_id",
	"target_name", "result", "ip", "request_id", "payload", "prev_hash", "hash"}

// exportStatementTimeout bounds each statement of an export's batches (statement_timeout
// in the batch's transaction): a batch is a keyset read of at most exportBatch entries
// (milliseconds), and the costliest statement, the lookup of a common old word's matches
// (exportAhead of them at once), took about a second at 10 M entries; a minute leaves
// room for a loaded database, yet a statement the planner got badly wrong does not run
// on (and hold its connection) for as long as the download lasts. A variable for tests.
var exportStatementTimeout = time.Minute

// each calls fn for every entry f selects, newest first, reading them in batches by
// keyset (f's cursor and limit are ignored) and calling fn for a batch's entries once
// it is read and its connection released: memory stays one batch (exportBatchBytes).
// It is a snapshot: the newest id when it starts bounds every batch, so an entry that
// commits meanwhile is in none (ids are handed out under the journal lock, so every id
// up to the newest committed one is committed too); in time order such an entry could
// otherwise sort into a later batch. Each batch's statements run in a read-only
// transaction whose statements stop after exportStatementTimeout. An entry the word
// index names wrongly is left out (scanRow). batchDone (unless nil) is called after
// each batch's entries. It stops at the first error.
func (l *Log) each(ctx context.Context, f Filter, fn func(Record) error, batchDone func() error) error {
	f.Cursor, f.After, f.Limit = 0, 0, exportBatch
	// Indexed once: what is appended meanwhile is past the head anyway.
	if err := l.indexed(ctx, f); err != nil {
		return err
	}
	if err := l.exportTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `/* audit.export.head */ SELECT coalesce(max(id), 0) FROM audit_log`).Scan(&f.through); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		if f.through == 0 {
			return nil // an empty log
		}
		var err error
		f, err = l.searchable(ctx, tx, f)
		return err
	}); err != nil || f.through == 0 {
		return err
	}
	// Words in many entries are found batch by batch as a page finds them (manyMatches):
	// reading newest first checking each entry's words read the whole log for an old
	// name. A lookup's ids are kept for the next batches (ahead); walk: read on by the
	// batches' own query, as the page does for a narrowed search.
	many, walk := f.Q != "" && f.matches == nil, false
	var ahead []int64
	aheadAll := false // ahead holds every match left
	limit := exportFirstBatch
	for {
		var b exportBatchRead
		done := false
		err := l.exportTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
			g := f
			if many && !walk {
				if len(ahead) == 0 {
					if aheadAll {
						done = true
						return nil
					}
					ids, w, err := l.manyMatches(ctx, tx, f, limit, exportAhead, 0)
					if err != nil {
						return err
					}
					// Fewer than a batch, or a lookup's that did not fill: the last of them.
					ahead, walk, aheadAll = ids, w, len(ids) != limit && len(ids) < exportAhead
					if !walk && len(ids) == 0 {
						done = true
						return nil
					}
				}
				if !walk {
					g.matches = ahead[:min(limit, len(ahead))]
				}
			}
			var err error
			b, err = l.batchOf(ctx, tx, g, limit)
			return err
		})
		if err != nil {
			return err
		}
		if done || b.read == 0 {
			return nil
		}
		more := b.more
		if many && !walk {
			// Only here do the matches come from ahead; a few words' matches (f.matches,
			// found at once) are read on by the keyset as any filter's rows are.
			ahead = ahead[b.read:] // in the same order as the rows read
			more = len(ahead) > 0 || !aheadAll
		}
		batch := b.recs
		for i := range batch {
			if err := fn(batch[i]); err != nil {
				return err
			}
			batch[i] = Record{} // passed on: its memory can go
		}
		if batchDone != nil {
			if err := batchDone(); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		f.Cursor = b.last
		// As many entries as half the bytes allowed hold, at their size so far.
		limit = min(max(exportBatchBytes/2/max(b.size/max(len(batch), 1), 1), 1), exportBatch)
	}
}

// exportTx runs fn in a read-only transaction whose statements stop after
// exportStatementTimeout; one stopped so is said as such.
func (l *Log) exportTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	err := pgx.BeginTxFunc(ctx, l.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`,
			strconv.FormatInt(max(exportStatementTimeout.Milliseconds(), 1), 10)); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
	var pe *pgconn.PgError
	if err != nil && ctx.Err() == nil && errors.As(err, &pe) && pe.Code == "57014" /* query_canceled */ {
		return fmt.Errorf("audit: export: a batch took longer than %s (the database is busy, or the filters need narrowing): %w", exportStatementTimeout, err)
	}
	return err
}

// exportBatchRead is one batch of an export as batchOf read it.
type exportBatchRead struct {
	recs []Record // the entries to write
	size int      // about the memory recs hold
	read int      // the rows read, recs and those the word index named wrongly
	last int64    // the id of the last row read: the next batch's cursor
	more bool     // entries may follow
}

// batchOf reads up to limit entries of f on q, stopping early once they hold
// exportBatchBytes. The rows are closed before it returns.
func (l *Log) batchOf(ctx context.Context, q db.Querier, f Filter, limit int) (b exportBatchRead, err error) {
	rows, err := l.query(ctx, q, f, limit)
	if err != nil {
		return b, fmt.Errorf("audit: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, show, err := scanRow(rows)
		if err != nil {
			return b, fmt.Errorf("audit: list: %w", err)
		}
		b.read++
		b.last = r.ID
		if !show {
			continue
		}
		b.recs = append(b.recs, r)
		b.size += recordSize(r)
		if b.size >= exportBatchBytes && b.read < limit {
			rows.Close()
			b.more = true
			return b, nil
		}
	}
	if err := rows.Err(); err != nil {
		return b, fmt.Errorf("audit: list: %w", err)
	}
	b.more = b.read == limit
	return b, nil
}

// recordSize is about how much memory r holds.
func recordSize(r Record) int {
	n := 256 + len(r.Payload) + len(r.PrevHash) + len(r.Hash) + len(r.ActorName) + len(r.Action) + len(r.TargetType) +
		len(r.TargetID) + len(r.TargetName) + len(r.Result) + len(r.IP) + len(r.RequestID)
	if r.ActorID != nil {
		n += len(*r.ActorID)
	}
	return n
}

// cells makes CSV cells that a spreadsheet shows as text: a cell that begins with =,
// +, -, @, a tab or a carriage return (after spaces and double quotes, which
// spreadsheets skip or read as an empty quoted string) would be read as a formula (a
// name someone typed at the sign-in form, say), so it gets a leading apostrophe, which
// spreadsheets do not show; so does one that begins with an apostrophe. The same goes
// after every ';' and line break: a spreadsheet set to a language whose lists use ';'
// splits each line there, and quotes in mid-field do not stop it (nor a line break from
// ending the row). Removing the apostrophe at the start and after each ';' and line
// break gives the value back. JSON Lines keeps every value exact.
func cells(vals ...string) []string {
	for i, v := range vals {
		vals[i] = textCell(v)
	}
	return vals
}

// textCell is v with an apostrophe at its start and after each ';', '\n' and '\r' where
// a formula (or an apostrophe) would begin.
func textCell(v string) string {
	if !strings.ContainsAny(v, ";\n\r") {
		if formulaStart(v) {
			return "'" + v
		}
		return v
	}
	var b strings.Builder
	for {
		if formulaStart(v) {
			b.WriteByte('\'')
		}
		i := strings.IndexAny(v, ";\n\r")
		if i < 0 {
			b.WriteString(v)
			return b.String()
		}
		b.WriteString(v[:i+1])
		v = v[i+1:]
	}
}

// formulaStart: a spreadsheet would read a cell beginning with piece as a formula, or
// piece begins with the apostrophe that marks one that is not.
func formulaStart(piece string) bool {
	t := strings.TrimLeft(piece, " \"")
	return t != "" && strings.ContainsRune("=+-@\t\r'", rune(t[0]))
}

// Export records that actor exports what f selects (action audit.export, with the
// filter and format), then writes it to w as CSV or JSON Lines, and records how it
// ended (audit.export.finished: the rows and bytes the client took, success or
// failure, and whether a failure cut off a file the client had begun to receive). The
// first entry is written before any data: an export that cannot be audited does not
// happen. The end entry is written after the data: if it cannot be, that is logged (to
// slog's default; ExportLogging names the logger) and the export still succeeded, as
// the client holds the whole file. A person runs one export at a time and the process
// maxExports: past that it is refused (rate limited, with a wait) before anything, its
// entry included. Each batch is flushed to w once read. An error after some of it
// reached w leaves it cut at an arbitrary byte, and neither format can say where it
// should end: the caller must make the failure visible (the API aborts the response),
// not end it as if complete.
func (l *Log) Export(ctx context.Context, actor Actor, f Filter, format string, w io.Writer) error {
	return l.ExportLogging(ctx, slog.Default(), actor, f, format, w)
}

// ExportLogging is Export that logs to logger (nil: slog's default) an end entry it
// could not write.
func (l *Log) ExportLogging(ctx context.Context, logger *slog.Logger, actor Actor, f Filter, format string, w io.Writer) error {
	if format != FormatCSV && format != FormatJSONL {
		return fmt.Errorf("audit: unknown export format %q", format)
	}
	if logger == nil {
		logger = slog.Default()
	}
	release, err := l.admitExport(actor)
	if err != nil {
		return err
	}
	defer release()
	var started Record
	if err := db.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		started, err = Append(ctx, tx, Entry{Actor: actor, Action: "audit.export", TargetType: "audit_log",
			Payload: map[string]any{"format": format, "filter": f.Query().Encode()}})
		return err
	}); err != nil {
		return err
	}
	cw := &countingWriter{w: w}
	var rows int64
	err = l.export(ctx, f, format, cw, &rows)
	if ferr := l.exportFinished(ctx, actor, started.ID, rows, cw.n, err); ferr != nil {
		// Not the export's failure: whatever the client got, it got, and failing a
		// complete one would break a download that is whole (and invite another).
		logger.Error("audit: an export's end was not recorded", "export_entry", started.ID, "rows", rows,
			"bytes", cw.n, "export_err", err, "err", ferr)
	}
	return err
}

// exportFinishedTimeout bounds the write of an export's end entry. A variable for tests.
var exportFinishedTimeout = 10 * time.Second

// exportFinished records how the export whose entry is started ended. The client may
// be gone (its context cancelled), and that end is the one most worth recording, so it
// is written without the request's cancellation, within a bound of its own. It names
// the export's entry rather than repeating the filter, which a search for the filter's
// words would find again.
func (l *Log) exportFinished(ctx context.Context, actor Actor, started, rows, bytes int64, failed error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exportFinishedTimeout)
	defer cancel()
	p := map[string]any{"export_entry": started, "rows": rows, "bytes": bytes}
	result := ResultSuccess
	if failed != nil {
		result = ResultFailure
		p["error"] = failed.Error()
		p["cut_off"] = bytes > 0 // the client holds part of a file
	}
	if err := AppendAlone(ctx, l.pool, Entry{Actor: actor, Action: "audit.export.finished", TargetType: "audit_log",
		Result: result, Payload: p}); err != nil {
		return fmt.Errorf("audit: export: record its end: %w", err)
	}
	return nil
}

// countingWriter counts the bytes w took.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// export writes what f selects to w, setting rows to the entries the client took whole.
func (l *Log) export(ctx context.Context, f Filter, format string, w *countingWriter, rows *int64) (err error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	t := &rowTally{w: bw}
	defer func() { *rows = t.taken(w.n) }()
	// flushed sends what is buffered and counts the rows it completed.
	flushed := func() error {
		err := bw.Flush()
		*rows = t.taken(w.n)
		return err
	}
	switch format {
	case FormatCSV:
		cw := csv.NewWriter(t)
		if err := cw.Write(csvHeader); err != nil {
			return err
		}
		err = l.each(ctx, f, func(r Record) error {
			e := r.Export()
			actorID := ""
			if e.ActorID != nil {
				actorID = *e.ActorID
			}
			if err := cw.Write(cells(strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), e.ActorKind, actorID, e.ActorName,
				e.Action, e.Group, e.TargetType, e.TargetID, e.TargetName, e.Result, e.IP, e.RequestID, string(e.Payload), e.PrevHash, e.Hash)); err != nil {
				return err
			}
			// Into bw (csv keeps a buffer of its own), so the row's end is known.
			cw.Flush()
			if err := cw.Error(); err != nil {
				return err
			}
			t.rowEnd()
			return nil
		}, flushed)
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	case FormatJSONL:
		enc := json.NewEncoder(t)
		enc.SetEscapeHTML(false)
		err = l.each(ctx, f, func(r Record) error {
			if err := enc.Encode(r.Export()); err != nil {
				return err
			}
			t.rowEnd()
			return nil
		}, flushed)
	}
	if err != nil {
		return fmt.Errorf("audit: export: %w", err)
	}
	return flushed()
}

// rowTally counts the rows of an export the client took whole: it counts the bytes
// written to the buffer w, notes where each row ends, and a row counts once the client
// took every byte up to its end.
type rowTally struct {
	w    io.Writer
	n    int64   // bytes written to w
	ends []int64 // where each row not yet counted ends, in order
	rows int64   // rows the client took
}

func (t *rowTally) Write(b []byte) (int, error) {
	n, err := t.w.Write(b)
	t.n += int64(n)
	return n, err
}

// rowEnd notes that a row ends at what was written so far.
func (t *rowTally) rowEnd() { t.ends = append(t.ends, t.n) }

// taken counts the rows that end within the client's first bytes, and returns the rows
// it took so far.
func (t *rowTally) taken(bytes int64) int64 {
	i := 0
	for i < len(t.ends) && t.ends[i] <= bytes {
		i++
	}
	t.rows += int64(i)
	t.ends = append(t.ends[:0], t.ends[i:]...)
	return t.rows
}
