package builtin_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// Replicas share --builtin-root: two servers over one root (as two processes would
// be) editing the same file at once must not lose an edit, which the in-process
// edit lock alone does not stop.
func TestEditsAcrossReplicas(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	const replicas, workers, edits = 2, 4, 40
	var sessions []*mcp.ClientSession
	var ws string
	for range replicas {
		b, err := builtin.New(&builtin.Options{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		b.Add(b.FileOperations())
		if ws, err = b.Workspace("c1"); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, connect(t, b))
	}
	file := filepath.Join(ws, "log.txt")
	if err := os.WriteFile(file, []byte("END\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for r, cs := range sessions {
		for w := range workers {
			wg.Go(func() {
				for i := range edits {
					marker := fmt.Sprintf("r%d-w%d-e%d", r, w, i)
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_operations",
						Arguments: map[string]any{"operation": "replace_string", "filePath": "log.txt", "oldString": "END", "newString": marker + "\nEND"},
						Meta:      mcp.Meta{callmeta.Key: callmeta.Meta{ConversationID: "c1", CallID: "call-" + marker}}})
					if err != nil {
						t.Error(err)
						return
					}
					if res.IsError {
						t.Errorf("%s: %s", marker, text(res))
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := string(readBytes(t, file))
	var lost []string
	for r := range replicas {
		for w := range workers {
			for i := range edits {
				if m := fmt.Sprintf("r%d-w%d-e%d\n", r, w, i); !strings.Contains(got, m) {
					lost = append(lost, strings.TrimSpace(m))
				}
			}
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d edits that succeeded are not in the file, e.g. %v", len(lost), replicas*workers*edits, lost[:min(len(lost), 5)])
	}
}

// The edit locks' files live in the snapshot store, and pruning it leaves them: a
// lock removed while held would not exclude the next one made in its place.
func TestPruneKeepsEditLocks(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ok("c1", args{"operation": "create_file", "filePath": "a.txt", "content": "x"})
	locks := filepath.Join(f.root, ".snapshots", ".locks")
	before, err := os.ReadDir(locks)
	if err != nil || len(before) == 0 {
		t.Fatalf("no edit lock files after a write: %v %v", before, err)
	}
	if _, err := f.b.PruneSnapshots(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadDir(locks); err != nil || len(after) != len(before) {
		t.Fatalf("pruning removed edit lock files: %d then %d: %v", len(before), len(after), err)
	}
}

// An edit that cannot take its lock fails saying so, and changes nothing.
func TestEditLockError(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	f.ok("c1", args{"operation": "create_file", "filePath": "a.txt", "content": "one\n"})
	locks := filepath.Join(f.root, ".snapshots", ".locks")
	if err := os.RemoveAll(locks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(locks, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.fails("c1", args{"operation": "replace_string", "filePath": "a.txt", "oldString": "one", "newString": "two"}, "lock the files to edit")
	if got := string(readBytes(t, filepath.Join(f.ws("c1"), "a.txt"))); got != "one\n" {
		t.Fatalf("a.txt: %q", got)
	}
}

// On a file system without flock (NFSv3 without lockd: ENOLCK; or ENOSYS, EOPNOTSUPP)
// writes take the in-process lock alone, and the server warns once that replicas
// sharing the root may lose concurrent edits; another flock error still fails the write.
func TestEditLockWithoutFlock(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.ENOLCK, syscall.ENOSYS, syscall.EOPNOTSUPP} {
		t.Run(errno.Error(), func(t *testing.T) {
			var logs testkit.SyncBuffer
			g := &fakeGrants{allow: map[string]bool{}}
			b, err := builtin.New(&builtin.Options{Root: filepath.Join(t.TempDir(), "root"), Grants: g,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			b.Add(b.FileOperations())
			builtin.SetFlockForTest(b, func(int, int) error { return errno })
			f := &filesFx{t: t, b: b, cs: connect(t, b), root: b.Root(), grants: g}
			f.ok("c1", args{"operation": "create_file", "filePath": "a.txt", "content": "one\n"})
			f.ok("c1", args{"operation": "replace_string", "filePath": "a.txt", "oldString": "one", "newString": "two"})
			if got := string(readBytes(t, filepath.Join(f.ws("c1"), "a.txt"))); got != "two\n" {
				t.Fatalf("a.txt: %q, want the edit made", got)
			}
			if n := strings.Count(logs.String(), "replicas sharing this root may lose concurrent edits"); n != 1 {
				t.Fatalf("warned %d times, want once:\n%s", n, logs.String())
			}
		})
	}
	f := newFilesFx(t)
	builtin.SetFlockForTest(f.b, func(int, int) error { return syscall.EIO })
	f.fails("c1", args{"operation": "create_file", "filePath": "a.txt", "content": "one\n"}, "lock the files to edit")
	if _, err := os.Stat(filepath.Join(f.ws("c1"), "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a.txt after a write whose flock failed with EIO: %v, want none", err)
	}
}
