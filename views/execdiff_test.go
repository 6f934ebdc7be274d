package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A step's file diff renders with additions and removals as ins and del, each line on
// its own, counted in the caption.
func TestExecDiff(t *testing.T) {
	d := NewDiff("a.txt", "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n")
	if d.Added != 1 || d.Removed != 1 || len(d.Lines) != 7 {
		t.Fatalf("NewDiff: %+v", d)
	}
	var b bytes.Buffer
	if err := execPreviewStep(ExecutionPreviewStep{Tool: "builtin__file_operations", Diff: d, Undo: ExecutionUndo{Kind: "snapshot"}}, "x").Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`data-testid="step-diff"`, `<ins class="diff-line diff-add"><span class="visually-hidden">added: </span>+2`,
		`<del class="diff-line diff-del"><span class="visually-hidden">removed: </span>-two`, "1 added", "1 removed",
		`<span class="diff-line diff-hunk">@@ -1,3 +1,3 @@`, "the snapshot this write takes"} {
		if !strings.Contains(html, want) {
			t.Fatalf("the rendered step lacks %q:\n%s", want, html)
		}
	}
}
