package db_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/db"
)

// TestSocketPaths: what confined servers must not reach for a database URL: the socket
// directory, the socket alone in a directory everyone shares, nothing over TCP.
func TestSocketPaths(t *testing.T) {
	t.Parallel()
	private := t.TempDir()
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"postgres://tw:pw@db.example:5432/tw", nil},
		{"host=127.0.0.1 port=5433 user=tw dbname=tw", nil},
		{"host=" + private + " user=tw dbname=tw", []string{private}},
		{"postgres:///tw?host=" + private + "&port=5433", []string{private}},
		{"host=" + shared + " port=5433 user=tw dbname=tw", []string{filepath.Join(shared, ".s.PGSQL.5433")}},
		{"host=" + private + "," + shared + ",db.example user=tw dbname=tw", []string{private, filepath.Join(shared, ".s.PGSQL.5432")}},
	} {
		got, err := db.SocketPaths(tc.url)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v (%v), want %v", tc.url, got, err, tc.want)
		}
	}
	if _, err := db.SocketPaths("postgres://%zz"); err == nil {
		t.Error("a malformed URL: got no error")
	}
}
