package grants

import (
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/builtin"
)

// fileOperations names file_operations' operations, as the tool does: an operation
// missing here would have its bare-named grant's target stored as written, never
// matching the path guard's.
func TestFileOperationsInStep(t *testing.T) {
	t.Parallel()
	srv, err := builtin.New(&builtin.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var names []string
	for _, op := range srv.FileOperations().Operations {
		names = append(names, op.Name)
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(fileOperations))
	if !slices.Equal(names, want) {
		t.Fatalf("file_operations' operations are %v; grants.fileOperations says %v", names, want)
	}
}
