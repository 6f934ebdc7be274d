package db_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A first start interrupted while initdb runs (Ctrl-C, SIGTERM: its context ends)
// leaves no half-made cluster behind: the next start makes a whole one and starts it.
func TestInitdbInterrupted(t *testing.T) {
	t.Parallel()
	dataDir := dbtest.TempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		c, err := db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true})
		if err == nil {
			c.Stop()
		}
		errc <- err
	}()
	// initdb writes PG_VERSION first, long before the cluster is whole: cancel then.
	pattern := filepath.Join(dataDir, "pg", "data*", "PG_VERSION")
	var err error
wait:
	for {
		select {
		case err = <-errc:
			t.Fatalf("the start ended before initdb wrote PG_VERSION: %v", err)
		default:
		}
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			cancel()
			err = <-errc
			break wait
		}
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Skip("initdb finished before the cancel reached it: nothing was interrupted")
	}
	t.Logf("interrupted start: %v", err)
	if m, _ := filepath.Glob(filepath.Join(dataDir, "pg", "data*")); len(m) > 0 {
		t.Errorf("the interrupted initdb left %v", m)
	}

	c, err := db.StartCluster(context.Background(), dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatalf("start after an interrupted initdb: %v", err)
	}
	defer c.Stop()
	conn := connect(t, c.URL())
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query after the start: %d, %v", one, err)
	}
}

// A data folder that exists already (here a link to a folder elsewhere, as to another
// disk) is filled in place: the cluster is where the link leads, and the link stays.
func TestInitdbIntoExistingDataFolder(t *testing.T) {
	t.Parallel()
	dataDir, elsewhere := dbtest.TempDir(t), dbtest.TempDir(t)
	if err := os.MkdirAll(filepath.Join(dataDir, "pg"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dataDir, "pg", "data")); err != nil {
		t.Fatal(err)
	}
	c, err := db.StartCluster(context.Background(), dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatalf("start with a linked data folder: %v", err)
	}
	defer c.Stop()
	if fi, err := os.Lstat(filepath.Join(dataDir, "pg", "data")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the data folder's link was replaced: %v, %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "PG_VERSION")); err != nil {
		t.Fatalf("the cluster is not where the link leads: %v", err)
	}
}
