package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/verr"
)

// The check before approval refuses what the call would refuse when it runs, and only
// that: a rename inside another workspace goes on one grant with no target, as the
// write does, and on one for its source alone asks for its newPath too; a rename
// across workspaces, the root named as a file or a search, and a workspace that does
// not exist are refused; a listing of the root and a search of "." pass.
func TestPreflightAgreesWithTheCall(t *testing.T) {
	t.Parallel()
	f := newFilesFx(t)
	ctx := context.Background()
	for _, conv := range []string{"pf-own", "pf-other", "pf-third"} {
		if _, err := f.b.Workspace(conv); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(f.root, "pf-other")
	f.grants.allow["pf-own file_operations.rename_file "+filepath.Join(other, "a.txt")] = true
	f.grants.allow["pf-own file_operations.rename_file "+filepath.Join(other, "b.txt")] = true
	m := callmeta.Meta{ConversationID: "pf-own", UserID: "u1", UserName: "una"}
	check := func(args string) error {
		t.Helper()
		return f.b.Preflight(ctx, "file_operations", m, json.RawMessage(args))
	}
	refused := func(args, field, want string) {
		t.Helper()
		var ve *verr.Error
		if err := check(args); !errors.As(err, &ve) || !strings.Contains(ve.For(field), want) {
			t.Fatalf("%s: got %v, want %s refused with %q", args, err, field, want)
		}
	}
	for _, ok := range []string{
		`{"operation":"rename_file","filePath":"` + other + `/a.txt","newPath":"` + other + `/b.txt"}`,
		`{"operation":"list_dir","path":"` + f.root + `"}`,
		`{"operation":"grep_search","pattern":"x","path":"."}`,
		`{"operation":"read_file","filePath":"` + other + `/a.txt"}`,
		`{"operation":"create_file","filePath":"notes/a.txt","content":"x"}`,
	} {
		if err := check(ok); err != nil {
			t.Errorf("%s: refused: %v", ok, err)
		}
	}
	// A grant for the source alone: newPath needs its own (the call refuses it too).
	refused(`{"operation":"rename_file","filePath":"`+other+`/a.txt","newPath":"`+other+`/c.txt"}`, "/newPath", "authorization required")
	// Across workspaces: refused as such, with or without a grant, and by the call alike.
	across := `{"operation":"rename_file","filePath":"a.txt","newPath":"` + filepath.Join(f.root, "pf-third", "a.txt") + `"}`
	refused(across, "/newPath", "moves files within one workspace")
	f.grants.allow["pf-own file_operations.rename_file "+filepath.Join(f.root, "pf-third", "a.txt")] = true
	refused(across, "/newPath", "moves files within one workspace")
	var acrossArgs map[string]any
	_ = json.Unmarshal([]byte(across), &acrossArgs)
	f.ok("pf-own", args{"operation": "create_file", "filePath": "a.txt", "content": "x"})
	f.fails("pf-own", acrossArgs, "moves files within one workspace")
	refused(`{"operation":"file_search","pattern":"*","path":"`+f.root+`"}`, "/path", "is the built-in root")
	refused(`{"operation":"create_file","filePath":"`+filepath.Join(f.root, "pf-nowhere", "a.txt")+`","content":"x"}`,
		"/filePath", "is not a workspace")
	refused(`{"operation":"delete_file","filePath":"/etc/passwd"}`, "/filePath", "is outside the built-in root")
	if len(f.grants.asked) != 0 {
		t.Fatalf("the check or the rename across workspaces used grants: %v", f.grants.asked)
	}
}
