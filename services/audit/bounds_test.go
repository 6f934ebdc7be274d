package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	seedLeaver(t, pool, old, newer)
	l := NewLog(pool)

	_, err := l.List(ctx, Filter{Q: "leaver", Action: "tool.call"})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("q"), "too broad") || !strings.Contains(ve.For("q"), "an actor") {
		t.Fatalf("q=leaver&action=tool.call over %d matches: got %v; want a too-broad error on q naming what to add", old, err)
	}
	if _, err := l.CountNewer(ctx, Filter{Q: "leaver", Action: "tool.call"}, 1); !errors.As(err, &ve) || ve.For("q") == "" {
		t.Errorf("CountNewer of q=leaver&action=tool.call: got %v; want the too-broad error", err)
	}
	// What the error says to add: an actor.
	p, err := l.List(ctx, Filter{Q: "leaver", Action: "tool.call", Actor: "leaver"})
	if err != nil || len(p.Items) != 50 || p.Items[0].ID != old || p.Items[0].Action != "tool.call" {
		t.Errorf("with actor=leaver: %v, %v; want 50 entries from %d", head(ids(p)), err, old)
	}
	// Below a cursor that leaves fewer matches than maxMatches: answered.
	p, err = l.List(ctx, Filter{Q: "leaver", Action: "tool.call", Cursor: 1500})
	if err != nil || len(p.Items) != 50 || p.Items[0].ID != 1499 || p.NextCursor != p.Items[49].ID {
		t.Errorf("below 1500: %v, next %d, %v; want 50 entries from 1499", head(ids(p)), p.NextCursor, err)
	}
}

// Every statement of a page is bounded (statement_timeout): a filter the database
// cannot answer in time (here: actor and a time range while the table is locked, so
// it waits for as long as the lock is held) ends with an error that says to narrow
// it, on the field to change, not after as long as it takes. With no filter there is
// nothing to narrow: it is unavailable.
func TestBrowseStatementTimeout(t *testing.T) {
	// Not parallel: it lowers the package's timeout.
	defer func(d time.Duration) { browseTimeout = d }(browseTimeout)
	browseTimeout = 200 * time.Millisecond

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pool := dbtest.New(t)
	seedLeaver(t, pool, 10, 10)
	l := NewLog(pool)
	if _, err := l.List(ctx, Filter{Actor: "leaver", From: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
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
	_, err = l.List(ctx, Filter{Actor: "leaver", From: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("from"), "narrow") {
		t.Fatalf("actor and from while the log is locked: got %v; want an error on from saying to narrow it", err)
	}
	if _, err = l.CountNewer(ctx, Filter{Actor: "leaver"}, 1); !errors.As(err, &ve) || !strings.Contains(ve.For("actor"), "narrow") {
		t.Errorf("CountNewer of actor while the log is locked: got %v; want an error on actor", err)
	}
	if _, err = l.List(ctx, Filter{}); !fault.Is(err, fault.KindUnavailable) {
		t.Errorf("no filter while the log is locked: got %v; want unavailable", err)
	}
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
