package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A rename onto the very entry it names, through a symlinked alias of its directory
// (alias/a.go to src/a.go), is refused and leaves the file, even when it has another
// hard link: before, the two names were taken for two links of one file, the link at
// filePath removed, and src/a.go, the only name in src, was gone after "renamed". The
// plan's preview of it shows nothing, as for any step that will be refused.
func TestRenameOntoItselfThroughAlias(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	if err := os.Mkdir(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ws, "src", "a.go")
	writeTestFile(t, file, "package a\n")
	if err := os.Link(file, filepath.Join(ws, "backup.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(ws, "alias")); err != nil {
		t.Fatal(err)
	}
	const step = `{"operation":"rename_file","filePath":"alias/a.go","newPath":"src/a.go","overwrite":true}`
	ps, err := s.PreviewPlan(context.Background(), "c1", "", []PreviewCall{{Tool: "file_operations", Arguments: json.RawMessage(step)}})
	if err != nil || ps[0] != nil {
		t.Errorf("the preview of a rename onto itself: %+v %v", ps[0], err)
	}
	for _, args := range []string{step, `{"operation":"rename_file","filePath":"src/a.go","newPath":"src/a.go","overwrite":true}`} {
		res, text, _ := fileOpResult(t, s, ws, "mv", args)
		if !res.IsError || !strings.Contains(text, "name the same file") {
			t.Errorf("%s: %v %q, want it refused as naming the same file", args, res.IsError, text)
		}
		fileHolds(t, file, "package a\n")
	}
	// Two names in one directory, hard links of one file, are still two: the rename
	// leaves newPath (TestRenameOntoHardLink has it through filePath's own directory).
	if err := os.Link(file, filepath.Join(ws, "src", "b.go")); err != nil {
		t.Fatal(err)
	}
	res, text, _ := fileOpResult(t, s, ws, "mv2", `{"operation":"rename_file","filePath":"alias/b.go","newPath":"src/a.go","overwrite":true}`)
	if res.IsError {
		t.Fatal(text)
	}
	if _, err := os.Lstat(filepath.Join(ws, "src", "b.go")); !os.IsNotExist(err) {
		t.Errorf("src/b.go after it was renamed onto src/a.go: %v", err)
	}
	fileHolds(t, file, "package a\n")
}
