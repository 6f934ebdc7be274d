package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// A walk below a wide directory holds only its entries' names and types, not the file
// information a directory read through an os.Root comes with (some 340 bytes an entry:
// the budget's million entries held so took a third of a gigabyte per search). Not
// parallel: it measures the process's heap.
func TestWalkHoldsLittleOfTheDirectoriesAbove(t *testing.T) {
	s, ws := fileServer(t)
	wide := filepath.Join(ws, "wide")
	if err := os.MkdirAll(filepath.Join(wide, "0deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wide, "0deep", "x.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 60_000 // sorted after "0deep", so held while the walk is below it
	for i := range n {
		f, err := os.Create(filepath.Join(wide, fmt.Sprintf("f%06d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var below uint64
	meta := callmeta.Meta{ConversationID: "c1", CallID: "call-1"}
	_, _, err := s.walk(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, "file_search", "wide",
		func(_ *os.Root, _, rel string) bool {
			if rel == "0deep/x.txt" {
				below = heap()
			}
			return false
		})
	if err != nil {
		t.Fatal(err)
	}
	if below == 0 {
		t.Fatal("the walk never reached 0deep/x.txt")
	}
	// Names and types: about 40 bytes an entry here (2.4 MB); with file information
	// it was about 20 MB.
	if grew := int64(below) - int64(before); grew > 8<<20 {
		t.Errorf("the heap grew by %.1f MB while the walk was below a directory of %d entries, want under 8 MB",
			float64(grew)/(1<<20), n)
	}
}
