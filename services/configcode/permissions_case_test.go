package configcode_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A username written in another case in a file is that user, as at sign-in: the rules
// already stored for bob and carol are no change (they showed as one on every import),
// and two spellings of one name in a file are refused at the place.
func TestPermissionUsernamesAnyCase(t *testing.T) {
	t.Parallel()
	hs := liveServer(t)
	a := source(t, hs) // on ev__echo: bob false, carol true
	p := plan(t, a, "config.yaml", "version: 1\nservers: []\ntools:\n  - tool: ev__echo\n    permissions: {Bob: false, CAROL: true}\n")
	if d := p.String(); strings.Contains(d, "permissions") || len(p.Unapplied) > 0 {
		t.Fatalf("the stored rules written in capitals planned a change:\n%s\n%v", d, p.Unapplied)
	}
	_, err := configcode.Parse("config.yaml", []byte("version: 1\nservers: []\ntools:\n  - tool: ev__echo\n    permissions: {Bob: false, bob: true}\n"),
		registry.ParseOptions{})
	if err == nil || !strings.Contains(fmt.Sprint(err), `"Bob" and "bob" are the same user`) {
		t.Fatalf("two spellings of one user: %v", err)
	}
}
