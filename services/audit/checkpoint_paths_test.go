package audit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A check from the page or the API that cannot read the server's key files names them
// by their file alone, as it does the checkpoint: the reason reaches auditors, who need
// not learn the server's directories.
func TestCheckpointKeyErrorsHideTheServersPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	dir := filepath.Join(t.TempDir(), "secret-data-dir")
	keyPath := filepath.Join(dir, "checkpoint.key")
	s, err := OpenSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	cps := filepath.Join(dir, "checkpoints")
	chainOf(t, pool, 3)
	if _, err := NewCheckpointer(pool, s, cps).Write(ctx); err != nil {
		t.Fatal(err)
	}
	l := NewLog(pool)
	t.Cleanup(l.Close)
	l.UseCheckpoints(CheckpointSource{Dir: cps, KeyFile: keyPath})

	check := func(what, file string) {
		t.Helper()
		l.StartVerify("carol")
		l.WaitVerify()
		v, err := l.VerifyStatus(ctx)
		if err != nil || v == nil || v.OK {
			t.Fatalf("%s: %+v, %v; want a check that could not be made", what, v, err)
		}
		said := []string{v.Reason}
		if v.Err != "" { // the record keeps the reason only
			said = append(said, v.Err)
		}
		for _, said := range said {
			if !strings.Contains(said, file) || strings.Contains(said, dir) {
				t.Errorf("%s: said %q; want %s named without its directory", what, said, file)
			}
		}
	}
	if err := os.WriteFile(PublicKeyPath(keyPath), []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("a corrupt .pub", "checkpoint.pub")
	if err := os.Remove(PublicKeyPath(keyPath)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("a corrupt key, its .pub gone", "checkpoint.key")
}
