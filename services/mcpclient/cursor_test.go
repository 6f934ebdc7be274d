package mcpclient

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// A listing keeps its cursors at a fixed size each, whatever their length: 10,000 of
// maxCursor bytes (40 MiB in all) leave well under a MiB behind, and a repeated one is
// still caught. Not parallel: it measures the heap.
func TestCursorSetBounded(t *testing.T) {
	const pages = 10_000
	lim := listLimits{maxPages: pages}
	cursor := func(i int) string { return fmt.Sprintf("%0*d", maxCursor, i) }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	seen := newCursorSet()
	for i := 1; i < pages; i++ {
		if err := lim.next(seen, cursor(i), i); err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4<<20 {
		t.Errorf("%d cursors of %d bytes left %d KiB on the heap, want a few hundred at most", pages-1, maxCursor, grew>>10)
	}
	if err := lim.next(seen, cursor(pages/2), pages-1); err == nil || !strings.Contains(err.Error(), "repeated cursor") {
		t.Errorf("a repeated cursor: %v", err)
	}
	if err := lim.next(seen, cursor(0), pages); err == nil || !strings.Contains(err.Error(), "still paging") {
		t.Errorf("past the pages: %v", err)
	}
	if err := lim.next(seen, cursor(0)+"x", 1); err == nil || !strings.Contains(err.Error(), "cursor of 4097 bytes") {
		t.Errorf("a cursor too long: %v", err)
	}
	runtime.KeepAlive(seen)
}
