package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/builtin"
)

// A plan over large files previews without a line diff of them, whose time and memory
// grow with their lines and which cannot be interrupted: a step that changes a few
// lines shows them as a unified diff numbered in the whole file, one whose changed
// lines are too many says the sizes and where the change begins (and keeps the
// fingerprint its staleness check needs), a file made or deleted whole shows its first
// part; the whole preview allocates a small multiple of the files' size, not gigabytes.
func TestPreviewPlanLargeFiles(t *testing.T) {
	// Not parallel: the allocation is measured for the whole process.
	f := newFilesFx(t)
	ws := f.ws("c1")
	var x, y strings.Builder
	for i := 0; i < 500000; i++ { // 4 MiB a file, every line different
		fmt.Fprintf(&x, "x%06d\n", i)
		fmt.Fprintf(&y, "y%06d\n", i)
	}
	for name, content := range map[string]string{"x.txt": x.String(), "y.txt": y.String()} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	call := func(a args) builtin.PreviewCall {
		b, _ := json.Marshal(a)
		return builtin.PreviewCall{Tool: "file_operations", Arguments: b}
	}
	calls := []builtin.PreviewCall{
		call(args{"operation": "copy_file", "filePath": "x.txt", "newPath": "y.txt", "overwrite": true}),
		call(args{"operation": "replace_string", "filePath": "x.txt", "oldString": "x000000\n", "newString": "first\n"}),
		call(args{"operation": "create_file", "filePath": "z.txt", "content": y.String()}),
		call(args{"operation": "delete_file", "filePath": "y.txt"}),
		call(args{"operation": "replace_string", "filePath": "small.txt", "oldString": "a", "newString": "b"}),
		call(args{"operation": "replace_string", "filePath": "x.txt", "oldString": "x250000\n", "newString": "changed\n"}),
	}
	if err := os.WriteFile(filepath.Join(ws, "small.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	ps, err := f.b.PreviewPlan(context.Background(), "c1", "", calls)
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc - before
	if err != nil {
		t.Fatal(err)
	}
	n := int64(x.Len())
	sizes := fmt.Sprintf("%d bytes → %d bytes, too large to show a line diff; the first difference is at line 1\n", n, n)
	if p := ps[0]; p == nil || p.Diff != "copy from x.txt\ncopy to y.txt\ny.txt: "+sizes ||
		p.Fingerprint != "sha256:"+sha(x.String())+" newPath=sha256:"+sha(y.String()) {
		t.Fatalf("a copy over a large file: %+v", p)
	}
	if p := ps[1]; p == nil || p.Diff != "--- a/x.txt\n+++ b/x.txt\n@@ -1,4 +1,4 @@\n-x000000\n+first\n x000001\n x000002\n x000003\n" ||
		p.Fingerprint != "sha256:"+sha(x.String()) {
		t.Fatalf("an edit of a large file's first line: %+v", p)
	}
	if p := ps[2]; p == nil || !strings.HasPrefix(p.Diff, "--- a/z.txt\n+++ b/z.txt\n@@ -0,0 +1,500000 @@\n+y000000\n") ||
		!strings.Contains(p.Diff, "[… the diff goes on") || len(p.Diff) > 130<<10 || p.Fingerprint != "absent" {
		t.Fatalf("a large new file: %d bytes %.200q", len(p.Diff), p.Diff)
	}
	// y.txt holds x.txt's content once the copy ran.
	if p := ps[3]; p == nil || !strings.HasPrefix(p.Diff, "--- a/y.txt\n+++ b/y.txt\n@@ -1,500000 +0,0 @@\n-x000000\n") ||
		len(p.Diff) > 130<<10 || p.Fingerprint != "sha256:"+sha(x.String()) {
		t.Fatalf("a large file deleted: %d bytes %.200q", len(p.Diff), p.Diff)
	}
	if p := ps[4]; p == nil || !strings.Contains(p.Diff, "-a\n+b\n") {
		t.Fatalf("a small file's edit still shows its lines: %+v", p)
	}
	// One line in the middle of 4 MB, after the edit of its first line.
	if p := ps[5]; p == nil || p.Diff != "--- a/x.txt\n+++ b/x.txt\n@@ -249998,7 +249998,7 @@\n"+
		" x249997\n x249998\n x249999\n-x250000\n+changed\n x250001\n x250002\n x250003\n" ||
		p.Fingerprint != "sha256:"+sha(strings.Replace(x.String(), "x000000\n", "first\n", 1)) {
		t.Fatalf("an edit in the middle of a large file: %+v", p)
	}
	// Reading the two files a few times over, and the new file's content: tens of MB.
	// One line diff of them allocated over a gigabyte.
	if allocated > 128<<20 {
		t.Fatalf("the preview allocated %d MB", allocated>>20)
	}
	t.Logf("allocated %d MB", allocated>>20)
}

// A preview whose request has ended stops before its next step.
func TestPreviewPlanCancelled(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	if err := os.WriteFile(filepath.Join(f.ws("c1"), "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, _ := json.Marshal(args{"operation": "replace_string", "filePath": "a.txt", "oldString": "one", "newString": "1"})
	ps, err := f.b.PreviewPlan(ctx, "c1", "", []builtin.PreviewCall{{Tool: "file_operations", Arguments: b}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled preview: %v %v", ps, err)
	}
}
