package builtin_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// read_file keeps only what it shows, however long a line is: a line longer than the
// whole output is shown cut (and reading on gets past it), a line before the offset
// is skipped without being kept, and lines that do not fit are left to the next call.
func TestReadFileBounded(t *testing.T) {
	f := newFilesFx(t)
	ws := f.ws("c1")
	long := strings.Repeat("a", 1<<20)
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("long.txt", long+"\nnext\n")
	res := f.call("c1", args{"operation": "read_file", "filePath": "long.txt", "limit": 1})
	got := text(res)
	if res.IsError || !strings.Contains(got, "[line cut: 1048577 bytes in all]") || len(got) > 256<<10+200 {
		t.Fatalf("a line of 1 MiB: error %v, %d bytes shown, ends %q", res.IsError, len(got), got[max(0, len(got)-120):])
	}
	if sc := structured(t, res); sc["nextOffset"] != float64(1) || sc["lines"] != float64(1) {
		t.Fatalf("a line of 1 MiB: %v", sc)
	}
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "long.txt", "offset": 1}); got != "next\n" {
		t.Fatalf("after the long line: %q", got)
	}

	// A byte that is not UTF-8 early in a long line does not cut the line there.
	write("latin1.txt", strings.Repeat("x", 9000)+"caf\xe9 "+long+"\n")
	if got := f.ok("c1", args{"operation": "read_file", "filePath": "latin1.txt"}); len(got) < 250<<10 {
		t.Fatalf("a long line with a Latin-1 byte: %d bytes shown", len(got))
	}

	third := strings.Repeat("b", 100<<10) + "\n"
	write("wide.txt", third+third+third)
	res = f.call("c1", args{"operation": "read_file", "filePath": "wide.txt"})
	if sc := structured(t, res); sc["lines"] != float64(2) || sc["nextOffset"] != float64(2) || !strings.Contains(text(res), "output capped") {
		t.Fatalf("three lines of 100 KiB: %v", sc)
	}
	if sc := structured(t, f.call("c1", args{"operation": "read_file", "filePath": "wide.txt", "offset": 2})); sc["lines"] != float64(1) || sc["more"] != false {
		t.Fatalf("the third line of 100 KiB: %v", sc)
	}

	// 64 MiB in one line, skipped: what the call allocates stays far below it.
	big, err := os.Create(filepath.Join(ws, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("c", 1<<20))
	for range 64 {
		if _, err := big.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := big.WriteString("\nlast\n"); err != nil {
		t.Fatal(err)
	}
	big.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got = f.ok("c1", args{"operation": "read_file", "filePath": "big.txt", "offset": 1})
	runtime.ReadMemStats(&after)
	if got != "last\n" {
		t.Fatalf("after 64 MiB in one line: %q", got)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("reading past 64 MiB in one line allocated %d MiB", n>>20)
	}
}

// A FIFO (a terminal command can make one) is refused at once by every operation that
// reads, instead of hanging the call in the kernel until a writer comes.
func TestFIFOIsNotWaitedFor(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		args args
		want string
	}{
		{args{"operation": "read_file", "filePath": "pipe"}, "pipe is not a regular file"},
		{args{"operation": "list_dir", "path": "pipe"}, "pipe is not a directory"},
		{args{"operation": "replace_string", "filePath": "pipe", "oldString": "x", "newString": "y"}, "not a regular file"},
		{args{"operation": "grep_search", "pattern": "needle"}, "a.txt"},
	}
	// The calls run aside: one that waits on the FIFO cannot be interrupted.
	results := make(chan string, len(calls))
	go func() {
		for _, c := range calls {
			res, err := f.callErr("c1", c.args)
			if err != nil {
				results <- err.Error()
				continue
			}
			results <- text(res)
		}
	}()
	for _, c := range calls {
		select {
		case got := <-results:
			if !strings.Contains(got, c.want) {
				t.Errorf("%v: %q, want %q", c.args, got, c.want)
			}
		case <-time.After(30 * time.Second):
			// A writer lets the waiting open return, so the test ends.
			if w, err := os.OpenFile(filepath.Join(ws, "pipe"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatalf("%v waited on the FIFO", c.args)
		}
	}
}

// A restore is a write: it keeps what it replaces, and its own snapshot undoes it (the
// hour of work a restore would put over is not lost). A rename restored after a file
// was made in the directory the rename created still brings the file back, leaving that
// directory with a note, instead of stopping with the file in neither place.
func TestRestoreIsUndoneAndGoesOn(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := f.call("c1", args{"operation": "replace_string", "filePath": "a.txt", "oldString": "v1", "newString": "v2"})
	edit, _ := structured(t, res)["snapshotId"].(string)
	// Later work on the file, outside the built-in tools (a terminal).
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("an hour of work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = f.call("c1", args{"operation": "restore_snapshot", "snapshotId": edit})
	undo, _ := structured(t, res)["snapshotId"].(string)
	if res.IsError || undo == "" || undo == edit || string(readBytes(t, filepath.Join(ws, "a.txt"))) != "v1\n" {
		t.Fatalf("restore: %v %q, its snapshot %q", res.IsError, text(res), undo)
	}
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": undo})
	if got := string(readBytes(t, filepath.Join(ws, "a.txt"))); got != "an hour of work\n" {
		t.Fatalf("after undoing the restore: %q", got)
	}

	res = f.call("c1", args{"operation": "rename_file", "filePath": "a.txt", "newPath": "pkg/new/a.txt"})
	moved, _ := structured(t, res)["snapshotId"].(string)
	if err := os.WriteFile(filepath.Join(ws, "pkg/new/b.txt"), []byte("made since\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": moved})
	if !strings.Contains(got, "pkg/new was left") || string(readBytes(t, filepath.Join(ws, "a.txt"))) != "an hour of work\n" {
		t.Fatalf("restoring the rename: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "pkg/new/b.txt")); err != nil {
		t.Fatalf("the file made since: %v", err)
	}

	// A file the write made that grew past what a snapshot keeps is left as it is, and
	// the restore says why: restoring it could not be undone (it was once deleted for
	// good), and the other paths are still restored.
	res = f.call("c1", args{"operation": "create_file", "filePath": "log.txt", "content": "start\n"})
	made, _ := structured(t, res)["snapshotId"].(string)
	grown := bytes.Repeat([]byte("x"), 11<<20)
	if err := os.WriteFile(filepath.Join(ws, "log.txt"), grown, 0o644); err != nil {
		t.Fatal(err)
	}
	got = f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": made})
	if !strings.Contains(got, "log.txt was left: it is now larger than the 10 MiB a snapshot keeps") {
		t.Fatalf("restoring over a grown file: %q", got)
	}
	if b := readBytes(t, filepath.Join(ws, "log.txt")); !bytes.Equal(b, grown) {
		t.Fatalf("the grown file after the restore: %d bytes", len(b))
	}
	// An overwrite of a file that grew since, with another file in the same snapshot.
	f.ok("c1", args{"operation": "create_file", "filePath": "small.txt", "content": "v1\n"})
	res = f.call("c1", args{"operation": "rename_file", "filePath": "small.txt", "newPath": "renamed.txt"})
	moved, _ = structured(t, res)["snapshotId"].(string)
	if err := os.WriteFile(filepath.Join(ws, "renamed.txt"), grown, 0o644); err != nil {
		t.Fatal(err)
	}
	got = f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": moved})
	if !strings.Contains(got, "renamed.txt was left: it is now larger") ||
		!bytes.Equal(readBytes(t, filepath.Join(ws, "renamed.txt")), grown) || string(readBytes(t, filepath.Join(ws, "small.txt"))) != "v1\n" {
		t.Fatalf("restoring a rename over a grown file: %q", got)
	}
}

// Two calls creating the same new file without overwrite at once: one creates it, the
// other is told it exists, and the file holds the winner's content (the loser's
// snapshot, saying it did not exist, would otherwise delete the winner's on restore).
func TestCreateRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ws("c1")
	for i := range 40 {
		name := fmt.Sprintf("race-%d.txt", i)
		results := make(chan *mcp.CallToolResult, 2)
		for _, content := range []string{"first", "second"} {
			go func() {
				res, err := f.callErr("c1", args{"operation": "create_file", "filePath": name, "content": content})
				if err != nil {
					res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
				}
				results <- res
			}()
		}
		a, b := <-results, <-results
		if a.IsError == b.IsError {
			t.Fatalf("%s: both calls %s: %q / %q", name, map[bool]string{true: "failed", false: "succeeded"}[a.IsError], text(a), text(b))
		}
	}
}

// Edits of one file at once are applied one after the other: each sees the one before,
// none is written over (each read the same original and wrote back its own change).
func TestConcurrentEditsAllLand(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf("line-%02d", i))
	}
	if err := os.WriteFile(filepath.Join(ws, "shared.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := make(chan string, len(lines))
	for _, l := range lines {
		go func() {
			res, err := f.callErr("c1", args{"operation": "replace_string", "filePath": "shared.txt", "oldString": l, "newString": strings.ToUpper(l)})
			switch {
			case err != nil:
				errs <- err.Error()
			case res.IsError:
				errs <- text(res)
			default:
				errs <- ""
			}
		}()
	}
	for range lines {
		if e := <-errs; e != "" {
			t.Errorf("an edit failed: %s", e)
		}
	}
	got := string(readBytes(t, filepath.Join(ws, "shared.txt")))
	if strings.Contains(got, "line-") {
		t.Fatalf("edits lost: %q", got)
	}
}

// read_file reads at most the first 80 MiB of a file in one call: a file of a GiB in
// one line (sparse, of 'a's and then zeros the binary check does not look at) is
// answered with the start of the line cut, and an offset past that with an error that
// says which offsets can be read. Before, the call read the whole file, however large
// (one of terabytes kept it reading for hours).
func TestReadFileScanIsBounded(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	huge, err := os.Create(filepath.Join(ws, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := huge.WriteString(strings.Repeat("a", 9000)); err != nil {
		t.Fatal(err)
	}
	if err := huge.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	huge.Close()
	read := func(offset int) *mcp.CallToolResult {
		t.Helper()
		return f.call("c1", args{"operation": "read_file", "filePath": "huge.txt", "offset": offset})
	}
	res := read(1)
	if !res.IsError || !strings.Contains(text(res), "read_file reads at most the first 80 MiB of a file, and they end within line 0") ||
		!strings.Contains(text(res), "offset of at most 0") {
		t.Fatalf("an offset past 80 MiB: %v %q", res.IsError, text(res))
	}
	res = read(0)
	if got := text(res); res.IsError || !strings.HasPrefix(got, "aaaa") || !strings.Contains(got, "[line cut: more than the 80 MiB read_file reads]") ||
		len(got) > 256<<10+200 || structured(t, res)["more"] != false {
		t.Fatalf("the start of a line of a GiB: %v, %d bytes, ends %q", res.IsError, len(got), got[max(0, len(got)-80):])
	}
}

// list_dir reads a directory in batches, and at most 10000 of its entries: of a larger
// one it shows the first 1000 by name of those and says there are more. Before, it read
// and sorted every entry however many there were.
func TestListDirReadsBounded(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	dir := filepath.Join(f.ws("c1"), "crowd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Links to one file: the entries are made quicker than files.
	one := filepath.Join(f.ws("c1"), "one")
	if err := os.WriteFile(one, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 10001 {
		if err := os.Link(one, filepath.Join(dir, fmt.Sprintf("e%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	res := f.call("c1", args{"operation": "list_dir", "path": "crowd"})
	lines := strings.Split(text(res), "\n")
	if res.IsError || len(lines) != 1001 || lines[1000] != "[… more than 10000 entries; the first 1000 by name of the 10000 read shown]" {
		t.Fatalf("list_dir of 10001 entries: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !slices.IsSorted(lines[:1000]) || len(structured(t, res)["entries"].([]any)) != 1000 {
		t.Fatalf("list_dir of 10001 entries: not the first 1000 by name of those read")
	}
}
