package db

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clusterAt is a Cluster over a data folder whose PG_VERSION says major (not started).
func clusterAt(t *testing.T, major string) *Cluster {
	t.Helper()
	c := &Cluster{Dir: filepath.Join(t.TempDir(), "pg"), log: slog.New(slog.DiscardHandler)}
	if err := os.MkdirAll(c.DataDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.DataDir(), "PG_VERSION"), []byte(major+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// An existing cluster is started by the PostgreSQL of the major version that made it,
// not the newest installed (which refuses its files after an upgrade of the packages).
func TestClusterBinDirFollowsPGVersion(t *testing.T) {
	t.Parallel()
	newest, err := FindBinDir()
	if err != nil {
		t.Skip(err)
	}
	major, err := binMajor(newest)
	if err != nil {
		t.Fatal(err)
	}
	c := clusterAt(t, major)
	got, err := clusterBinDir(c.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := binMajor(got); err != nil || m != major {
		t.Fatalf("bin dir for a cluster of PostgreSQL %s: %s, PostgreSQL %s (%v)", major, got, m, err)
	}
	// No cluster yet: the newest.
	if got, err := clusterBinDir(filepath.Join(t.TempDir(), "none")); err != nil || got != newest {
		t.Fatalf("bin dir without a cluster: %q %v, want %q", got, err, newest)
	}
}

// A cluster made by a PostgreSQL no longer installed: StartCluster and the supervisor's
// restart say which version is missing and how to go on, instead of postgres's
// "database files are incompatible with server".
func TestClusterOfMissingPGVersion(t *testing.T) {
	t.Parallel()
	if _, err := FindBinDir(); err != nil {
		t.Skip(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, want := range []string{"PostgreSQL 9999", "postgresql-9999", "pg_upgrade"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v; want it to say %q", what, err, want)
			}
		}
	}
	c := clusterAt(t, "9999")
	check("restart", c.restart(context.Background()))
	_, err := StartCluster(context.Background(), filepath.Dir(c.Dir), &ClusterOptions{Fast: true, Logger: c.log})
	check("StartCluster", err)
}
