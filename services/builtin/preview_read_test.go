package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// peakHeap runs f and returns the most heap it found in use above what was in use
// before, sampled every millisecond (and after f, before a collection).
func peakHeap(f func()) uint64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > base.HeapAlloc && m.HeapAlloc-base.HeapAlloc > peak.Load() {
			peak.Store(m.HeapAlloc - base.HeapAlloc)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				sample()
			}
		}
	}()
	f()
	sample()
	close(stop)
	<-done
	return peak.Load()
}

// A plan of 50 copies of one 10 MiB file reads it once and holds it once: before, each
// step read the source again and kept its copy's content for later steps, 687 MiB at
// the peak. Each copy still expects the source's fingerprint.
func TestPreviewPlanCopiesOfOneFile(t *testing.T) {
	// Not parallel: the heap is measured for the whole process.
	s, ws := fileServer(t)
	line := strings.Repeat("0123456789abcdef", 4)[:63] + "\n"
	big := []byte(strings.Repeat(line, maxFileBytes/64))
	writeTestFile(t, filepath.Join(ws, "big.txt"), string(big))
	var calls []PreviewCall
	for i := range 50 {
		calls = append(calls, PreviewCall{Tool: "file_operations",
			Arguments: json.RawMessage(fmt.Sprintf(`{"operation":"copy_file","filePath":"big.txt","newPath":"c%d.txt"}`, i))})
	}
	var ps []*FilePreview
	var err error
	peak := peakHeap(func() { ps, err = s.PreviewPlan(context.Background(), "c1", "", calls) })
	if err != nil {
		t.Fatal(err)
	}
	want := moveFingerprint(fingerprint(&big), "absent")
	for i, p := range ps {
		if p == nil || p.Fingerprint != want || !strings.HasPrefix(p.Diff, fmt.Sprintf("copy from big.txt\ncopy to c%d.txt\n--- a/c%d.txt\n", i, i)) {
			t.Fatalf("step %d: %+v", i, p)
		}
	}
	if peak > 64<<20 {
		t.Errorf("the preview of 50 copies of a 10 MiB file held %d MiB at its peak", peak>>20)
	}
	t.Logf("peak %d MiB above the start", peak>>20)
}

// A plan over more files than a preview reads (maxPreviewRead) shows, past the bound,
// each step's fingerprint without its diff, so the check before the step runs still
// stops it if its file changed; a step on what such a step leaves is not previewed.
// What no later step names is not held.
func TestPreviewPlanReadBound(t *testing.T) {
	s, ws := fileServer(t)
	const n = 6 // 6 files of almost 8 MiB: past the 32 MiB bound after 4
	contents := make([][]byte, n)
	var calls []PreviewCall
	for i := range n {
		contents[i] = []byte(fmt.Sprintf("head %d\n", i) + strings.Repeat(fmt.Sprintf("body of file %02d\n", i), (8<<20)/16-1)) // under 8 MiB
		writeTestFile(t, filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), string(contents[i]))
		calls = append(calls, PreviewCall{Tool: "file_operations",
			Arguments: json.RawMessage(fmt.Sprintf(`{"operation":"replace_string","filePath":"f%d.txt","oldString":"head %d\n","newString":"HEAD\n"}`, i, i))})
	}
	calls = append(calls,
		PreviewCall{Tool: "file_operations", Arguments: json.RawMessage(`{"operation":"insert_edit","filePath":"f5.txt","line":0,"content":"x"}`)},
		PreviewCall{Tool: "file_operations", Arguments: json.RawMessage(`{"operation":"delete_file","filePath":"f0.txt"}`)})
	ps, err := s.PreviewPlan(context.Background(), "c1", "", calls)
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for i := range n {
		p := ps[i]
		if p == nil || p.Fingerprint != fingerprint(&contents[i]) {
			t.Fatalf("step %d: %+v, want fingerprint %s", i, p, fingerprint(&contents[i]))
		}
		fp, err := s.Fingerprint(context.Background(), "c1", calls[i])
		if err != nil || fp != p.Fingerprint {
			t.Fatalf("step %d: the fingerprint checked before it runs is %q (%v), the preview's %q", i, fp, err, p.Fingerprint)
		}
		switch {
		case strings.Contains(p.Diff, "-head "+fmt.Sprint(i)+"\n+HEAD\n"):
			shown++
		case !strings.Contains(p.Diff, "diff not shown"):
			t.Fatalf("step %d past the bound: %q", i, p.Diff)
		}
	}
	if shown != 4 {
		t.Errorf("%d of the steps show their diff; the 32 MiB bound holds 4 files of 8 MiB", shown)
	}
	if ps[n] != nil {
		t.Errorf("an edit after an edit past the bound: %+v", ps[n])
	}
	if p := ps[n+1]; p == nil || !strings.Contains(p.Diff, "-HEAD\n") {
		t.Errorf("deleting f0.txt after its edit: %+v", p)
	}
}
