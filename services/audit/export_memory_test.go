package audit_test

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// liveHeap is the heap in use after a collection: what is still referenced.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// An export holds one entry at a time, not a batch of them: 160 entries of 512 KiB
// payloads (a server.update between two large templates records both whole) are 80
// MiB, all in one batch, and what the export keeps alive while it writes stays far
// below that. Not parallel, so no other test's memory is counted.
func TestExportMemoryStaysFlat(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	const n, size = 160, 512 << 10
	template := strings.Repeat("<p>{{ .Name }} template</p>\n", size/28)
	for i := range n {
		if err := appendOne(pool, audit.Entry{Actor: audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "alice"},
			Action: "server.update", TargetType: "server", TargetID: "s1", TargetName: "web",
			Payload: map[string]any{"changed": map[string]any{"template": template, "i": i}}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	template = ""
	l := audit.NewLog(pool)
	t.Cleanup(l.Close)

	const bound = 24 << 20
	base := liveHeap()
	var peak uint64
	sample := func() {
		if h := liveHeap(); h > base && h-base > peak {
			peak = h - base
		}
	}
	rows := 0
	err := l.Each(ctx, audit.Filter{}, func(r audit.Record) error {
		if len(r.Payload) < size {
			t.Fatalf("entry %d: payload of %d bytes, want the whole template", r.ID, len(r.Payload))
		}
		if rows%20 == 0 {
			sample()
		}
		rows++
		return nil
	})
	if err != nil || rows != n {
		t.Fatalf("Each: %d rows, %v; want %d", rows, err, n)
	}
	t.Logf("Each: %d KiB alive at most", peak>>10)
	if peak > bound {
		t.Fatalf("Each kept %d MiB alive while exporting %d MiB; want under %d MiB (one entry at a time)", peak>>20, n*size>>20, bound>>20)
	}

	// The export itself, sampled as it writes.
	base, peak = liveHeap(), 0
	w := &sampling{every: 10 * size, sample: sample}
	if err := l.Export(ctx, audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "alice"}, audit.Filter{Action: "servers"}, audit.FormatJSONL, w); err != nil {
		t.Fatal(err)
	}
	if w.n < n*size {
		t.Fatalf("export wrote %d bytes, want every payload (%d)", w.n, n*size)
	}
	t.Logf("Export: %d KiB alive at most", peak>>10)
	if peak > bound {
		t.Fatalf("Export kept %d MiB alive while writing %d MiB; want under %d MiB (one entry at a time)", peak>>20, w.n>>20, bound>>20)
	}
}

// sampling discards what is written, calling sample after each every bytes.
type sampling struct {
	n, next, every int
	sample         func()
}

func (s *sampling) Write(p []byte) (int, error) {
	s.n += len(p)
	if s.n >= s.next {
		s.sample()
		s.next = s.n + s.every
	}
	return io.Discard.Write(p)
}

// The page's list reads no payloads; otherwise it is List's.
func TestListBrief(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	seedBrowse(t, pool)
	l := audit.NewLog(pool)
	for _, f := range []audit.Filter{{}, {Limit: 3}, {Action: "tools", Limit: 1}, {Q: "frobnicate"}, {From: time.Now().Add(-time.Hour)}} {
		full, err := l.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		brief, err := l.ListBrief(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids(brief)) != fmt.Sprint(ids(full)) || brief.NextCursor != full.NextCursor || len(full.Items) == 0 {
			t.Fatalf("%+v: brief %v (next %d), list %v (next %d); want the same entries", f, ids(brief), brief.NextCursor, ids(full), full.NextCursor)
		}
		for i, r := range brief.Items {
			if r.Payload != nil {
				t.Fatalf("%+v: entry %d has payload %s, want none read", f, r.ID, r.Payload)
			}
			r.Payload = full.Items[i].Payload
			if !reflect.DeepEqual(r, full.Items[i]) {
				t.Fatalf("%+v: brief entry %+v, list's %+v", f, r, full.Items[i])
			}
		}
	}
}
