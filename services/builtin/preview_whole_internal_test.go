package builtin

import (
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
)

// wholeDiff, which writes the diff of a file made or deleted whole without a line diff,
// writes what udiff.Unified and bounded would, short or cut, with or without a final
// newline, and for a line longer than a preview keeps.
func TestWholeDiffIsTheLineDiff(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxPreviewDiff+10)
	for _, content := range []string{
		"one\n", "one", "one\ntwo\n", "one\ntwo", "\n", "\n\n", "a\r\nb\r\n",
		strings.Repeat("line\n", 30000), strings.Repeat("line\n", 30000) + "end",
		long, long + "\n", "head\n" + long + "\ntail\n",
		strings.Repeat("y", maxPreviewDiff-40) + "\n" + strings.Repeat("z", 100), // the no-newline note crosses the cut
	} {
		for _, sign := range []byte{'+', '-'} {
			old, new := "", content
			if sign == '-' {
				old, new = content, ""
			}
			want := bounded(udiff.Unified("a/f.txt", "b/f.txt", old, new))
			if got := wholeDiff("f.txt", []byte(content), sign); got != want {
				t.Fatalf("%c %d bytes: got\n%.300q\nwant\n%.300q", sign, len(content), got, want)
			}
		}
	}
}
