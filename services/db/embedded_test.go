package db

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Handing the cluster's folder to the postgres user tolerates files that vanish during
// the walk: a serve started right after one was killed finds the old postmaster still
// exiting and removing files (TestSecondServeRefused failed on it once in CI).
func TestPrepareDirsWhileFilesVanish(t *testing.T) {
	t.Parallel()
	cred, err := clusterCredential()
	if err != nil {
		t.Fatal(err)
	}
	if cred == nil {
		t.Skip("not root: nothing is handed to another user")
	}
	c := &Cluster{Dir: filepath.Join(t.TempDir(), "pg"), log: slog.New(slog.DiscardHandler)}
	data := filepath.Join(c.Dir, "data", "base")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		var files []string
		for i := range 1000 {
			p := filepath.Join(data, fmt.Sprintf("%d-%d", round, i))
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for _, p := range files {
				_ = os.Remove(p)
			}
		})
		err := c.prepareDirs(cred)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
