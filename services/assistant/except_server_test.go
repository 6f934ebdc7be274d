package assistant

import (
	"slices"
	"testing"
)

// An exception naming a server as its names are read ("ev_2" for the server ev-2) leaves
// out that server's tools: the lookup after the match read the name another way, found no
// server and left out an empty id instead.
func TestExceptNamesAServerAsItsNameIsRead(t *testing.T) {
	t.Parallel()
	cat := &Catalogue{
		Servers: []Server{{ID: "s-1", Name: "ev-1", Enabled: true}, {ID: "s-2", Name: "ev-2", Enabled: true}},
		Tools: []Tool{{ID: "t-1", Name: "echo", ServerID: "s-1", Server: "ev-1"},
			{ID: "t-2", Name: "add", ServerID: "s-2", Server: "ev-2"}},
	}
	got := exceptOf("ev_2", cat)
	if !slices.Contains(got, "t-2") || slices.Contains(got, "") || slices.Contains(got, "t-1") {
		t.Fatalf("except ev_2: %q, want ev-2's tool t-2 and nothing else of note", got)
	}
}
