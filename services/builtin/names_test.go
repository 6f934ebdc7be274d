package builtin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// On a case-insensitive root (SMB, macOS, casefold ext4) a name cased differently opens
// the same directory: a conversation id with capitals gets a workspace of its own (by
// its hash), never the one of its lowercase twin, and no path reaches a directory under
// the root by a name that is not a workspace's (.snapshots, .terminals, in any case).
func TestWorkspaceNamesIgnoreCase(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	name := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)
	lower := "user-0b7e5a3c-5d55-4a4a-9a43-0d6c2f3e9a11"
	for _, conv := range []string{strings.ToUpper(lower), "User-" + lower[5:], "Conv-1", "CONV-1"} {
		d := filepath.Base(f.ws(conv))
		if !name.MatchString(d) || strings.EqualFold(d, lower) || strings.EqualFold(d, "conv-1") {
			t.Errorf("the workspace of %q is %q: not a lowercase name of its own", conv, d)
		}
	}
	for _, conv := range []string{lower, "conv-1", "pf-tina-era", "c1", "ok.1_x"} {
		if d := filepath.Base(f.ws(conv)); d != conv {
			t.Errorf("the workspace of %q is %q, want its own name", conv, d)
		}
	}
	// The hashed names are the hashes': an id naming one literally gets another.
	sum := sha256.Sum256([]byte("Conv-1"))
	squat := "c-" + hex.EncodeToString(sum[:16])
	if d := filepath.Base(f.ws(squat)); d == squat {
		t.Errorf("the id %q has the workspace %q, which is Conv-1's", squat, d)
	}

	// Directories under the root that are not workspaces, as a case-insensitive root
	// would show them.
	f.ws("c1")
	f.ok("c1", args{"operation": "create_file", "filePath": "snap.txt", "content": "x"}) // makes the store exist
	for _, d := range []string{".SNAPSHOTS", ".Snapshots", ".terminals", ".TERMINALS", "Conv-2", "C1"} {
		if err := os.MkdirAll(filepath.Join(f.root, d), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.root, d, "0.blob"), []byte("hidden"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{".SNAPSHOTS", ".Snapshots", ".snapshots", ".terminals", ".TERMINALS", "Conv-2", "C1"} {
		want := "not in a workspace"
		if strings.EqualFold(d, ".snapshots") {
			want = "snapshot store"
		}
		for _, p := range []string{filepath.Join(f.root, d, "0.blob"), "../" + d + "/0.blob"} {
			f.fails("c1", args{"operation": "read_file", "filePath": p}, want)
			f.fails("c1", args{"operation": "create_file", "filePath": p, "content": "x", "overwrite": true}, want)
		}
		f.fails("c1", args{"operation": "list_dir", "path": filepath.Join(f.root, d)}, want)
		f.fails("c1", args{"operation": "delete_file", "filePath": filepath.Join(f.root, d, "0.blob")}, want)
		if d == ".snapshots" {
			continue
		}
		if got := string(readBytes(t, filepath.Join(f.root, d, "0.blob"))); got != "hidden" {
			t.Errorf("%s/0.blob was changed: %q", d, got)
		}
	}
}

// A workspace an earlier version named as its conversation id (capitals and all) is
// moved to the id's hashed name the first time the conversation is used again, files
// and all; a lowercase directory of another conversation is left where it is.
func TestEarlierWorkspaceAdopted(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	old := filepath.Join(f.root, "Project-A")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "notes.md"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := f.ws("project-b")
	ws := f.ws("Project-A")
	if b, err := os.ReadFile(filepath.Join(ws, "notes.md")); err != nil || string(b) != "kept" {
		t.Errorf("the earlier workspace's file in %s: %q, %v", ws, b, err)
	}
	if _, err := os.Lstat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the earlier directory is still there: %v", err)
	}
	f.ws("Project-B") // its earlier name would be project-b's on a case-insensitive root
	if st, err := os.Stat(other); err != nil || !st.IsDir() {
		t.Errorf("another conversation's lowercase workspace moved: %v", err)
	}
}
