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
		return fileCall(t, s, ws, callID, string(raw), expect)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
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

	ps := preview(restoreOf("edit"), restoreOf("create"), restoreOf("rename"), restoreOf("no-such-snapshot"))
	area := filepath.Base(ws)
	if ps[0] == nil || ps[0].Path != "notes.txt" || !strings.Contains(ps[0].Diff, "-TWO\n+two\n") ||
		ps[0].Fingerprint != `restore [["`+area+`/notes.txt","sha256:`+shaOf("one\nTWO\nthree\n")+`"]]` {
		t.Fatalf("the restore of an edit: %+v", ps[0])
	}
	if ps[1] == nil || !strings.Contains(ps[1].Diff, "new.txt: removed (the write created it)\n") || !strings.Contains(ps[1].Diff, "-made\n") {
		t.Fatalf("the restore of a created file: %+v", ps[1])
	}
	if ps[2] == nil || !strings.Contains(ps[2].Diff, "moved.txt: put back (it was deleted since)\n") || !strings.Contains(ps[2].Diff, "+moving\n") ||
		!strings.Contains(ps[2].Diff, "-moving\n") ||
		ps[2].Fingerprint != `restore [["`+area+`/moved.txt","absent"],["`+area+`/there.txt","sha256:`+shaOf("moving\n")+`"]]` {
		t.Fatalf("the restore of a rename: %+v", ps[2])
	}
	if ps[3] != nil {
		t.Fatalf("a restore of a snapshot not there is previewed: %+v", ps[3])
	}
	for i, id := range []string{"edit", "create", "rename"} {
		if fp, err := s.Fingerprint(ctx, "c1", restoreOf(id)); err != nil || fp != ps[i].Fingerprint {
			t.Fatalf("the fingerprint of the restore of %s now: %q %v, the preview's %q", id, fp, err, ps[i].Fingerprint)
		}
	}

	// A plan that restores and then edits the file: the edit is previewed against the
	// restored content.
	edit, _ := json.Marshal(map[string]any{"operation": "replace_string", "filePath": "notes.txt", "oldString": "three", "newString": "3"})
	plan := preview(restoreOf("edit"), PreviewCall{Tool: "file_operations", Arguments: edit})
	if plan[1] == nil || plan[1].Fingerprint != "sha256:"+shaOf("one\ntwo\nthree\n") || !strings.Contains(plan[1].Diff, "-three\n+3\n") {
		t.Fatalf("an edit after a restore: %+v", plan[1])
	}

	// Changed since the preview: nothing is put back.
	write("notes.txt", "one\nTWO\nthree\nfour\n")
	if fp, _ := s.Fingerprint(ctx, "c1", restoreOf("edit")); fp == ps[0].Fingerprint {
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

// fileCall runs file_operations with args (JSON) as call callID of conversation c1 in
// workspace ws, expecting expect (a preview's fingerprint, or ""), and returns whether
// its result is an error and its text.
func fileCall(t *testing.T, s *Server, ws, callID, args, expect string) (bool, string) {
	t.Helper()
	op, err := s.tools["file_operations"].operation(json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	meta := callmeta.Meta{ConversationID: "c1", CallID: callID, Expect: expect}
	res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return res.IsError, res.Content[0].(*mcp.TextContent).Text
}

// restoreOf is the preview call of restore_snapshot of snapshot id.
func restoreOf(id string) PreviewCall {
	return PreviewCall{Tool: "file_operations", Arguments: json.RawMessage(`{"operation":"restore_snapshot","snapshotId":"` + id + `"}`)}
}

func shaOf(s string) string {
	b := []byte(s)
	return fingerprint(&b)[len("sha256:"):]
}

// What a restore will do is what its preview says: a file grown past what a snapshot
// keeps is left (the restore leaves it), a mode it sets back is named, and a later step
// on a path of a restore that is not previewed is not previewed either (what it leaves
// is unknown, not what is there now).
func TestRestorePreviewSaysWhatItDoes(t *testing.T) {
	t.Parallel()
	s, ws := fileServer(t)
	ctx := context.Background()
	run := func(callID, args, expect string) (bool, string) {
		t.Helper()
		return fileCall(t, s, ws, callID, args, expect)
	}

	for name, content := range map[string]string{"big.txt": "small\n", "script.sh": "echo hi\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if isErr, text := run("grow", `{"operation":"replace_string","filePath":"big.txt","oldString":"small","newString":"smaller"}`, ""); isErr {
		t.Fatal(text)
	}
	if isErr, text := run("edit", `{"operation":"replace_string","filePath":"script.sh","oldString":"hi","newString":"hello"}`, ""); isErr {
		t.Fatal(text)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("x\n", 6<<20)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "script.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := s.PreviewPlan(ctx, "c1", "", []PreviewCall{restoreOf("grow"), restoreOf("edit")})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0] == nil || !strings.Contains(ps[0].Diff, "big.txt: left as it is: it is now larger than the 10 MiB a snapshot keeps") {
		t.Fatalf("the preview of a restore of a file grown past 10 MiB: %+v", ps[0])
	}
	if ps[1] == nil || !strings.Contains(ps[1].Diff, "script.sh: mode 0755 put back (it is 0644 now)\n") || !strings.Contains(ps[1].Diff, "-echo hello\n+echo hi\n") {
		t.Fatalf("the preview of a restore that sets a mode back: %+v", ps[1])
	}
	if _, text := run("undo-grow", `{"operation":"restore_snapshot","snapshotId":"grow"}`, ps[0].Fingerprint); !strings.Contains(text, "big.txt was left") {
		t.Fatalf("the restore of a file grown past 10 MiB: %q", text)
	}
	if isErr, text := run("undo-edit", `{"operation":"restore_snapshot","snapshotId":"edit"}`, ps[1].Fingerprint); isErr {
		t.Fatalf("the restore as previewed: %q", text)
	}
	if fi, err := os.Stat(filepath.Join(ws, "script.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("script.sh after the restore: %v %v", fi.Mode(), err)
	}

	// A restore whose first path holds what no preview knows (an earlier step restores it
	// from a snapshot whose copy cannot be read) is not previewed, and neither is an edit
	// after it of its second path: what the restore leaves there is unknown, not what is
	// there now.
	if err := os.WriteFile(filepath.Join(ws, "x.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if isErr, text := run("edit-x", `{"operation":"replace_string","filePath":"x.txt","oldString":"one","newString":"two"}`, ""); isErr {
		t.Fatal(text)
	}
	if isErr, text := run("move-x", `{"operation":"rename_file","filePath":"x.txt","newPath":"y.txt"}`, ""); isErr {
		t.Fatal(text)
	}
	kept, err := os.ReadDir(filepath.Join(s.opts.Root, snapshotDir, "edit-x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range kept {
		if de.Name() != manifestName && de.Name() != afterName {
			if err := os.Remove(filepath.Join(s.opts.Root, snapshotDir, "edit-x", de.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	edit, _ := json.Marshal(map[string]any{"operation": "replace_string", "filePath": "y.txt", "oldString": "two", "newString": "three"})
	plan, err := s.PreviewPlan(ctx, "c1", "", []PreviewCall{restoreOf("edit-x"), restoreOf("move-x"), {Tool: "file_operations", Arguments: edit}})
	if err != nil {
		t.Fatal(err)
	}
	if plan[0] == nil || !strings.Contains(plan[0].Diff, "x.txt: the snapshot's copy cannot be read for a preview") {
		t.Fatalf("a restore whose copy cannot be read: %+v", plan[0])
	}
	if plan[1] != nil || plan[2] != nil {
		t.Fatalf("after a restore not previewed: %+v, %+v", plan[1], plan[2])
	}
}

// A snapshot whose write crashed part way lists paths the write never changed; the
// restore finishes it first, dropping them, and checks the preview on the paths it
// restores: not refused as stale for the ones it no longer restores.
func TestRestorePreviewOfACrashedWrite(t *testing.T) {
	t.Parallel()
	f := newDurableFixture(t)
	ctx := context.Background()
	for _, n := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(f.ws, n), []byte(n+" before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.abandon("crashed", func() {
		if err := os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("a.txt changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "a.txt", "b.txt")
	call := restoreOf("crashed")
	ps, err := f.s.PreviewPlan(ctx, "c1", "", []PreviewCall{call})
	if err != nil || ps[0] == nil || !strings.Contains(ps[0].Diff, "-a.txt changed\n+a.txt before\n") {
		t.Fatalf("the preview: %v %+v", err, ps)
	}
	if fp, err := f.s.Fingerprint(ctx, "c1", call); err != nil || fp != ps[0].Fingerprint {
		t.Fatalf("the fingerprint before the step: %q %v, the preview's %q", fp, err, ps[0].Fingerprint)
	}
	if isErr, text := fileCall(t, f.s, f.ws, "undo", string(call.Arguments), ps[0].Fingerprint); isErr {
		t.Fatalf("the restore of a crashed write as previewed: %q", text)
	}
	if got := f.read("a.txt"); got != "a.txt before\n" {
		t.Fatalf("a.txt after the restore: %q", got)
	}
}
