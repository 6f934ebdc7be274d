package confine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// TestHiddenLinkLeadsOut: a hidden path that is a symbolic link inside a hidden
// directory is hidden where it leads too: hiding the directory hides only the link.
func TestHiddenLinkLeadsOut(t *testing.T) {
	t.Parallel()
	dir, key, other, secret := secretDir(t)
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, key); err != nil {
		t.Fatal(err)
	}
	c := confine.New(confine.Spec{Hide: []string{dir, key}})
	confine.SetRuntimeDirs(c)
	if d := c.Describe(); strings.HasPrefix(d, "none") {
		t.Skip("confinement is not available here: " + d)
	}
	if got := run(t, c, "", nil, "cat", other); strings.Contains(got.Out, secret) {
		t.Fatalf("the file a hidden link leads to is readable: exit %d, output:\n%s", got.Code, got.Out)
	}
	// A link to a hidden directory is the same directory: hidden once.
	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	c = confine.New(confine.Spec{Hide: []string{link, dir}})
	confine.SetRuntimeDirs(c)
	if d := c.Describe(); strings.Count(d, dir) != 1 || strings.Contains(d, link) {
		t.Errorf("describe: got %q, want %s hidden once", d, dir)
	}
}
