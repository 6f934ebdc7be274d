package builtin

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// A write that read or checked its file, and finds it changed as it keeps it for its
// snapshot (a terminal command rewrote it: the edit lock does not stop one), writes
// nothing and says so: before, the edit's result overwrote the person's later line, and
// a plan's step checked against the preview wrote over what changed after that check.
// The hook rewrites the file between the read (or check) and the write, as such a
// writer could.
func TestWriteRefusesFileChangedWhileEdited(t *testing.T) {
	t.Parallel()
	const later = "v0\nthe person's later line\n"
	b0 := []byte("v0\n")
	v0 := fingerprint(&b0)
	for _, tc := range []struct {
		name, args, expect, file string
	}{
		{"replace_string", `{"operation":"replace_string","filePath":"a.txt","oldString":"v0","newString":"v1"}`, "", "a.txt"},
		{"replace_string in a plan", `{"operation":"replace_string","filePath":"a.txt","oldString":"v0","newString":"v1"}`, v0, "a.txt"},
		{"insert_edit", `{"operation":"insert_edit","filePath":"a.txt","line":0,"content":"top"}`, "", "a.txt"},
		{"create_file in a plan", `{"operation":"create_file","filePath":"a.txt","content":"new\n","overwrite":true}`, v0, "a.txt"},
		{"delete_file in a plan", `{"operation":"delete_file","filePath":"a.txt"}`, v0, "a.txt"},
		// The copy's hook runs once it checked its source and what newPath holds: newPath
		// changes, and an overwrite would replace that change unseen.
		{"copy_file over a file in a plan", `{"operation":"copy_file","filePath":"src.txt","newPath":"a.txt","overwrite":true}`,
			moveFingerprint(fingerprint(&b0), v0), "a.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ws := fileServer(t)
			p := filepath.Join(ws, tc.file)
			writeTestFile(t, p, "v0\n")
			writeTestFile(t, filepath.Join(ws, "src.txt"), "v0\n")
			hooked := false
			s.afterEditRead = func() {
				hooked = true
				writeTestFile(t, p, later)
			}
			op, err := s.tools["file_operations"].operation(json.RawMessage(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			meta := callmeta.Meta{ConversationID: "c1", CallID: "call-e", Expect: tc.expect}
			res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, json.RawMessage(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if !hooked {
				t.Fatal("the write never reached the point where the file is rewritten")
			}
			msg := res.Content[0].(*mcp.TextContent).Text
			if !res.IsError || !strings.Contains(msg, "changed while being edited; nothing was written") {
				t.Errorf("the write of a file changed after it was read: %v %q", res.IsError, msg)
			}
			if tc.expect != "" && !strings.Contains(msg, "stale") {
				t.Errorf("a plan's step refused: %q, want it called stale", msg)
			}
			fileHolds(t, p, later)
			if sc, _ := res.StructuredContent.(map[string]any); sc["snapshotId"] != nil || sc["changed"] != nil {
				t.Errorf("a write that wrote nothing: %v", sc)
			}
		})
	}
}
