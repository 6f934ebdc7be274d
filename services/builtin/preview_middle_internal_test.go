package builtin

import (
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff"
)

// A small edit in a file too large for a whole line diff previews as the unified diff
// udiff.Unified writes for the whole files (the same hunks, lines and line numbers),
// wherever it is: at either end, in the middle, with or without a final newline, as
// one hunk or several.
func TestMiddleDiffIsTheLineDiff(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 1; i <= 25000; i++ {
		fmt.Fprintf(&b, "l%05d\n", i)
	}
	base := b.String() // 25,000 lines, 175 KB: two of them pass maxDiffLines
	line := func(i int) string { return fmt.Sprintf("l%05d\n", i) }
	repl := func(s string, pairs ...string) string { return strings.NewReplacer(pairs...).Replace(s) }
	noEOL := strings.TrimSuffix(base, "\n")
	for _, c := range []struct{ name, old, new string }{
		{"one line in the middle", base, repl(base, line(12500), "changed\n")},
		{"the first line", base, repl(base, line(1), "changed\n")},
		{"the second line", base, repl(base, line(2), "changed\n")},
		{"the fourth line", base, repl(base, line(4), "changed\n")},
		{"the last line", base, repl(base, line(25000), "changed\n")},
		{"the third to last line", base, repl(base, line(24998), "changed\n")},
		{"a line inserted", base, repl(base, line(7000), line(7000)+"new\n")},
		{"a line removed", base, repl(base, line(7000), "")},
		{"the first line removed", base, strings.TrimPrefix(base, line(1))},
		{"a line appended", base, base + "end\n"},
		{"the last line removed", base, strings.TrimSuffix(base, line(25000))},
		{"the final newline removed", base, noEOL},
		{"a final newline added", noEOL, base},
		{"the last line changed, no final newline", noEOL, strings.TrimSuffix(noEOL, "l25000") + "changed"},
		{"a line without final newline appended", base, base + "end"},
		{"two lines close together", base, repl(base, line(9000), "a\n", line(9006), "b\n")},
		{"two lines apart", base, repl(base, line(9000), "a\n", line(9007), "b\n", line(15000), "c\n")},
		{"lines added, then joined", base, repl(base, line(9000), "a\nb\n", line(9006), "c\n", line(9100), "d\n")},
		{"a block replaced", base, repl(base, line(100), "x\ny\nz\n", line(101), "", line(102), "")},
		{"CRLF", strings.ReplaceAll(base, "\n", "\r\n"), strings.ReplaceAll(repl(base, line(300), "changed\n"), "\n", "\r\n")},
	} {
		if diffable([]byte(c.old), []byte(c.new)) {
			t.Fatalf("%s: small enough for a whole line diff", c.name)
		}
		want := bounded(newLines(udiff.Unified("a/f.txt", "b/f.txt", c.old, c.new)))
		got := unified("f.txt", []byte(c.old), []byte(c.new))
		if got != want {
			t.Errorf("%s: got\n%.600s\nwant\n%.600s", c.name, got, want)
		}
		if err := checkPatch(c.old, c.new, got); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// When the lines that changed are themselves too many to diff, the preview gives the
// sizes and the line where the files first differ.
func TestMiddleDiffTooLarge(t *testing.T) {
	t.Parallel()
	var x, y strings.Builder
	for i := 1; i <= 30000; i++ {
		fmt.Fprintf(&x, "x%05d\n", i)
		if i <= 41 || i > 29990 {
			fmt.Fprintf(&y, "x%05d\n", i) // the same first 41 and last 10 lines
		} else {
			fmt.Fprintf(&y, "y%05d\n", i)
		}
	}
	got := unified("f.txt", []byte(x.String()), []byte(y.String()))
	if want := "f.txt: 210000 bytes → 210000 bytes, too large to show a line diff; the first difference is at line 42\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// Changed from the first line: line 1.
	got = unified("f.txt", []byte(x.String()), []byte("new\n"+y.String()[7*41:]))
	if !strings.HasSuffix(got, "too large to show a line diff; the first difference is at line 1\n") {
		t.Fatalf("got %q", got)
	}
}

// commonLines keeps whole lines only, and never counts a line twice when the change
// is an insertion into a run of lines that are the same.
func TestCommonLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		old, new string
		pre, suf int
	}{
		{"a\nb\nc\n", "a\nx\nc\n", 2, 2},
		{"a\nbc\n", "a\nxc\n", 2, 0},  // "c\n" is common bytes, not a common line
		{"a\nb", "a\nb\n", 2, 0},      // "b" and "b\n" differ
		{"a\nb\n", "a\nb\nc\n", 4, 0}, // old is all prefix
		{"a\na\n", "a\na\na\n", 4, 0}, // the suffix may not reuse the prefix's lines
		{"x\na\n", "y\nx\na\n", 0, 4},
		{"ab\n", "b\n", 0, 0}, // "b\n" ends a line in old, is a whole line in new
		{"b\n", "ab\n", 0, 0},
	} {
		pre, suf := commonLines([]byte(c.old), []byte(c.new))
		if pre != c.pre || suf != c.suf {
			t.Errorf("%q → %q: %d %d, want %d %d", c.old, c.new, pre, suf, c.pre, c.suf)
		}
	}
}

var hunkHeader = regexp.MustCompile(`(?m)^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// newLines is diff, a udiff.Unified diff, with each hunk's line in the new file
// counted again from its line in the old one and the hunks before it: udiff v0.4.1
// leaves out the unchanged lines a hunk joins between two changes.
func newLines(diff string) string {
	moved := 0
	return hunkHeader.ReplaceAllStringFunc(diff, func(h string) string {
		m := hunkHeader.FindStringSubmatch(h)
		count := func(s string) int {
			if s == "" {
				return 1
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		from, _ := strconv.Atoi(m[1])
		to := from + moved
		moved += count(m[4]) - count(m[2])
		return strings.Replace(h, " +"+m[3], " +"+strconv.Itoa(to), 1)
	})
}

// A hunk after one that joins two changes gives its true line in the new file (udiff
// v0.4.1 gave line 19 here, leaving out the joined lines 5 to 9), and a diff of small
// files is otherwise udiff.Unified's, byte for byte.
func TestLineDiffNewLines(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	old := b.String()
	new := strings.NewReplacer("\n4\n", "\nfour\n", "\n10\n", "\nten\n", "\n25\n", "\ntwenty-five\n").Replace(old)
	got := unified("f.txt", []byte(old), []byte(new))
	if !strings.Contains(got, "@@ -22,7 +22,7 @@\n 22\n 23\n 24\n-25\n+twenty-five\n") {
		t.Fatalf("got\n%s", got)
	}
	if err := checkPatch(old, new, got); err != nil {
		t.Fatal(err)
	}
	if checkPatch(old, new, strings.Replace(got, "+22,7", "+21,7", 1)) == nil {
		t.Fatal("checkPatch takes a wrong line number")
	}
	rnd := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		old, new := randomLines(rnd, 40), randomLines(rnd, 40)
		if len(old) == 0 || len(new) == 0 {
			continue
		}
		got := unified("f.txt", []byte(old), []byte(new))
		if want := bounded(newLines(udiff.Unified("a/f.txt", "b/f.txt", old, new))); got != want {
			t.Fatalf("%q → %q: got\n%s\nwant\n%s", old, new, got, want)
		}
		if err := checkPatch(old, new, got); old != new && err != nil {
			t.Fatalf("%q → %q: %v in\n%s", old, new, err, got)
		}
	}
}

// randomLines is up to n lines of a few letters, often the same, the last one
// sometimes without its newline.
func randomLines(rnd *rand.Rand, n int) string {
	var b strings.Builder
	for k := rnd.Intn(n + 1); k > 0; k-- {
		b.WriteString([]string{"a", "b", "c", "d", "e"}[rnd.Intn(5)])
		if k > 1 || rnd.Intn(4) > 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Random changes between long runs of lines the two files share preview as the
// line diff of the whole files would show them.
func TestMiddleDiffRandom(t *testing.T) {
	t.Parallel()
	var head, tail strings.Builder
	for i := 0; i < 11000; i++ {
		fmt.Fprintf(&head, "h%05d\n", i)
		fmt.Fprintf(&tail, "t%05d\n", i)
	}
	rnd := rand.New(rand.NewSource(2))
	for i := 0; i < 40; i++ {
		shared := randomLines(rnd, 5)
		if !strings.HasSuffix(shared, "\n") {
			shared += "\n"
		}
		mid := [2]string{randomLines(rnd, 20), randomLines(rnd, 20)}
		for k := range mid {
			if !strings.HasSuffix(mid[k], "\n") && mid[k] != "" {
				mid[k] += "\n"
			}
		}
		end := ""
		if i%2 == 1 {
			end = tail.String()
		}
		old := head.String() + shared + mid[0] + shared + end
		new := head.String() + shared + mid[1] + shared + end
		if old == new {
			continue
		}
		// Where the same lines repeat, the line diff of the middle may pair them
		// otherwise than that of the whole files: the diff need only be true.
		got := unified("f.txt", []byte(old), []byte(new))
		if err := checkPatch(old, new, got); err != nil {
			t.Fatalf("%q → %q: %v in\n%s", mid[0], mid[1], err, got)
		}
		if len(got) > 4000 {
			t.Fatalf("%q → %q: %d bytes of diff", mid[0], mid[1], len(got))
		}
	}
}

// checkPatch is whether diff, a unified diff, turns old into new with each hunk's
// lines where its header says in both.
func checkPatch(old, new, diff string) error {
	split := func(s string) []string {
		l := strings.SplitAfter(s, "\n")
		return l[:len(l)-1+min(len(l[len(l)-1]), 1)] // not the "" after a final newline
	}
	ol, nl := split(old), split(new)
	d := strings.SplitAfter(diff, "\n")
	if len(d) < 3 || d[0] != "--- a/f.txt\n" || d[1] != "+++ b/f.txt\n" {
		return fmt.Errorf("no header")
	}
	oi, ni := 0, 0
	same := func(oe, ne int) error {
		if oe-oi != ne-ni || oe > len(ol) || ne > len(nl) {
			return fmt.Errorf("old lines %d-%d are not new lines %d-%d", oi+1, oe, ni+1, ne)
		}
		for ; oi < oe; oi, ni = oi+1, ni+1 {
			if ol[oi] != nl[ni] {
				return fmt.Errorf("old line %d is not new line %d", oi+1, ni+1)
			}
		}
		return nil
	}
	for k := 2; k < len(d) && d[k] != ""; k++ {
		m := hunkHeader.FindStringSubmatch(strings.TrimSuffix(d[k], "\n"))
		if m == nil {
			return fmt.Errorf("line %d: %q is no hunk header", k+1, d[k])
		}
		at := func(line, count string) (start, n int) {
			start, _ = strconv.Atoi(line)
			n = 1
			if count != "" {
				n, _ = strconv.Atoi(count)
			}
			if n > 0 {
				start--
			}
			return start, n
		}
		os, on := at(m[1], m[2])
		ns, nn := at(m[3], m[4])
		if err := same(os, ns); err != nil {
			return err
		}
		oe, ne := os+on, ns+nn
		for ; oi < oe || ni < ne; k++ {
			if k+1 >= len(d) {
				return fmt.Errorf("hunk %q cut short", m[0])
			}
			l := d[k+1]
			if k+2 < len(d) && strings.HasPrefix(d[k+2], "\\ No newline at end of file") {
				l = strings.TrimSuffix(l, "\n")
			}
			switch l[0] {
			case ' ':
				if oi >= oe || ni >= ne || ol[oi] != l[1:] || nl[ni] != l[1:] {
					return fmt.Errorf("context %q is not old line %d and new line %d", l, oi+1, ni+1)
				}
				oi, ni = oi+1, ni+1
			case '-':
				if oi >= oe || ol[oi] != l[1:] {
					return fmt.Errorf("%q is not old line %d", l, oi+1)
				}
				oi++
			case '+':
				if ni >= ne || nl[ni] != l[1:] {
					return fmt.Errorf("%q is not new line %d", l, ni+1)
				}
				ni++
			default:
				return fmt.Errorf("line %q in a hunk", l)
			}
			if k+2 < len(d) && strings.HasPrefix(d[k+2], "\\ ") {
				k++
			}
		}
	}
	return same(len(ol), len(nl))
}
