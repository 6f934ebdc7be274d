package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// age sets p's modification time to d ago, not following a symlink.
func age(t *testing.T, p string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// The names a write's temporary file gets are exactly the ones a sweep takes, however
// long the written file's name; names that merely look alike are not.
func TestTempNames(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"a", "notes.txt", ".env", strings.Repeat("é", 80), strings.Repeat("x", 255)} {
		if n := tempName(base); !isTempName(n) {
			t.Errorf("tempName(%.20q…) = %q, which isTempName refuses", base, n)
		}
	}
	for _, n := range []string{
		".a.txt.tw-0123456789ab.tmp",
		"." + strings.Repeat("x", maxTempBase) + ".tw-0123456789ab.tmp",
		"..env.tw-ffffffffffff.tmp",
		"...tw-000000000000.tmp", // base "."
	} {
		if !isTempName(n) {
			t.Errorf("isTempName(%q) = false, want true", n)
		}
	}
	for _, n := range []string{
		".a.txt.tw-0123456789a.tmp",   // 11 hex digits
		".a.txt.tw-0123456789abc.tmp", // 13
		".a.txt.tw-0123456789AB.tmp",  // upper case
		".a.txt.tw-0123456789ag.tmp",  // not hex
		"a.txt.tw-0123456789ab.tmp",   // no leading dot
		".a.txt.tw-0123456789ab.tmp~",
		".a.txt.tw-0123456789ab.temp",
		".a.txt.tx-0123456789ab.tmp",
		".a.txt-0123456789ab.tmp",
		".tw-0123456789ab.tmp", // no base
		"." + strings.Repeat("x", maxTempBase+1) + ".tw-0123456789ab.tmp",
	} {
		if isTempName(n) {
			t.Errorf("isTempName(%q) = true, want false", n)
		}
	}
}

// The hourly prune pass sweeps a crashed write's temporary file once it is older than
// tempSweepAge, and keeps one still fresh (a write in flight) and whatever merely looks
// like one: a name of the wrong form, a symlink, a directory.
func TestPrunePassSweepsLeftovers(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	old := 2 * tempSweepAge
	// The leftover is in a directory named after every other entry: the pass walks
	// directories in order of their names, so once it is gone the rest were judged.
	if err := os.MkdirAll(filepath.Join(ws, "zz", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(ws, "zz", "deep", tempName("notes.txt"))
	writeTestFile(t, leftover, "a whole copy\n")
	age(t, leftover, old)

	fresh := filepath.Join(ws, tempName("notes.txt"))
	writeTestFile(t, fresh, "in flight\n")
	kept := []string{fresh}
	for _, n := range []string{".notes.txt.tw-0123456789a.tmp", ".notes.txt.tw-0123456789AB.tmp", "notes.txt.tw-0123456789ab.tmp"} {
		p := filepath.Join(ws, n)
		writeTestFile(t, p, "mine\n")
		age(t, p, old)
		kept = append(kept, p)
	}
	target := filepath.Join(ws, "target.txt")
	writeTestFile(t, target, "pointed at\n")
	age(t, target, old)
	link := filepath.Join(ws, tempName("link.txt"))
	if err := os.Symlink("target.txt", link); err != nil {
		t.Fatal(err)
	}
	lat := unix.NsecToTimeval(time.Now().Add(-old).UnixNano())
	if err := unix.Lutimes(link, []unix.Timeval{lat, lat}); err != nil { // the link's own time
		t.Fatal(err)
	}
	dir := filepath.Join(ws, tempName("dir")) // empty: a Remove would take it
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	age(t, dir, old)
	kept = append(kept, target, link, dir)

	s.KeepSnapshotsPruned()
	t.Cleanup(s.Close)
	for deadline := time.Now().Add(10 * time.Second); exists(leftover); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s, %s old, is still there after the prune pass", leftover, old)
		}
	}
	for _, p := range kept {
		if !exists(p) {
			t.Errorf("%s was removed; it is not a crashed write's old temporary file", p)
		}
	}
}

// A leftover is swept once it is tempSweepAge old, not before: a write in flight keeps
// its temporary file.
func TestSweepAge(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	young := filepath.Join(ws, tempName("a.txt"))
	writeTestFile(t, young, "x")
	age(t, young, tempSweepAge-time.Minute)
	older := filepath.Join(ws, tempName("b.txt"))
	writeTestFile(t, older, "x")
	age(t, older, tempSweepAge+time.Minute)
	res := s.sweepTemps(sweepPos{}, maxSweepEntries, time.Now())
	if res.err != nil || res.removed != 1 || res.next != (sweepPos{}) {
		t.Errorf("sweep: %+v, want 1 removed, no error, the next pass from the start", res)
	}
	if !exists(young) || exists(older) {
		t.Errorf("after the sweep: %s there %v (want true), %s there %v (want false)", young, exists(young), older, exists(older))
	}
}

// A pass reads about its budget of entries and stops; the next goes on where it
// stopped (in another workspace, below a directory, after one), and passes in turn
// sweep every workspace and directory, each leftover once.
func TestSweepBounded(t *testing.T) {
	t.Parallel()
	resumedAfter := false // some pass stopped as it was about to go back up
	for _, budget := range []int{1, 4, 7, 10, 13, 1000} {
		s, ws := fileServer(t)
		ws2, err := s.Workspace("c2")
		if err != nil {
			t.Fatal(err)
		}
		var leftovers []string
		put := func(dir string, files int) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range files {
				writeTestFile(t, filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), "x")
			}
			p := filepath.Join(dir, tempName("f0.txt"))
			writeTestFile(t, p, "x")
			age(t, p, 2*tempSweepAge)
			leftovers = append(leftovers, p)
		}
		for _, w := range []string{ws, ws2} {
			put(w, 3)
			for i := range 6 {
				d := filepath.Join(w, fmt.Sprintf("d%d", i))
				put(d, 4)
				put(filepath.Join(d, "a"), 2)
				put(filepath.Join(d, "a", "b"), 1)
				put(filepath.Join(d, "c"), 2)
			}
		}
		var pos sweepPos
		removed, passes := 0, 0
		for {
			res := s.sweepTemps(pos, budget, time.Now())
			passes++
			if res.err != nil {
				t.Fatalf("budget %d, pass %d: %v", budget, passes, res.err)
			}
			// A pass begins a directory while it has budget left, and reads it whole:
			// here at most 10 entries (a workspace's own directory).
			if res.read > budget-1+10 {
				t.Errorf("budget %d: pass %d read %d entries", budget, passes, res.read)
			}
			removed += res.removed
			if res.next == (sweepPos{}) {
				break
			}
			if res.next == pos {
				t.Fatalf("budget %d: pass %d made no progress from %+v", budget, passes, pos)
			}
			resumedAfter = resumedAfter || res.next.after
			pos = res.next
			if passes > 1000 {
				t.Fatalf("budget %d: no end after 1000 passes", budget)
			}
		}
		if budget <= 10 && passes < 10 {
			t.Errorf("budget %d: %d passes swept it all; the budget should have taken more", budget, passes)
		}
		if removed != len(leftovers) {
			t.Errorf("budget %d: the passes removed %d, want %d", budget, removed, len(leftovers))
		}
		for _, p := range leftovers {
			if exists(p) {
				t.Errorf("budget %d: %s is still there after the passes went round", budget, p)
			}
		}
	}
	if !resumedAfter {
		t.Error("no pass stopped after a directory's subtree: that resumption went untested")
	}
}

// list_dir, file_search and grep_search leave out a write's temporary files (in
// flight, or a crash's until swept); a file that merely looks like one is shown.
func TestListingsHideTempFiles(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	tmp := tempName("notes.txt")
	writeTestFile(t, filepath.Join(ws, tmp), "needle\n")
	like := ".notes.txt.tw-0123456789a.tmp"
	writeTestFile(t, filepath.Join(ws, like), "needle\n")
	writeTestFile(t, filepath.Join(ws, "notes.txt"), "needle\n")
	for _, args := range []string{
		`{"operation":"list_dir","path":"."}`,
		`{"operation":"file_search","pattern":"*notes.txt*"}`,
		`{"operation":"grep_search","pattern":"needle"}`,
	} {
		_, text, sc := fileOpResult(t, s, ws, "call-1", args)
		var names []string
		switch v := sc; {
		case v["entries"] != nil:
			names, _ = v["entries"].([]string)
		case v["files"] != nil:
			names, _ = v["files"].([]string)
		default:
			ms, _ := v["matches"].([]grepMatch)
			for _, m := range ms {
				names = append(names, m.File)
			}
		}
		slices.Sort(names)
		if want := []string{like, "notes.txt"}; !slices.Equal(names, want) {
			t.Errorf("%s shows %q, want %q:\n%s", args, names, want, text)
		}
	}
}

// A write does not make a file or directory under a name of the writes' temporary files
// (hidden from listings, removed once old), but a leftover can be renamed away and
// deleted.
func TestNoFileMadeUnderATempName(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	tmp := tempName("notes.txt")
	writeTestFile(t, filepath.Join(ws, "notes.txt"), "kept\n")
	for _, args := range []string{
		`{"operation":"create_file","filePath":"` + tmp + `","content":"x"}`,
		`{"operation":"create_directory","filePath":"` + tmp + `"}`,
		`{"operation":"copy_file","filePath":"notes.txt","newPath":"` + tmp + `"}`,
		`{"operation":"rename_file","filePath":"notes.txt","newPath":"sub/` + tmp + `"}`,
	} {
		res, text, _ := fileOpResult(t, s, ws, "call-1", args)
		if !res.IsError || !strings.Contains(text, "temporary file") {
			t.Errorf("%s: %s; want it refused naming the temporary files", args, text)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, tmp)); !os.IsNotExist(err) {
		t.Fatalf("a refused write made %s: %v", tmp, err)
	}
	writeTestFile(t, filepath.Join(ws, tmp), "left by a crash\n")
	if res, text, _ := fileOpResult(t, s, ws, "call-1", `{"operation":"rename_file","filePath":"`+tmp+`","newPath":"saved.txt"}`); res.IsError {
		t.Fatalf("renaming a leftover away: %s", text)
	}
}
