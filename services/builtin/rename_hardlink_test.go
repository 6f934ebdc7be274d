package builtin_test

import (
	"os"
	"path/filepath"
	"testing"
)

// A rename onto a hard link of the same file (a terminal's `ln a.txt b.txt`), which
// rename(2) answers with success and no change, leaves only newPath; its restore puts
// filePath back.
func TestRenameOntoHardLink(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ws := f.ws("c1")
	a, b := filepath.Join(ws, "a.txt"), filepath.Join(ws, "b.txt")
	if err := os.WriteFile(a, []byte("hello\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	res := f.call("c1", args{"operation": "rename_file", "filePath": "a.txt", "newPath": "b.txt", "overwrite": true})
	if res.IsError {
		t.Fatal(text(res))
	}
	if _, err := os.Lstat(a); !os.IsNotExist(err) {
		t.Fatalf("a.txt after %q: %v", text(res), err)
	}
	if got := string(readBytes(t, b)); got != "hello\n" {
		t.Fatalf("b.txt after the rename: %q", got)
	}
	snap, _ := structured(t, res)["snapshotId"].(string)
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": snap})
	for _, p := range []string{a, b} {
		fi, err := os.Stat(p)
		if err != nil || string(readBytes(t, p)) != "hello\n" || fi.Mode().Perm() != 0o640 {
			t.Fatalf("%s after the restore: %v %v", p, fi, err)
		}
	}
	// Without overwrite, an existing newPath is refused as before, hard link or not.
	if err := os.Link(a, filepath.Join(ws, "c.txt")); err != nil {
		t.Fatal(err)
	}
	f.fails("c1", args{"operation": "rename_file", "filePath": "a.txt", "newPath": "c.txt"}, "already exists")
	if _, err := os.Lstat(a); err != nil {
		t.Fatalf("a.txt after a refused rename: %v", err)
	}
}
