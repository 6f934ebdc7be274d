package views

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
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

// diffKinds is d's line kinds, one a line, with each line's text.
func diffKinds(d *ExecutionDiff) string {
	var b strings.Builder
	for _, l := range d.Lines {
		fmt.Fprintf(&b, "%s %s", l.Kind, l.Text)
	}
	return b.String()
}

// Inside a hunk, a removed "-- x" reads "--- x" and an added "++ x" reads "+++ x":
// they are a removal and an addition, shown and counted as such, not file headers, so
// the person approving a plan sees a SQL comment, a YAML "---" or front matter go. Only
// a file's header, before its first hunk or after the last line its @@ counts, is one.
func TestExecDiffHeaderLikeLines(t *testing.T) {
	for _, tc := range []struct {
		name, diff     string
		added, removed int
		kinds          string
	}{{
		name: "a removed -- comment and --- separator, an added ++ line",
		diff: udiff.Unified("a/q.sql", "b/q.sql", "title: x\n---\n-- keep: never drop users\nSELECT 1;\n",
			"title: x\n++ hidden\nSELECT 1;\nDROP TABLE users;\n"),
		added: 2, removed: 2,
		kinds: "file --- a/q.sql\nfile +++ b/q.sql\nhunk @@ -1,4 +1,4 @@\nctx  title: x\ndel ----\n" +
			"del --- keep: never drop users\nadd +++ hidden\nctx  SELECT 1;\nadd +DROP TABLE users;\n",
	}, {
		name: "two files one after the other, the first ending in a removal without a newline",
		diff: udiff.Unified("a/a.md", "b/a.md", "x\n-- y", "x\n++ y") +
			udiff.Unified("a/b.md", "b/b.md", "---\ntitle: t\n---\nbody\n", "body\n"),
		added: 1, removed: 4,
		kinds: "file --- a/a.md\nfile +++ b/a.md\nhunk @@ -1,2 +1,2 @@\nctx  x\ndel --- y\n" +
			"ctx \\ No newline at end of file\nadd +++ y\nctx \\ No newline at end of file\n" +
			"file --- a/b.md\nfile +++ b/b.md\nhunk @@ -1,4 +1 @@\ndel ----\ndel -title: t\ndel ----\nctx  body\n",
	}, {
		name: "a rename over a file, as a preview shows it",
		diff: "rename from old.yaml\nrename to new.yaml\n" +
			udiff.Unified("a/new.yaml", "b/new.yaml", "---\nkeep: 1\n", "--- \n++: 2\n"),
		added: 2, removed: 2,
		kinds: "ctx rename from old.yaml\nctx rename to new.yaml\nfile --- a/new.yaml\nfile +++ b/new.yaml\n" +
			"hunk @@ -1,2 +1,2 @@\ndel ----\ndel -keep: 1\nadd +--- \nadd +++: 2\n",
	}, {
		name: "a copy to a new file, then a deleted file",
		diff: "copy from a.sql\ncopy to b.sql\n" + udiff.Unified("a/b.sql", "b/b.sql", "", "-- c\nSELECT 1;\n") +
			udiff.Unified("a/c.sql", "b/c.sql", "-- gone\n", ""),
		added: 2, removed: 1,
		kinds: "ctx copy from a.sql\nctx copy to b.sql\nfile --- a/b.sql\nfile +++ b/b.sql\nhunk @@ -0,0 +1,2 @@\n" +
			"add +-- c\nadd +SELECT 1;\nfile --- a/c.sql\nfile +++ b/c.sql\nhunk @@ -1 +0,0 @@\ndel --- gone\n",
	}, {
		name:  "a diff cut short inside a hunk",
		diff:  "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n--- b\n[… the diff goes on: 900 bytes in all, the first 30 shown]\n",
		added: 0, removed: 1,
		kinds: "file --- a/x\nfile +++ b/x\nhunk @@ -1,3 +1,3 @@\nctx  a\ndel --- b\n" +
			"ctx [… the diff goes on: 900 bytes in all, the first 30 shown]\n",
	}, {
		name:  "a hunk whose counts cannot be read ends at the first line that is not a hunk's",
		diff:  "@@ -a +b @@\n----\n+++ y\nnot a hunk line\n--- a/z\n",
		added: 1, removed: 1,
		kinds: "hunk @@ -a +b @@\ndel ----\nadd +++ y\nctx not a hunk line\nfile --- a/z\n",
	}} {
		d := NewDiff("f", tc.diff)
		if got := diffKinds(d); d.Added != tc.added || d.Removed != tc.removed || got != tc.kinds {
			t.Errorf("%s: %d added, %d removed (want %d, %d):\n%s\nwant:\n%s", tc.name, d.Added, d.Removed, tc.added, tc.removed, got, tc.kinds)
		}
	}

	// Rendered, the removed separator and comment are del, the added line ins.
	d := NewDiff("q.sql", udiff.Unified("a/q.sql", "b/q.sql", "title: x\n---\n-- keep: never drop users\nSELECT 1;\n",
		"title: x\n++ hidden\nSELECT 1;\nDROP TABLE users;\n"))
	var b bytes.Buffer
	if err := execDiff(*d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"2 added", "2 removed",
		`<del class="diff-line diff-del"><span class="visually-hidden">removed: </span>----`,
		`<del class="diff-line diff-del"><span class="visually-hidden">removed: </span>--- keep: never drop users`,
		`<ins class="diff-line diff-add"><span class="visually-hidden">added: </span>+++ hidden`,
		`<span class="diff-line diff-file">--- a/q.sql`, `<span class="diff-line diff-file">+++ b/q.sql`} {
		if !strings.Contains(html, want) {
			t.Errorf("the rendered diff lacks %q:\n%s", want, html)
		}
	}
}
