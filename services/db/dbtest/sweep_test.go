package dbtest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// sweep removes a cluster folder whose owner's lock nobody holds, and leaves one whose
// owner holds it, one being made (no owner file yet), one younger than a minute, and
// anything else in the temp dir.
func TestSweep(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	old := time.Now().Add(-time.Hour)
	mk := func(name string, owner bool, made time.Time) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "pg", "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte("1\ntest\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(d, made, made); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone := mk("twdb-gone", true, old)
	live := mk("twdb-live", true, old)
	making := mk("twdb-making", false, old)
	young := mk("twdb-young", true, time.Now())
	other := mk("other-dir", true, old)
	f, err := os.Open(filepath.Join(live, ownerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	sweep()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the folder of an owner that is gone is still there (%v)", err)
	}
	for _, d := range []string{live, making, young, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
