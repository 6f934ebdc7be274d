package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// A restore_snapshot step is previewed as what it puts back: the diff from each path as
// it is now to what the snapshot kept (a file edited, a file the write created, which
// the restore removes, a file renamed back). Its fingerprint is the state of every
// path; run with it expected, a restore puts nothing back once a path changed since,
// and restores as previewed when none did. In a plan, a later step on a restored file
// is previewed against what the restore leaves.
func TestRestorePreview(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	ctx := context.Background()
	run := func(callID string, args any, expect string) (bool, string) {
		t.Helper()
		raw, _ := json.Marshal(args)
		op, err := s.tools["file_operations"].operation(raw)
		if err != nil {
			t.Fatal(err)
		}
		meta := callmeta.Meta{ConversationID: "c1", CallID: callID, Expect: expect}
		res, err := op.Run(callmeta.With(ctx, meta), Call{Meta: meta, Workspace: ws}, raw)
		if err != nil {
			t.Fatal(err)
		}
		return res.IsError, res.Content[0].(*mcp.TextContent).Text
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	restoreCall := func(id string) PreviewCall {
		args, _ := json.Marshal(map[string]string{"operation": "restore_snapshot", "snapshotId": id})
		return PreviewCall{Tool: "file_operations", Arguments: args}
	}
	preview := func(calls ...PreviewCall) []*FilePreview {
		t.Helper()
		ps, err := s.PreviewPlan(ctx, "c1", "", calls)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}

	write("notes.txt", "one\ntwo\nthree\n")
	if isErr, text := run("edit", map[string]any{"operation": "replace_string", "filePath": "notes.txt", "oldString": "two", "newString": "TWO"}, ""); isErr {
		t.Fatal(text)
	}
	if isErr, text := run("create", map[string]any{"operation": "create_file", "filePath": "new.txt", "content": "made\n"}, ""); isErr {
		t.Fatal(text)
	}
	write("moved.txt", "moving\n")
	if isErr, text := run("rename", map[string]any{"operation": "rename_file", "filePath": "moved.txt", "newPath": "there.txt"}, ""); isErr {
		t.Fatal(text)
	}

	ps := preview(restoreCall("edit"), restoreCall("create"), restoreCall("rename"), restoreCall("no-such-snapshot"))
	if ps[0] == nil || ps[0].Path != "notes.txt" || !strings.Contains(ps[0].Diff, "-TWO\n+two\n") ||
		ps[0].Fingerprint != "restore sha256:"+shaOf("one\nTWO\nthree\n") {
		t.Fatalf("the restore of an edit: %+v", ps[0])
	}
	if ps[1] == nil || !strings.Contains(ps[1].Diff, "new.txt: removed (the write created it)\n") || !strings.Contains(ps[1].Diff, "-made\n") {
		t.Fatalf("the restore of a created file: %+v", ps[1])
	}
	if ps[2] == nil || !strings.Contains(ps[2].Diff, "moved.txt: put back (it was deleted since)\n") || !strings.Contains(ps[2].Diff, "+moving\n") ||
		!strings.Contains(ps[2].Diff, "-moving\n") || ps[2].Fingerprint != "restore absent sha256:"+shaOf("moving\n") {
		t.Fatalf("the restore of a rename: %+v", ps[2])
	}
	if ps[3] != nil {
		t.Fatalf("a restore of a snapshot not there is previewed: %+v", ps[3])
	}
	for i, id := range []string{"edit", "create", "rename"} {
		if fp, err := s.Fingerprint(ctx, "c1", restoreCall(id)); err != nil || fp != ps[i].Fingerprint {
			t.Fatalf("the fingerprint of the restore of %s now: %q %v, the preview's %q", id, fp, err, ps[i].Fingerprint)
		}
	}

	// A plan that restores and then edits the file: the edit is previewed against the
	// restored content.
	edit, _ := json.Marshal(map[string]any{"operation": "replace_string", "filePath": "notes.txt", "oldString": "three", "newString": "3"})
	plan := preview(restoreCall("edit"), PreviewCall{Tool: "file_operations", Arguments: edit})
	if plan[1] == nil || plan[1].Fingerprint != "sha256:"+shaOf("one\ntwo\nthree\n") || !strings.Contains(plan[1].Diff, "-three\n+3\n") {
		t.Fatalf("an edit after a restore: %+v", plan[1])
	}

	// Changed since the preview: nothing is put back.
	write("notes.txt", "one\nTWO\nthree\nfour\n")
	if fp, _ := s.Fingerprint(ctx, "c1", restoreCall("edit")); fp == ps[0].Fingerprint {
		t.Fatal("the fingerprint did not change with the file")
	}
	isErr, text := run("restore-stale", map[string]any{"operation": "restore_snapshot", "snapshotId": "edit"}, ps[0].Fingerprint)
	if !isErr || !strings.Contains(text, "stale: notes.txt changed since the plan's preview; nothing was restored") {
		t.Fatalf("a restore whose file changed since its preview: %v %q", isErr, text)
	}
	fileHolds(t, filepath.Join(ws, "notes.txt"), "one\nTWO\nthree\nfour\n")

	// As previewed: restored.
	if isErr, text := run("restore-rename", map[string]any{"operation": "restore_snapshot", "snapshotId": "rename"}, ps[2].Fingerprint); isErr {
		t.Fatalf("a restore as previewed: %q", text)
	}
	fileHolds(t, filepath.Join(ws, "moved.txt"), "moving\n")
	if _, err := os.Stat(filepath.Join(ws, "there.txt")); !os.IsNotExist(err) {
		t.Fatalf("there.txt after the rename was restored: %v", err)
	}
}

func shaOf(s string) string {
	b := []byte(s)
	return fingerprint(&b)[len("sha256:"):]
}
