package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// grantFixture is a server with file_operations (low risk) and user_collaboration
// enabled, alice signed in, and conversation conv-b's workspace: alice's calls are made
// in conv-a, so writing there needs her permission.
type grantFixture struct {
	t       *testing.T
	srv     *webtest.Server
	session webtest.API
	actor   audit.Actor
	other   string // conv-b's workspace
}

func newGrantFixture(t *testing.T) *grantFixture {
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.Enable(t, "builtin__user_collaboration")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	selfApproveHigh(t, srv) // write overwrites, so it is high: alice's phrase approves it
	other, err := srv.App.Builtin.Workspace("conv-b")
	if err != nil {
		t.Fatal(err)
	}
	return &grantFixture{t: t, srv: srv, session: webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")},
		actor: audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}, other: other}
}

// write has conv-a create path with content, overwriting it, approved beforehand.
func (f *grantFixture) write(path, content string) *router.Result {
	f.t.Helper()
	args, _ := json.Marshal(map[string]any{"filePath": path, "content": content, "overwrite": true})
	res, err := f.srv.Router.Call(context.Background(), router.Call{Tool: "builtin__file_operations.create_file", Arguments: args,
		Actor: f.actor, Role: auth.RoleToolUser, Source: router.SourceTestPanel, Approval: ownApproval,
		ConversationID: "conv-a"})
	if err != nil {
		f.t.Fatalf("create_file: %v", err)
	}
	return res
}

// ask has conv-a call user_collaboration with args, in the background; the result
// comes on the channel when the question ends.
func (f *grantFixture) ask(ctx context.Context, args map[string]any) <-chan *router.Result {
	out := make(chan *router.Result, 1)
	b, _ := json.Marshal(args)
	go func() {
		res, err := f.srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration", Arguments: b, Actor: f.actor,
			Role: auth.RoleToolUser, Source: router.SourceAPI, ConversationID: "conv-a"})
		if err != nil {
			f.t.Error(err)
		}
		out <- res
	}()
	return out
}

// answer answers the one pending question with response and returns its asker's result.
func (f *grantFixture) answer(asked <-chan *router.Result, response string) *router.Result {
	f.t.Helper()
	q := waitPending(f.t, f.session)
	f.session.JSON(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": response}, http.StatusOK, nil)
	select {
	case res := <-asked:
		if res == nil {
			f.t.Fatal("user_collaboration: no result")
		}
		return res
	case <-time.After(10 * time.Second):
		f.t.Fatal("user_collaboration still waits after the answer")
	}
	return nil
}

// The path guard and user_collaboration together, as seed 000 describes: a write into
// another conversation's workspace is refused with what to ask; the agent asks through
// user_collaboration with authorize_operation; the person approves in their session;
// the same write then succeeds, once (a one-time grant), and the next is refused again.
func TestWriteElsewhereWithPermission(t *testing.T) {
	t.Parallel()
	f := newGrantFixture(t)
	target := filepath.Join(f.other, "shared.txt")
	write := func(content string) *router.Result { return f.write(target, content) }
	refused := write("first")
	if !refused.IsError || !strings.Contains(router.TextOf(refused.Content), "authorize_operation") {
		t.Fatalf("a write into another workspace: %+v", refused)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the refused write left a file: %v", err)
	}

	asked := f.ask(context.Background(), map[string]any{"prompt": "May I write " + target + "?",
		"authorize_operation": "file_operations.create_file", "target": target, "one_time_use": true})
	if res := f.answer(asked, "yes, go ahead"); res.IsError {
		t.Fatalf("user_collaboration: %+v", res)
	}

	if res := write("granted"); res.IsError {
		t.Fatalf("the write with a grant: %s", router.TextOf(res.Content))
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "granted" {
		t.Fatalf("the file: %q %v", b, err)
	}
	if res := write("again"); !res.IsError {
		t.Fatal("a one-time grant allowed a second write")
	}
}

// A copy within a workspace no conversation claimed needs one grant, as a rename does,
// when that grant has no target: the grant that lets it read the source lets it write
// the copy beside it. Before, the read used a one-time grant up and the write was
// refused. A grant for the source alone does not let it write another file (it could
// overwrite any file of the workspace): the copy is refused, naming newPath, before the
// grant is used. The check before approval agrees, and says nothing of a copy it would
// let run.
func TestCopyInAnUnclaimedWorkspaceOnOneGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	actor := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}

	dir, err := srv.App.Builtin.Workspace("nobodys")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "report.txt")
	if err := os.WriteFile(src, []byte("figures"), 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]any{"operation": "copy_file", "filePath": src, "newPath": filepath.Join(dir, "report-copy.txt")})
	meta := callmeta.Meta{ConversationID: "conv-a", UserID: alice.ID}
	// copyOnce returns what the call said and whether it ran.
	copyOnce := func() (string, bool) {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__file_operations", Arguments: args, Actor: actor,
			Role: auth.RoleToolUser, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true}, ConversationID: "conv-a"})
		if err != nil {
			return err.Error(), false
		}
		return router.TextOf(res.Content), !res.IsError
	}
	// One grant to ask for, the source's: the copy beside it needs no other.
	if err := srv.App.Builtin.Preflight(ctx, "file_operations", meta, args); err == nil || !strings.Contains(err.Error(), "/filePath") ||
		strings.Contains(err.Error(), "/newPath") {
		t.Fatalf("the check before approval, with no grant: %v", err)
	}
	if out, ok := copyOnce(); ok || !strings.Contains(out, "authorize_operation") {
		t.Fatalf("a copy with no grant: %s", out)
	}
	if _, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-a", Operation: "file_operations.copy_file",
		Target: src, OneTime: true, By: actor}); err != nil {
		t.Fatal(err)
	}
	if err := srv.App.Builtin.Preflight(ctx, "file_operations", meta, args); err == nil || strings.Contains(err.Error(), "/filePath") ||
		!strings.Contains(err.Error(), "/newPath") {
		t.Fatalf("the check before approval, with a grant for the source alone: %v", err)
	}
	if out, ok := copyOnce(); ok || !strings.Contains(out, "report-copy.txt") || !strings.Contains(out, "authorize_operation") {
		t.Fatalf("a copy on a grant for its source alone: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "report-copy.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused copy: %v", err)
	}
	if _, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: "conv-a", Operation: "file_operations.copy_file",
		OneTime: true, By: actor}); err != nil {
		t.Fatal(err)
	}
	if err := srv.App.Builtin.Preflight(ctx, "file_operations", meta, args); err != nil {
		t.Fatalf("the check before approval, with the grant: %v", err)
	}
	if out, ok := copyOnce(); !ok {
		t.Fatalf("the copy on one grant: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "report-copy.txt")); err != nil || string(b) != "figures" {
		t.Fatalf("the copy: %q %v", b, err)
	}
	if err := srv.App.Builtin.Preflight(ctx, "file_operations", meta, args); err == nil {
		t.Fatal("the check before approval passes a copy whose one-time grant is used")
	}
}
