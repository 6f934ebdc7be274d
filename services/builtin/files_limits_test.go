package builtin_test

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// file_search and grep_search go at most 256 directories deep, and say which folders
// they left out: a deep tree (a terminal makes thousands of levels in seconds) once
// kept the walk going, its memory growing with the square of the depth, until the
// call timed out.
func TestSearchWalkIsBoundedInDepth(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	deep := filepath.Join(ws, strings.Repeat("d/", 300))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 256, 257, 300} {
		p := filepath.Join(ws, strings.Repeat("d/", n), fmt.Sprintf("at%d.txt", n))
		if err := os.WriteFile(p, []byte("needle\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lvl := func(n int) string { return strings.Repeat("d/", n) }
	note := "[… " + strings.TrimSuffix(lvl(257), "/") + " is more than 256 directories deep: it was not searched]"
	got := f.ok("c1", args{"operation": "file_search", "pattern": "*.txt"})
	if want := lvl(3) + "at3.txt\n" + lvl(256) + "at256.txt\n" + note; got != want {
		t.Fatalf("file_search of a tree 300 deep:\n%q\nwant\n%q", got, want)
	}
	got = f.ok("c1", args{"operation": "grep_search", "pattern": "needle"})
	if want := lvl(3) + "at3.txt:1: needle\n" + lvl(256) + "at256.txt:1: needle\n" + note; got != want {
		t.Fatalf("grep_search of a tree 300 deep:\n%q\nwant\n%q", got, want)
	}
	// Searching lower down counts from where the search starts.
	got = f.ok("c1", args{"operation": "grep_search", "pattern": "needle", "path": strings.TrimSuffix(lvl(100), "/")})
	if !strings.Contains(got, "at300.txt:1: needle") || strings.Contains(got, "more than 256") {
		t.Fatalf("grep_search from level 100: %q", got)
	}
}

// A search stops going down where a folder's path grows past 4096 bytes (long names
// reach it long before 256 levels).
func TestSearchWalkIsBoundedInPathLength(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	name := strings.Repeat("n", 200)
	var rel []string
	for range 25 { // 25 × 201 bytes: past 4096 at the 21st level
		rel = append(rel, name)
	}
	// Made through a root: the whole path is longer than the system takes at once.
	r, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.MkdirAll(path.Join(rel...), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 21, 25} {
		if err := r.WriteFile(path.Join(path.Join(rel[:n]...), fmt.Sprintf("at%d.txt", n)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Where it stops depends a little on the workspace's own path in its area.
	got := f.ok("c1", args{"operation": "file_search", "pattern": "*.txt"})
	lines := strings.Split(got, "\n")
	if len(lines) < 2 || !strings.HasSuffix(lines[0], "/at2.txt") || strings.Contains(got, "at21.txt") || strings.Contains(got, "at25.txt") ||
		!strings.HasSuffix(got, " has a path longer than 4096 bytes: it was not searched]") {
		t.Fatalf("file_search under long names: %q", got)
	}
}

// grep_search finds a file's lines without a slice of them all: splitting a file of
// newlines once took 24 bytes a line (240 MiB for 10 MB), for every matching file.
// Lines and line numbers are as they were: the part after a last newline is a line.
func TestGrepLinesAsBefore(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	for name, body := range map[string]string{"a.txt": "one\n\nthree\r\nfour", "b.txt": "x\n\n", "c.txt": "\n", "e.txt": ""} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ pattern, want string }{
		{"^$", "a.txt:2: \nb.txt:2: \nb.txt:3: \nc.txt:1: \nc.txt:2: \ne.txt:1: "},
		{"e$", "a.txt:1: one"},
		{"three", "a.txt:3: three"},
		{"r$", "a.txt:4: four"},
		{"^", "a.txt:1: one\na.txt:2: \na.txt:3: three\na.txt:4: four\nb.txt:1: x\nb.txt:2: \nb.txt:3: \nc.txt:1: \nc.txt:2: \ne.txt:1: "},
	} {
		if got := f.ok("c1", args{"operation": "grep_search", "pattern": c.pattern}); got != c.want {
			t.Errorf("grep_search %q: %q, want %q", c.pattern, got, c.want)
		}
	}
}

// The memory grep_search takes for a file of 2 MiB of newlines is about what it takes
// for a file of 2 MiB in one line: a few times the file, not 24 times.
func TestGrepMemoryOfManyLines(t *testing.T) {
	// Not parallel: it measures what the process allocates.
	f := newFilesFx(t)
	ws := f.ws("c1")
	const size = 2 << 20
	long := "needle\n" + strings.Repeat("x", size)
	lines := "needle\n" + strings.Repeat("\n", size)
	for name, body := range map[string]string{"long/f.txt": long, "lines/f.txt": lines} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grep := func(dir string) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if got := f.ok("c1", args{"operation": "grep_search", "pattern": "needle", "path": dir}); got != dir+"/f.txt:1: needle" {
			t.Fatalf("grep_search in %s: %q", dir, got)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	grep("long") // the first call sets up what later ones reuse
	base, many := grep("long"), grep("lines")
	if many > base+size {
		t.Fatalf("grep_search of 2 MiB of newlines allocated %d bytes, of 2 MiB in one line %d", many, base)
	}
}

// insert_edit finds its line without a slice of all the lines, and inserts as before:
// each case is what the old split-based code made.
func TestInsertEditAsBefore(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	for i, c := range []struct {
		body string
		line int
		want string
	}{
		{"", 0, "X\n"},
		{"a", 0, "X\na"},
		{"a", 1, "a\nX\n"},
		{"a\n", 1, "a\nX\n"},
		{"a\nb", 1, "a\nX\nb"},
		{"a\nb", 2, "a\nb\nX\n"},
		{"a\n\nb\n", 2, "a\n\nX\nb\n"},
		{"a\n\nb\n", 3, "a\n\nb\nX\n"},
		{"\n\n", 1, "\nX\n\n"},
	} {
		name := fmt.Sprintf("f%d.txt", i)
		if err := os.WriteFile(filepath.Join(ws, name), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		f.ok("c1", args{"operation": "insert_edit", "filePath": name, "line": c.line, "content": "X"})
		if got := string(readBytes(t, filepath.Join(ws, name))); got != c.want {
			t.Errorf("insert after line %d of %q: %q, want %q", c.line, c.body, got, c.want)
		}
	}
	f.fails("c1", args{"operation": "insert_edit", "filePath": "f4.txt", "line": 5, "content": "X"}, "has 3 lines; line must be from 0 to 3")
	f.fails("c1", args{"operation": "insert_edit", "filePath": "f1.txt", "line": -1, "content": "X"}, "has 2 lines; line must be from 0 to 2")
}
