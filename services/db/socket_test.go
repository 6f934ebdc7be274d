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

// TestCredentialFiles: the files a client could connect with, for confined servers not
// to read: the passfile, client certificate and key as the URL (either form), the
// environment or the service it names give them, and the defaults in the home
// directory where they exist. None is read but the service file, so missing ones are
// no error.
func TestCredentialFiles(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	for _, k := range []string{"PGPASSFILE", "PGSSLCERT", "PGSSLKEY", "PGSERVICE", "PGSERVICEFILE"} {
		t.Setenv(k, "")
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(in("services.conf"), []byte("# services\n[tw]\nhost=db.example\nsslkey="+in("svc.key")+"\nsslcert = "+in("svc.crt")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(url string, want ...string) {
		t.Helper()
		got, err := db.CredentialFiles(url)
		slices.Sort(want)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: got %v (%v), want %v", url, got, err, want)
		}
	}
	check("postgres://tw:pw@db.example:5432/tw")
	check("postgres://tw@db.example/tw?sslmode=verify-full&sslcert="+in("a%20b.crt")+"&sslkey="+in("c.key")+"&passfile="+in("pass"),
		in("a b.crt"), in("c.key"), in("pass"))
	check("host=db.example user=tw sslcert = '"+in("a b.crt")+"' sslkey="+in("c\\ d.key")+" passfile="+in("pass"),
		in("a b.crt"), in("c d.key"), in("pass"))
	// A service's file, and what the service names in it.
	check("service=tw servicefile="+in("services.conf")+" user=tw", in("services.conf"), in("svc.key"), in("svc.crt"))
	check("postgres://tw@/tw?service=missing&servicefile="+in("absent.conf"), in("absent.conf"))
	// The environment, as pgconn reads it.
	t.Setenv("PGPASSFILE", in("env.pgpass"))
	t.Setenv("PGSSLKEY", in("env.key"))
	t.Setenv("PGSERVICE", "tw")
	t.Setenv("PGSERVICEFILE", in("services.conf"))
	check("host=db.example user=tw", in("env.pgpass"), in("env.key"), in("services.conf"), in("svc.key"), in("svc.crt"))
	for _, k := range []string{"PGPASSFILE", "PGSSLKEY", "PGSERVICE", "PGSERVICEFILE"} {
		t.Setenv(k, "")
	}
	// The defaults under the home directory, once they exist.
	check("host=db.example user=tw")
	if err := os.Mkdir(filepath.Join(home, ".postgresql"), 0o700); err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, f := range []string{".pgpass", ".postgresql/postgresql.crt", ".postgresql/postgresql.key"} {
		defaults = append(defaults, filepath.Join(home, f))
		if err := os.WriteFile(defaults[len(defaults)-1], nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check("host=db.example user=tw", defaults...)
	for _, bad := range []string{"postgres://tw@db/tw?sslkey=%zz", "host=db.example user", "sslkey='unterminated"} {
		if _, err := db.CredentialFiles(bad); err == nil {
			t.Errorf("%s: got no error", bad)
		}
	}
}
