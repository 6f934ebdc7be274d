package builtin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pattern whose program is large costs its size times every byte searched, and a
// match cannot be stopped once it runs: such a pattern is refused, saying why.
func TestGrepRefusesComplexPattern(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("aaaa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.fails("c1", args{"operation": "grep_search", "pattern": `(?:a?){1000}(?:a?){1000}(?:a?){1000}b`},
		"pattern is too complex (6003 steps, at most 2000): simplify it")
	if got := f.ok("c1", args{"operation": "grep_search", "pattern": `a{4}`}); got != "a.txt:1: aaaa" {
		t.Errorf("a simple pattern: %q", got)
	}
}

// Each line is the text a pattern is matched against, so \A, \z and a ^ or $ without
// (?m) mean a line's start and end wherever the line is in the file.
func TestGrepTextAnchorsPerLine(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := os.WriteFile(filepath.Join(ws, "x.go"), []byte("package x\nfunc foo() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`\Afunc`, `(?-m:^)func`, `\(\) \{\}\z`, `\}(?-m:$)`} {
		if got := f.ok("c1", args{"operation": "grep_search", "pattern": p}); got != "x.go:2: func foo() {}" {
			t.Errorf("grep_search %q: %q, want line 2", p, got)
		}
	}
}

// A file over the size limit is not searched, and the result says so.
func TestGrepReportsSkippedLargeFiles(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := os.WriteFile(filepath.Join(ws, "small.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(ws, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.WriteString("needle\n"); err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(10<<20 + 1); err != nil { // sparse: one byte over the limit
		t.Fatal(err)
	}
	big.Close()
	got := f.ok("c1", args{"operation": "grep_search", "pattern": "needle"})
	if !strings.HasPrefix(got, "small.txt:1: needle\n") || !strings.Contains(got, "1 file over 10 MiB was not searched") {
		t.Errorf("grep_search with a file over the limit: %q", got)
	}
}

// A file is matched in pieces of whole lines: line numbers run on across them, a line
// longer than a piece is matched whole, and one too long for the pattern's size is
// left out, the result saying so.
func TestGrepAcrossPieces(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	filler := strings.Repeat("filler line\n", 10000) // 120,000 bytes: about two pieces
	long := strings.Repeat("x", 100<<10) + " needle"
	body := "needle 1\n" + filler + "needle 10002\n" + filler + long + "\n" + filler + "needle 20004"
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "a.txt:1: needle 1\na.txt:10002: needle 10002\na.txt:20003: " + strings.Repeat("x", 200) + "…\na.txt:30004: needle 20004"
	for _, p := range []string{"needle", `\Aneedle|needle\z`} {
		got := f.ok("c1", args{"operation": "grep_search", "pattern": p})
		if strings.Count(got, "\n") != 3 || !strings.HasPrefix(got, "a.txt:1: needle 1\na.txt:10002: needle 10002\na.txt:20003: xxx") || !strings.HasSuffix(got, "\na.txt:30004: needle 20004") {
			t.Errorf("grep_search %q:\n%.300q\nwant\n%.300q", p, got, want)
		}
	}
	// 468 instructions: lines up to about 570,000 bytes are searched.
	complex := `(?:x?){230}needle`
	got := f.ok("c1", args{"operation": "grep_search", "pattern": complex})
	if !strings.HasPrefix(got, "a.txt:1: needle 1\n") || !strings.Contains(got, "\na.txt:20003: ") {
		t.Errorf("grep_search %q of a 100 KiB line: %.300q", complex, got)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte(strings.Repeat("x", 1<<20)+" needle\nneedle 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = f.ok("c1", args{"operation": "grep_search", "pattern": complex})
	if !strings.HasPrefix(got, "a.txt:2: needle 2\n[… 1 line longer than ") || !strings.HasSuffix(got, " bytes was not searched: a simpler pattern searches longer lines]") {
		t.Errorf("grep_search %q of a 1 MiB line: %q", complex, got)
	}
}
