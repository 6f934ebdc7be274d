package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The result caps of file_operations: file_search and grep_search stop at maxResults
// (and at the default of 200 without it) and say more exist, read_file stops at 256 KiB
// of output and says where to read on, list_dir shows 1000 entries and says how many
// there are. Each call finds more than its cap, so removing the cap fails the test.
func TestFileCaps(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		write(fmt.Sprintf("few/f%d.txt", i), "hit one\nmiss\nhit two\n")
	}
	for i := range 205 {
		write(fmt.Sprintf("many/m%03d.txt", i), "hit\n")
	}

	// file_search: 5 files match, 3 asked for.
	res := f.call("c1", args{"operation": "file_search", "pattern": "*.txt", "path": "few", "maxResults": 3})
	if got := text(res); res.IsError || got != "few/f0.txt\nfew/f1.txt\nfew/f2.txt\n[… more files match; the first 3 shown]" {
		t.Fatalf("file_search maxResults 3: %v %q", res.IsError, got)
	}
	if sc := structured(t, res); len(sc["files"].([]any)) != 3 || sc["more"] != true {
		t.Fatalf("file_search maxResults 3: %v", sc)
	}
	// ... 205 files, no maxResults: the default of 200.
	res = f.call("c1", args{"operation": "file_search", "pattern": "*.txt", "path": "many"})
	if sc := structured(t, res); len(sc["files"].([]any)) != 200 || sc["more"] != true || !strings.HasSuffix(text(res), "[… more files match; the first 200 shown]") {
		t.Fatalf("file_search without maxResults: %d files, more %v", len(sc["files"].([]any)), sc["more"])
	}

	// grep_search: 10 matching lines in 5 files, 3 asked for; the cap counts lines,
	// within a file too.
	res = f.call("c1", args{"operation": "grep_search", "pattern": "^hit", "path": "few", "maxResults": 3})
	if got := text(res); res.IsError || got != "few/f0.txt:1: hit one\nfew/f0.txt:3: hit two\nfew/f1.txt:1: hit one\n[… more matches; the first 3 shown]" {
		t.Fatalf("grep_search maxResults 3: %v %q", res.IsError, got)
	}
	if sc := structured(t, res); len(sc["matches"].([]any)) != 3 || sc["more"] != true {
		t.Fatalf("grep_search maxResults 3: %v", sc)
	}
	res = f.call("c1", args{"operation": "grep_search", "pattern": "hit", "path": "many"})
	if sc := structured(t, res); len(sc["matches"].([]any)) != 200 || sc["more"] != true {
		t.Fatalf("grep_search without maxResults: %d matches, more %v", len(sc["matches"].([]any)), sc["more"])
	}
	// Exactly as many as asked for: no "more".
	res = f.call("c1", args{"operation": "grep_search", "pattern": "^hit", "path": "few", "maxResults": 10})
	if sc := structured(t, res); len(sc["matches"].([]any)) != 10 || sc["more"] != false {
		t.Fatalf("grep_search of exactly maxResults: %v", sc)
	}

	// read_file: 300 lines of 1 KiB are 300 KiB; one call returns 256 KiB of them
	// (fewer than its default of 2000 lines) and says where to read on.
	line := strings.Repeat("r", 1023) + "\n"
	write("big.txt", strings.Repeat(line, 300))
	res = f.call("c1", args{"operation": "read_file", "filePath": "big.txt"})
	got := text(res)
	body, note, _ := strings.Cut(got, "\n[…")
	if res.IsError || len(body) != 256<<10 || strings.Count(body, line) != 256 ||
		note != " more lines follow (output capped at 262144 bytes): read on with offset 256]" {
		t.Fatalf("read_file of 300 KiB: %d bytes of body, note %q", len(body), note)
	}
	if sc := structured(t, res); sc["lines"] != float64(256) || sc["more"] != true || sc["nextOffset"] != float64(256) {
		t.Fatalf("read_file of 300 KiB: %v", sc)
	}
	// Reading on from there returns the rest, without a note.
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "big.txt", "offset": 256}); got != strings.Repeat(line, 44) {
		t.Fatalf("read_file from 256: %d bytes", len(got))
	}

	// list_dir: 1005 entries, 1000 shown.
	for i := range 1005 {
		write(fmt.Sprintf("crowd/e%04d", i), "")
	}
	res = f.call("c1", args{"operation": "list_dir", "path": "crowd"})
	lines := strings.Split(text(res), "\n")
	if res.IsError || len(lines) != 1001 || lines[0] != "e0000" || lines[999] != "e0999" || lines[1000] != "[… 1005 entries in all; the first 1000 shown]" {
		t.Fatalf("list_dir of 1005 entries: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if sc := structured(t, res); len(sc["entries"].([]any)) != 1000 {
		t.Fatalf("list_dir of 1005 entries: %d entries", len(sc["entries"].([]any)))
	}
}
