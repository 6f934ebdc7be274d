package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A search whose words are in more entries than a page may read (maxMatches), with a
// filter that does not narrow it (the most common action), is refused as too broad,
// naming what to add, instead of reading and checking every match. Narrowed (an actor)
// or below a cursor with fewer matches left, the same words are answered, exactly.
func TestSearchTooBroadIsRefused(t *testing.T) {
	// Not parallel: it lowers the package's thresholds.
	defer func(few, walk, most int) { fewMatches, searchWalk, maxMatches = few, walk, most }(fewMatches, searchWalk, maxMatches)
	fewMatches, searchWalk, maxMatches = 1_000, 500, 2_000

	const old, newer = 3_000, 3_000 // "leaver" in 1…3000 only
	ctx := context.Background()
	pool := dbtest.New(t)
	start := seedLeaver(t, pool, old, newer)
	l := NewLog(pool)

	_, err := l.List(ctx, Filter{Q: "leaver", Action: "tool.call"})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("q"), "too broad") || !strings.Contains(ve.For("q"), "an actor") ||
		!strings.Contains(ve.For("q"), "a time range that holds fewer than 500 entries") {
		t.Fatalf("q=leaver&action=tool.call over %d matches: got %v; want a too-broad error on q naming what to add", old, err)
	}
	// The other thing it names: a time range of fewer entries (ids 2001…2400).
	p, err := l.List(ctx, Filter{Q: "leaver", Action: "tool.call", From: start.Add(2001 * time.Millisecond), To: start.Add(2401 * time.Millisecond)})
	if err != nil || len(p.Items) != 50 || p.Items[0].ID != 2400 {
		t.Errorf("within 400 entries: %v, %v; want 50 entries from 2400", head(ids(p)), err)
	}
	if _, err := l.CountNewer(ctx, Filter{Q: "leaver", Action: "tool.call"}, 1); !errors.As(err, &ve) || ve.For("q") == "" {
		t.Errorf("CountNewer of q=leaver&action=tool.call: got %v; want the too-broad error", err)
	}
	// What the error says to add: an actor.
	p, err = l.List(ctx, Filter{Q: "leaver", Action: "tool.call", Actor: "leaver"})
	if err != nil || len(p.Items) != 50 || p.Items[0].ID != old || p.Items[0].Action != "tool.call" {
		t.Errorf("with actor=leaver: %v, %v; want 50 entries from %d", head(ids(p)), err, old)
	}
	// Below a cursor that leaves fewer matches than maxMatches: answered.
	p, err = l.List(ctx, Filter{Q: "leaver", Action: "tool.call", Cursor: 1500})
	if err != nil || len(p.Items) != 50 || p.Items[0].ID != 1499 || p.NextCursor != p.Items[49].ID {
		t.Errorf("below 1500: %v, next %d, %v; want 50 entries from 1499", head(ids(p)), p.NextCursor, err)
	}
}

// Every statement of a page is bounded (statement_timeout), and so is the page: a
// filter the database cannot answer in time (here: the table is locked, so it waits
// for as long as the lock is held) ends with an error, not after as long as it takes.
// A filter that could be narrowed (an action, a time range) says so, on the field to
// change; one already narrowed to an actor, with nothing costly left to narrow, or no
// filter at all, is unavailable with a wait: the database is busy, and narrowing would
// not help.
func TestBrowseStatementTimeout(t *testing.T) {
	// Not parallel: it lowers the package's timeout.
	defer func(d time.Duration) { browseTimeout = d }(browseTimeout)
	browseTimeout = 200 * time.Millisecond

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := dbtest.New(t)
	seedLeaver(t, pool, 10, 10)
	l := NewLog(pool)
	since := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := l.List(ctx, Filter{Actor: "leaver", From: since}); err != nil {
		t.Fatalf("unlocked: %v", err)
	}

	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var ve *verr.Error
	_, err = l.List(ctx, Filter{Action: "tool.call"})
	if !errors.As(err, &ve) || !strings.Contains(ve.For("action"), "narrow") {
		t.Errorf("action while the log is locked: got %v; want an error on action saying to narrow it", err)
	}
	_, err = l.List(ctx, Filter{Actor: "leaver", From: since})
	if !errors.As(err, &ve) || !strings.Contains(ve.For("from"), "shorter time range") {
		t.Errorf("actor and from while the log is locked: got %v; want an error on from asking for a shorter time range", err)
	}
	busy := func(what string, err error) {
		t.Helper()
		f, ok := fault.As(err)
		if !ok || f.Kind != fault.KindUnavailable || f.Code != "audit_busy" || f.RetryAfter <= 0 {
			t.Errorf("%s while the log is locked: got %v; want unavailable (audit_busy) with a wait", what, err)
		}
	}
	_, err = l.List(ctx, Filter{Actor: "leaver"})
	busy("actor", err)
	_, err = l.CountNewer(ctx, Filter{Actor: "leaver"}, 1)
	busy("CountNewer of actor", err)
	_, err = l.List(ctx, Filter{Result: ResultDenied, Action: "tool.call"})
	busy("denied tool calls", err)
	_, err = l.List(ctx, Filter{})
	busy("no filter", err)
	if ctx.Err() != nil {
		t.Fatalf("the pages waited for the lock: %v", ctx.Err())
	}
}

// failingClient takes n bytes, then fails.
type failingClient struct {
	n   int
	buf bytes.Buffer
}

func (w *failingClient) Write(p []byte) (int, error) {
	if room := w.n - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:room])
		return room, errors.New("client gone")
	}
	return w.buf.Write(p)
}

// An export is audited before it starts (audit.export) and when it ends
// (audit.export.finished, naming the first): the rows and bytes sent, and whether it
// was cut off.
func TestExportRecordsItsEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 30)
	l := NewLog(pool)
	t.Cleanup(l.Close)
	alice := Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-0000000000a1", Name: "alice"}

	last := func() (Record, map[string]any) {
		t.Helper()
		rs, err := Recent(ctx, pool, 1)
		if err != nil || len(rs) != 1 {
			t.Fatal(rs, err)
		}
		var p map[string]any
		if err := json.Unmarshal(rs[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		return rs[0], p
	}
	var out bytes.Buffer
	if err := l.Export(ctx, alice, Filter{Actor: "alice"}, FormatJSONL, &out); err != nil {
		t.Fatal(err)
	}
	r, p := last()
	rows := float64(strings.Count(out.String(), "\n"))
	if r.Action != "audit.export.finished" || r.Result != ResultSuccess || r.ActorName != "alice" || p["rows"] != rows ||
		p["bytes"] != float64(out.Len()) || p["export_entry"] != float64(r.ID-1) || ActionGroup(r.Action) != "audit" {
		t.Errorf("after an export of %v rows, %d bytes: %s %s by %s, %v (group %s); want audit.export.finished, success, with rows and bytes",
			rows, out.Len(), r.Action, r.Result, r.ActorName, p, ActionGroup(r.Action))
	}

	w := &failingClient{n: 1000}
	if err := l.Export(ctx, alice, Filter{}, FormatCSV, w); err == nil {
		t.Fatal("an export to a client that failed: got nil")
	}
	r, p = last()
	if r.Action != "audit.export.finished" || r.Result != ResultFailure || w.buf.Len() != 1000 || p["bytes"] != float64(1000) || p["cut_off"] != true ||
		!strings.Contains(p["error"].(string), "client gone") {
		t.Errorf("after an export cut off at %d bytes: %s %s, %v; want audit.export.finished, failure, cut off, with the bytes sent", w.buf.Len(), r.Action, r.Result, p)
	}
	// The rows the client took whole: the lines after the header (no cell here holds a
	// line break), not those encoded into the buffer.
	if whole := strings.Count(w.buf.String(), "\n") - 1; p["rows"] != float64(whole) {
		t.Errorf("after an export cut off at %d bytes: rows %v; want the %d the client took whole", w.buf.Len(), p["rows"], whole)
	}
}

// The newest checkpoint is the one of the highest chain id, not the one whose file
// name (its time) sorts last: one made while the clock was ahead must not hide every
// later one. One of a higher id whose signature does not verify is refused (the
// checkpointer passes it over), and a checkpoint dated in the future is said to be.
func TestNewestCheckpointByChainID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "checkpoint.key")
	s, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	src := CheckpointSource{Dir: cps, KeyFile: keyPath}
	now := time.Now().UTC()
	ahead := s.Sign(Head{ID: 10, Hash: make([]byte, 32)}, now.Add(24*time.Hour), now.Add(24*time.Hour)) // clock a day ahead
	if _, err := WriteCheckpoint(cps, ahead); err != nil {
		t.Fatal(err)
	}
	if cp, note, err := LoadCheckpoint(src); err != nil || cp.ID != 10 || !strings.Contains(note, "in the future") {
		t.Errorf("a checkpoint dated tomorrow: %v, %q, %v; want it, said to be in the future", cp, note, err)
	}
	later := s.Sign(Head{ID: 20, Hash: make([]byte, 32)}, now, now) // the clock set right
	laterPath, err := WriteCheckpoint(cps, later)
	if err != nil {
		t.Fatal(err)
	}
	// Forged: a higher id, but not what the key signed. It is refused, not passed over.
	forged := s.Sign(Head{ID: 30, Hash: make([]byte, 32)}, now, now)
	forged.ID = 31
	forgedPath := filepath.Join(cps, forged.FileName())
	if err := os.WriteFile(forgedPath, forged.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	if cp, _, err := LoadCheckpoint(src); err == nil || !errors.Is(err, ErrCheckpointSignature) {
		t.Errorf("a forged checkpoint of a higher id: got %v, %v; want it refused", cp, err)
	}
	c := NewCheckpointer(nil, s, cps)
	if err := c.loadLast(); err != nil || c.last == nil || c.last.ID != 20 {
		t.Errorf("the checkpointer's last: %+v, %v; want entry 20", c.last, err)
	}
	if err := os.Remove(forgedPath); err != nil {
		t.Fatal(err)
	}

	if got, err := LatestCheckpoint(cps); err != nil || got != laterPath {
		t.Errorf("LatestCheckpoint: got %q, %v; want %q (entry 20)", got, err, laterPath)
	}
	if cp, note, err := LoadCheckpoint(src); err != nil || cp.ID != 20 || strings.Contains(note, "future") {
		t.Errorf("LoadCheckpoint: got %v, %q, %v; want entry 20", cp, note, err)
	}
}

// lockingClient takes every byte; its first write runs lock first.
type lockingClient struct {
	bytes.Buffer
	lock func()
}

func (w *lockingClient) Write(p []byte) (int, error) {
	if w.lock != nil {
		w.lock()
		w.lock = nil
	}
	return w.Buffer.Write(p)
}

// An export whose every byte reached the client succeeded even if its end entry cannot
// be written (here: the chain's lock is held from elsewhere past the entry's bound):
// the failure is logged with the export's entry, not made the export's, which would
// break a complete download.
func TestExportEndNotRecorded(t *testing.T) {
	// Not parallel: it lowers the package's bound on the end entry.
	defer func(d time.Duration) { exportFinishedTimeout = d }(exportFinishedTimeout)
	exportFinishedTimeout = 300 * time.Millisecond

	ctx := context.Background()
	pool := dbtest.New(t)
	chainOf(t, pool, 30)
	l := NewLog(pool)
	t.Cleanup(l.Close)
	alice := Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-0000000000a1", Name: "alice"}

	var held pgx.Tx
	defer func() {
		if held != nil {
			held.Rollback(context.Background()) //nolint:errcheck // only releases the lock
		}
	}()
	// Taken once the export's own entry is written and its data is on the way.
	out := &lockingClient{lock: func() {
		tx, err := pool.Begin(ctx)
		if err == nil {
			err = db.LockJournal(ctx, tx)
		}
		if err != nil {
			t.Error(err)
		}
		held = tx
	}}
	var logged bytes.Buffer
	err := l.ExportLogging(ctx, slog.New(slog.NewTextHandler(&logged, nil)), alice, Filter{Actor: "alice"}, FormatJSONL, out)
	if err != nil {
		t.Errorf("an export sent whole, its end entry not written: got %v; want nil", err)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	held = nil
	rs, err := Recent(ctx, pool, 1)
	if err != nil || len(rs) != 1 || rs[0].Action != "audit.export" {
		t.Fatalf("the newest entry: %v, %v; want the export's own (its end was not written)", rs, err)
	}
	// alice's 22 of chainOf's 30 (every fourth is the system's), and the export's own.
	if n := strings.Count(out.String(), "\n"); n != 23 {
		t.Errorf("the client got %d rows; want 23", n)
	}
	if s := logged.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "export_entry="+strconv.FormatInt(rs[0].ID, 10)) {
		t.Errorf("the log: %q; want an error naming export_entry=%d", s, rs[0].ID)
	}
}
