package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plan previewed again while its files are as they were is answered from the cache
// (the very previews); a file changed since, another person, or another plan is
// previewed anew.
func TestPreviewCache(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edit, _ := json.Marshal(map[string]any{"operation": "replace_string", "filePath": "a.txt", "oldString": "one", "newString": "two"})
	plan := []PreviewCall{{Tool: "file_operations", Arguments: edit}}
	preview := func(user string, calls []PreviewCall) *FilePreview {
		t.Helper()
		ps, err := s.PreviewPlan(ctx, "c1", user, calls)
		if err != nil || len(ps) != len(calls) {
			t.Fatalf("preview: %v %v", ps, err)
		}
		return ps[0]
	}
	first := preview("", plan)
	if first == nil || !strings.Contains(first.Diff, "-one\n+two\n") {
		t.Fatalf("the preview: %+v", first)
	}
	if again := preview("", plan); again != first {
		t.Fatalf("previewed again over the same file: %p, want the cached %p", again, first)
	}
	if other := preview("someone-else", plan); other == first || other == nil || other.Diff != first.Diff {
		t.Fatalf("another person's preview: %+v (cached %p)", other, first)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one, changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed := preview("", plan); changed == first || changed == nil || !strings.Contains(changed.Diff, "-one, changed\n+two, changed\n") {
		t.Fatalf("previewed after the file changed: %+v", changed)
	}
}
