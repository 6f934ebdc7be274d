package builtin_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/grants"
)

// grants names file_operations' operations, as the tool does: an operation it does not
// know would have its bare-named grant's target stored as written, never matching the
// path guard's, and its relative target not resolved in the workspace.
func TestFileOperationsKnownToGrants(t *testing.T) {
	t.Parallel()
	srv, err := builtin.New(&builtin.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, op := range srv.FileOperations().Operations {
		for _, name := range []string{op.Name, "file_operations." + op.Name, "builtin__file_operations." + op.Name} {
			if !grants.FileOperation(name) {
				t.Errorf("grants does not take %s for a file operation", name)
			}
		}
	}
	for _, name := range []string{"run_command", "terminal_operations.run_command", "builtin__terminal_operations.run_command"} {
		if grants.FileOperation(name) {
			t.Errorf("grants takes %s for a file operation", name)
		}
	}
}
