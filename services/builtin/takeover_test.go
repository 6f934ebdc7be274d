package builtin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A conversation id that names another conversation's hashed workspace as it is
// (c-<hex>) gets a workspace of its own: the earlier-layout move must not rename the
// other person's live workspace into it (it took it over, files and ownership).
func TestHashedWorkspaceNotTakenOver(t *testing.T) {
	t.Parallel()
	srv, alice, bob, call := ownersFx(t)
	if out, ok := call(alice, "Alice-Conv", "create_file", map[string]any{"filePath": "secret.txt", "content": "alice's secret"}); !ok {
		t.Fatalf("alice writes in her conversation: %s", out)
	}
	victim, err := srv.App.Builtin.Workspace("Alice-Conv")
	if err != nil {
		t.Fatal(err)
	}
	dirName := filepath.Base(victim)
	if !strings.HasPrefix(dirName, "c-") {
		t.Fatalf("alice's workspace %q is not a hashed one", dirName)
	}
	out, ok := call(bob, dirName, "read_file", map[string]any{"filePath": "secret.txt"})
	if ok || strings.Contains(out, "alice's secret") {
		t.Errorf("bob in conversation %s read alice's file: %v %q", dirName, ok, out)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "secret.txt")); err != nil || string(b) != "alice's secret" {
		t.Errorf("alice's workspace after bob's call: %q, %v", b, err)
	}
	if out, ok := call(alice, "Alice-Conv", "read_file", map[string]any{"filePath": "secret.txt"}); !ok || !strings.Contains(out, "alice's secret") {
		t.Errorf("alice reads her file after bob's call: %v %q", ok, out)
	}
}
