package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// restore_snapshot of another conversation's snapshot fails exactly as that of an id
// that is not there, its write finished or still running: before, one said "belongs to
// another conversation" and the other "its write has not finished yet" (the write was
// looked at before whose it was), so ids told which snapshots other conversations had.
func TestRestoreOthersSnapshotAsMissing(t *testing.T) {
	t.Parallel()
	s, _ := fileServer(t)
	ws2, err := s.Workspace("c2")
	if err != nil {
		t.Fatal(err)
	}
	run := func(conv, ws, callID, args string) (bool, string) {
		t.Helper()
		op, err := s.tools["file_operations"].operation(json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		meta := callmeta.Meta{ConversationID: conv, CallID: callID}
		res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return res.IsError, res.Content[0].(*mcp.TextContent).Text
	}
	ws1, _ := s.Workspace("c1")
	restore := func(id string) string {
		t.Helper()
		isErr, text := run("c1", ws1, "restore-"+id, `{"operation":"restore_snapshot","snapshotId":"`+id+`"}`)
		if !isErr {
			t.Fatalf("c1 restored %s: %s", id, text)
		}
		return strings.ReplaceAll(text, id, "<id>")
	}
	missing := restore("no-such-snapshot")
	if isErr, text := run("c2", ws2, "c2-write", `{"operation":"create_file","filePath":"a.txt","content":"x"}`); isErr {
		t.Fatal(text)
	}
	if got := restore("c2-write"); got != missing {
		t.Errorf("restoring another conversation's snapshot: %q; an id not there: %q", got, missing)
	}
	// The same snapshot while a write holds its marker (its write still runs).
	marker, err := os.OpenFile(filepath.Join(s.opts.Root, snapshotDir, "c2-write", writingMarker), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	if err := unix.Flock(int(marker.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Skipf("no flock here: %v", err)
	}
	if got := restore("c2-write"); got != missing {
		t.Errorf("restoring another conversation's snapshot while its write runs: %q; an id not there: %q", got, missing)
	}
	fileHolds(t, filepath.Join(ws2, "a.txt"), "x")
	// Its own conversation is told the write still runs, and then restores it.
	if isErr, text := run("c2", ws2, "c2-restore", `{"operation":"restore_snapshot","snapshotId":"c2-write"}`); !isErr || !strings.Contains(text, "not finished") {
		t.Errorf("c2 restoring its snapshot while its write runs: %v %q", isErr, text)
	}
	marker.Close()
	if err := os.Remove(marker.Name()); err != nil {
		t.Fatal(err)
	}
	if isErr, text := run("c2", ws2, "c2-restore2", `{"operation":"restore_snapshot","snapshotId":"c2-write"}`); isErr {
		t.Errorf("c2 restoring its snapshot: %q", text)
	}
	if _, err := os.Lstat(filepath.Join(ws2, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt after its creation was restored: %v", err)
	}
}
