package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// The commands that only read refuse a data dir with no cluster (a mistyped --data-dir)
// and create nothing there: no cluster (initdb ran, then a raw SQL error), no checkpoint
// key. On an external database never migrated, they say it has no schema yet.
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"audit", "verify"}, {"audit", "checkpoint"}, {"secrets", "status"}} {
		typo := filepath.Join(t.TempDir(), "typo")
		stdout, stderr, err := runCmd(t, "", append(args, "--data-dir", typo)...)
		if err == nil || !strings.Contains(err.Error(), "holds no database") {
			t.Errorf("%v --data-dir typo: %v\n%s%s; want a refusal saying it holds no database", args, err, stdout, stderr)
		}
		if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v --data-dir typo: the data dir was created (%v)", args, err)
		}
	}
	empty := dbtest.NewEmpty(t)
	for _, args := range [][]string{{"audit", "verify"}, {"audit", "checkpoint"}, {"secrets", "status"}} {
		dir := t.TempDir()
		stdout, stderr, err := runCmd(t, "", append(args, "--data-dir", dir, "--database-url", empty)...)
		if err == nil || !strings.Contains(err.Error(), "no Toolwarden schema yet") {
			t.Errorf("%v on an empty database: %v\n%s%s; want it to say there is no schema yet", args, err, stdout, stderr)
		}
		if names, _ := os.ReadDir(dir); len(names) > 0 {
			t.Errorf("%v on an empty database: made %v in the data dir", args, names)
		}
	}
}
