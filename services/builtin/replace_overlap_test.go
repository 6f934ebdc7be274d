package builtin_test

import (
	"path/filepath"
	"testing"
)

// A string found at two overlapping places ("aa" in "aaa") occurs more than once:
// replace_string and multi_replace refuse it as ambiguous and write nothing, rather
// than replacing the first place as if it were the only one.
func TestReplaceRefusesOverlappingMatches(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ok("c1", args{"operation": "create_file", "filePath": "x.txt", "content": "x = aaa\n"})
	f.fails("c1", args{"operation": "replace_string", "filePath": "x.txt", "oldString": "aa", "newString": "b"},
		"oldString occurs more than once")
	f.fails("c1", args{"operation": "multi_replace", "filePath": "x.txt",
		"replacements": []args{{"oldString": "x =", "newString": "y ="}, {"oldString": "aa", "newString": "b"}}}, "occurs more than once")
	if got := string(readBytes(t, filepath.Join(f.root, "c1", "x.txt"))); got != "x = aaa\n" {
		t.Fatalf("a refused replace wrote: %q", got)
	}
	// Matches that do not overlap are counted as before; a single match is replaced.
	f.fails("c1", args{"operation": "replace_string", "filePath": "x.txt", "oldString": "a", "newString": "b"}, "oldString occurs 3 times")
	f.ok("c1", args{"operation": "replace_string", "filePath": "x.txt", "oldString": "aaa", "newString": "b"})
	if got := string(readBytes(t, filepath.Join(f.root, "c1", "x.txt"))); got != "x = b\n" {
		t.Fatalf("the replace wrote: %q", got)
	}
}
