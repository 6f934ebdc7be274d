package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/callmeta"
)

// Two edits of one file named through a symlinked directory both land: the edit lock
// is the file's (its directory's inode and its name), not its path's text. The edits
// run on two servers sharing the root, as replicas do, so the second one's wait for
// the first is seen where it takes the lock (its flock), not guessed from time.
func TestEditsThroughAliasBothLand(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	first, err := New(&Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	first.Add(first.FileOperations())
	second, err := New(&Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	second.Add(second.FileOperations())
	ws, err := first.Workspace("c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ws, "src", "a.go")
	if err := os.WriteFile(file, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(ws, "alias")); err != nil {
		t.Fatal(err)
	}
	// The first edit stops between its read and its write until released.
	read, release := make(chan struct{}), make(chan struct{})
	first.afterEditRead = func() {
		close(read)
		<-release
	}
	// The second says when its lock is held by another process, then waits for it.
	blocked := make(chan struct{}, 1)
	second.flock = func(fd, how int) error {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		select {
		case blocked <- struct{}{}:
		default:
		}
		return unix.Flock(fd, how)
	}
	edit := func(s *Server, p, old, new string) <-chan string {
		done := make(chan string, 1)
		go func() {
			args, _ := json.Marshal(map[string]any{"operation": "replace_string", "filePath": p, "oldString": old, "newString": new})
			op, err := s.tools["file_operations"].operation(args)
			if err != nil {
				done <- err.Error()
				return
			}
			meta := callmeta.Meta{ConversationID: "c1", CallID: "edit-" + old}
			res, err := op.Run(callmeta.With(context.Background(), meta), Call{Meta: meta, Workspace: ws}, args)
			switch {
			case err != nil:
				done <- err.Error()
			case res.IsError:
				done <- res.Content[0].(*mcp.TextContent).Text
			default:
				done <- ""
			}
		}()
		return done
	}
	firstDone := edit(first, "src/a.go", "one", "ONE")
	<-read
	secondDone := edit(second, "alias/a.go", "two", "TWO")
	select {
	case <-blocked:
	case e := <-secondDone:
		t.Errorf("the edit through alias/a.go ran while an edit of src/a.go held the file (%q)", e)
		secondDone = nil
	}
	close(release)
	if e := <-firstDone; e != "" {
		t.Errorf("the edit of src/a.go: %s", e)
	}
	if secondDone != nil {
		if e := <-secondDone; e != "" {
			t.Errorf("the edit of alias/a.go: %s", e)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "ONE\nTWO\n" {
		t.Errorf("after edits of src/a.go and alias/a.go at once, a.go is %q; want both changes", got)
	}
}
