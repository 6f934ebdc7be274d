package builtin_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/builtin"
)

// The snapshot store is bounded: past its budget the oldest snapshots go, whatever their
// age, before the next write keeps anything; the newest stay and restore, and a
// rollback of a removed one is told it is gone.
func TestSnapshotStoreBudget(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	f := budgetFx(t, 3*mib)
	b := f.b

	f.ok("c1", args{"operation": "create_file", "filePath": "big.txt", "content": strings.Repeat("0", mib)})
	var ids []string
	for i := 1; i <= 8; i++ {
		res := f.call("c1", args{"operation": "create_file", "filePath": "big.txt", "content": strings.Repeat(string(rune('0'+i)), mib), "overwrite": true})
		if res.IsError {
			t.Fatalf("overwrite %d: %s", i, text(res))
		}
		ids = append(ids, structured(t, res)["snapshotId"].(string))
		// Each overwrite keeps the 1 MiB before it: the store never holds much more than
		// its budget (the write past it, until the next one trims).
		if held := storeBytes(t, f.root); held > 4*mib+64<<10 {
			t.Fatalf("after overwrite %d the snapshot store holds %d bytes, budget %d", i, held, 3*mib)
		}
	}
	// The first overwrites' snapshots went; the newest restores what it kept.
	f.fails("c1", args{"operation": "restore_snapshot", "snapshotId": ids[0]}, "no snapshot "+ids[0])
	if why, err := b.SnapshotGone("c1", ids[0]); err != nil || !strings.Contains(why, "passes its budget") {
		t.Fatalf("SnapshotGone of a snapshot removed for the budget: %q %v", why, err)
	}
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": ids[len(ids)-1]})
	if got := string(readBytes(t, filepath.Join(f.root, "c1", "big.txt"))); got != strings.Repeat("7", mib) {
		t.Fatalf("big.txt after restoring the newest snapshot: %.10q…, want the 7s it kept", got)
	}

	// The hourly pass trims too, to nine tenths of the budget, counting what it removed.
	n, err := b.PruneSnapshots(time.Now().Add(-builtin.SnapshotRetention))
	if err != nil {
		t.Fatal(err)
	}
	if held := storeBytes(t, f.root); held > 3*mib/10*9 {
		t.Fatalf("after the pass the store holds %d bytes (removed %d), want at most nine tenths of %d", held, n, 3*mib)
	}
}

// storeBytes is what the snapshot store under root holds.
func storeBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(filepath.Join(root, ".snapshots"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A restore of the oldest snapshot in a store past its budget is not trimmed away by
// its own write (the restore keeps what it replaces first, which counts the store):
// the snapshot it reads is held until it is put back.
func TestRestoreOfOldestSnapshotPastBudget(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	f := budgetFx(t, 3*mib)
	b := f.b

	f.ok("c1", args{"operation": "create_file", "filePath": "big.txt", "content": strings.Repeat("0", mib)})
	var ids []string
	for i := 1; i <= 4; i++ { // 4 MiB kept: past the budget, not trimmed yet (the next write trims)
		res := f.call("c1", args{"operation": "create_file", "filePath": "big.txt", "content": strings.Repeat(string(rune('0'+i)), mib), "overwrite": true})
		if res.IsError {
			t.Fatalf("overwrite %d: %s", i, text(res))
		}
		ids = append(ids, structured(t, res)["snapshotId"].(string))
	}
	if why, err := b.SnapshotGone("c1", ids[0]); err != nil || why != "" {
		t.Fatalf("the oldest snapshot before the restore: %q %v, want it there", why, err)
	}
	f.ok("c1", args{"operation": "restore_snapshot", "snapshotId": ids[0]})
	if got := string(readBytes(t, filepath.Join(f.root, "c1", "big.txt"))); got != strings.Repeat("0", mib) {
		t.Fatalf("big.txt after restoring the oldest snapshot: %.10q…, want the 0s it kept", got)
	}
}

// budgetFx is newFilesFx with a snapshot store of budget bytes.
func budgetFx(t *testing.T, budget int64) *filesFx {
	t.Helper()
	g := &fakeGrants{allow: map[string]bool{}}
	b, err := builtin.New(&builtin.Options{Root: filepath.Join(t.TempDir(), "root"), Grants: g, SnapshotBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(b.FileOperations())
	return &filesFx{t: t, b: b, cs: connect(t, b), root: b.Root(), grants: g}
}
