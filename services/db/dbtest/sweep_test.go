package dbtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// sweep removes a cluster folder whose owner process is gone, and leaves one whose
// owner lives, one being made (no owner yet) and anything else in the temp dir.
func TestSweep(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "pg", "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	gone := mk("twdb-gone", strconv.Itoa(dead.Process.Pid))
	live := mk("twdb-live", strconv.Itoa(os.Getpid()))
	making := mk("twdb-making", "")
	other := mk("other-dir", strconv.Itoa(dead.Process.Pid))
	sweep()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the folder of a process that is gone is still there (%v)", err)
	}
	for _, d := range []string{live, making, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
