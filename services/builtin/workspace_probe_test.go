package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A workspace the caller can neither use nor open with a grant gets one answer, the
// same text and errorType whether another person owns its conversation, a removed
// person did, or there is no such workspace: else any person could probe which
// conversation ids others use (names like acme-layoffs). It holds with and without a
// grant, for the call and for the check before approval. An unclaimed workspace that
// exists still asks for a grant and opens on one, and a person's own workspace works.
func TestUnreachableWorkspacesAnswerAlike(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, alice, bob, call := ownersFx(t)
	carol := srv.CreateUser(t, "carol", auth.RoleToolUser, "carol-password-1")
	for _, c := range []struct {
		u    auth.User
		conv string
	}{{alice, "alice-secret"}, {carol, "carol-secret"}, {bob, "bob-1"}} {
		if out, ok := call(c.u, c.conv, "create_file", map[string]any{"filePath": "x.txt", "content": "x"}); !ok {
			t.Fatalf("%s writes in %s: %s", c.u.Username, c.conv, out)
		}
	}
	if _, err := srv.Pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, carol.ID); err != nil {
		t.Fatal(err)
	}
	root := srv.App.Builtin.Root()
	spare, err := srv.App.Builtin.Workspace("spare") // no conversation claimed it
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spare, "x.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	areas := []string{"alice-secret", "carol-secret", "no-such-conversation"}

	type answer struct {
		text, errorType string
	}
	// run is bob's call of op with a path in area, its answer with the area's name
	// replaced, so that answers about different areas compare.
	run := func(op, area string) answer {
		t.Helper()
		p := filepath.Join(root, area, "x.txt")
		a := map[string]any{"operation": op, "filePath": p}
		switch op {
		case "list_dir":
			a = map[string]any{"operation": op, "path": filepath.Dir(p)}
		case "create_file":
			a["content"], a["overwrite"] = "bob was here", true
		case "replace_string":
			a["oldString"], a["newString"] = "x", "y"
		case "copy_file":
			a["filePath"], a["newPath"] = "x.txt", p
		}
		b, _ := json.Marshal(a)
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__file_operations", Arguments: b, Actor: actorOf(bob),
			Role: auth.RoleToolUser, Source: router.SourceTestPanel, Approval: ownApproval, ConversationID: "bob-1"})
		if err != nil {
			t.Fatalf("bob's %s in %s: %v", op, area, err)
		}
		if !res.IsError {
			t.Fatalf("bob's %s in %s ran: %s", op, area, router.TextOf(res.Content))
		}
		var sc struct {
			ErrorType string `json:"errorType"`
		}
		_ = json.Unmarshal(res.StructuredContent, &sc)
		return answer{strings.ReplaceAll(router.TextOf(res.Content), area, "AREA"), sc.ErrorType}
	}
	// preflight is the check before approval of the same call, as run.
	preflight := func(op, area string) string {
		t.Helper()
		p := filepath.Join(root, area, "x.txt")
		a, field := map[string]any{"operation": op, "filePath": p}, "/filePath"
		if op == "copy_file" {
			a["filePath"], a["newPath"], field = "x.txt", p, "/newPath"
		} else if op == "list_dir" {
			a, field = map[string]any{"operation": op, "path": filepath.Dir(p)}, "/path"
		}
		b, _ := json.Marshal(a)
		var ve *verr.Error
		err := srv.App.Builtin.Preflight(ctx, "file_operations", callmeta.Meta{ConversationID: "bob-1", UserID: bob.ID, UserName: "bob"}, b)
		if !errors.As(err, &ve) || ve.For(field) == "" {
			t.Fatalf("the check before approval of bob's %s in %s: %v", op, area, err)
		}
		return strings.ReplaceAll(ve.For(field), area, "AREA")
	}
	ops := []string{"read_file", "get_file_info", "list_dir", "create_file", "replace_string", "copy_file"}
	alike := func(when string) {
		t.Helper()
		for _, op := range ops {
			want, wantPre := run(op, areas[0]), preflight(op, areas[0])
			if strings.Contains(want.text, "authoriz") || want.errorType == "" {
				t.Errorf("%s: bob's %s in another person's workspace: %+v", when, op, want)
			}
			for _, area := range areas[1:] {
				if got := run(op, area); got != want {
					t.Errorf("%s: bob's %s: in %s %+v, in %s %+v", when, op, areas[0], want, area, got)
				}
				if got := preflight(op, area); got != wantPre {
					t.Errorf("%s: the check before bob's %s: in %s %q, in %s %q", when, op, areas[0], wantPre, area, got)
				}
			}
		}
	}
	alike("without a grant")
	// The unclaimed workspace that exists asks for a grant, and opens on one.
	if out, ok := call(bob, "bob-1", "read_file", map[string]any{"filePath": filepath.Join(spare, "x.txt")}); ok || !strings.Contains(out, "authorization required") {
		t.Fatalf("bob reads an unclaimed workspace without a grant: %v %s", ok, out)
	}
	for _, op := range ops {
		if _, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "bob-1", Operation: "file_operations." + op, By: actorOf(bob)}); err != nil {
			t.Fatal(err)
		}
	}
	alike("with grants")
	if out, ok := call(bob, "bob-1", "read_file", map[string]any{"filePath": filepath.Join(spare, "x.txt")}); !ok || out != "x" {
		t.Fatalf("bob reads an unclaimed workspace on a grant: %v %q", ok, out)
	}
	if out, ok := call(bob, "bob-1", "read_file", map[string]any{"filePath": "x.txt"}); !ok || out != "x" {
		t.Fatalf("bob reads his own workspace: %v %q", ok, out)
	}
	if got := string(readBytes(t, filepath.Join(root, "alice-secret", "x.txt"))); got != "x" {
		t.Fatalf("alice's file: %q", got)
	}
}
