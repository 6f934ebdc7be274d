package gateway

import (
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/router"
)

// The merged lists page through the servers in the bytes' order of their names, the
// order the cursor compares in, whatever order the database gave them: under a libc
// locale (en_US.utf8 ignores hyphens) "ab" comes before "a-z", and a page ending inside
// "ab" dropped "a-z", one ending inside "a-z" gave "ab" and "ac" again.
func TestPagesWalkServersInByteOrder(t *testing.T) {
	t.Parallel()
	locale := func() []router.ServerAccess { // as ORDER BY s.name gives them under en_US.utf8
		return []router.ServerAccess{{Name: "ab"}, {Name: "ac"}, {Name: "a-z"}, {Name: "b"}, {Name: "b-1"}, {Name: "b0"}}
	}
	var order []string
	for _, s := range serversFrom(locale(), nil) {
		order = append(order, s.Name)
	}
	if want := []string{"a-z", "ab", "ac", "b", "b-1", "b0"}; !slices.Equal(order, want) {
		t.Fatalf("the first page walks %v, want %v", order, want)
	}
	// A page that ended inside a server goes on with that server and every one after
	// it, none before: each server's items come once over the pages.
	for i, name := range order {
		var rest []string
		for _, s := range serversFrom(locale(), &position{Server: name}) {
			rest = append(rest, s.Name)
		}
		if !slices.Equal(rest, order[i:]) {
			t.Errorf("a page ending inside %s goes on with %v, want %v", name, rest, order[i:])
		}
	}
}
