package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// A create_directory that fails part way (its last name too long) keeps a snapshot,
// and restoring it removes the directories it made: a path whose name is too long
// cannot exist, so it counts as absent rather than stopping the restore.
func TestRestoreAfterNameTooLong(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		t.Helper()
		var got []string
		err := filepath.WalkDir(ws, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(ws, p)
			got = append(got, rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := names()

	args := `{"operation":"create_directory","filePath":"made/deeper/` + strings.Repeat("x", 300) + `"}`
	op, err := s.tools["file_operations"].operation(json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: "call-long"}
	res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	id, _ := sc["snapshotId"].(string)
	if !res.IsError || id == "" {
		t.Fatalf("create_directory of a too long name: isError %v, structured %v, want an error naming a snapshot", res.IsError, sc)
	}
	if _, err := os.Stat(filepath.Join(ws, "made", "deeper")); err != nil {
		t.Fatalf("the failed create_directory made no directories, so nothing to restore: %v", err)
	}

	text, _ := runFileOp(t, s, ws, `{"operation":"restore_snapshot","snapshotId":"`+id+`"}`)
	if got := names(); !slices.Equal(got, before) {
		t.Errorf("workspace after restore (%s): %v, want %v", text, got, before)
	}
}
