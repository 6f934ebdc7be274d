package toolname_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/internal/toolname"
)

func TestSplitJoin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, server, tool string
		ok                 bool
	}{
		{"fs__read_file", "fs", "read_file", true},
		{"fs__my__tool", "fs", "my__tool", true},
		{"read_file", "", "read_file", false},
		{"__x", "", "x", true},
		{"fs__", "fs", "", true},
	} {
		server, tool, ok := toolname.Split(c.name)
		if ok != c.ok || (ok && (server != c.server || tool != c.tool)) {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", c.name, server, tool, ok, c.server, c.tool, c.ok)
		}
		if ok && toolname.Join(server, tool) != c.name {
			t.Errorf("Join(Split(%q)) = %q", c.name, toolname.Join(server, tool))
		}
		if toolname.Bare(c.name) != c.tool || toolname.Qualified(c.name) != c.ok {
			t.Errorf("Bare/Qualified(%q) = %q, %v", c.name, toolname.Bare(c.name), toolname.Qualified(c.name))
		}
	}
}

func TestCutOperation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, tool, op string
		ok             bool
	}{
		{"file_operations.read_file", "file_operations", "read_file", true},
		{"fs__file_operations.read_file", "fs__file_operations", "read_file", true},
		{"fs__ops.a.b", "fs__ops", "a.b", true},
		{"fs.x__ops", "", "", false}, // the dot is in the server part: not the dotted form
		{"fs__ops", "", "", false},
		{"fs__.op", "", "", false},
		{"fs__ops.", "", "", false},
		{".op", "", "", false},
	} {
		tool, op, ok := toolname.CutOperation(c.name)
		if tool != c.tool || op != c.op || ok != c.ok {
			t.Errorf("CutOperation(%q) = %q, %q, %v; want %q, %q, %v", c.name, tool, op, ok, c.tool, c.op, c.ok)
		}
	}
}

func TestReserved(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"toolwarden", "builtin"} {
		if !toolname.Reserved(n) {
			t.Errorf("%q is not reserved", n)
		}
	}
	for _, n := range []string{"", "toolwarden-x", "Toolwarden", "github", "built-in"} {
		if toolname.Reserved(n) {
			t.Errorf("%q is reserved", n)
		}
	}
	names := toolname.ReservedNames()
	names[0] = "x"
	if !toolname.Reserved("toolwarden") {
		t.Error("ReservedNames handed out the list itself")
	}
}
