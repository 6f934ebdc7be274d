package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Nobody is asked to approve a built-in call that cannot run whatever they decide: a
// write outside the root, to another workspace with no grant yet, or in another
// person's conversation is refused before it is held, and no execution waits. With the
// grant the call is held, the grant is not used by the check, and the approved call
// uses it. A plan submitted with such a step is refused at the step's argument.
func TestNoApprovalAskedForACallThatCannotRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations") // high risk, as discovered: every write is held
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	otto := srv.CreateUser(t, "otto", auth.RoleToolUser, password)
	var adminID string
	if err := srv.Pool.QueryRow(ctx, `SELECT id FROM users WHERE username = 'admin'`).Scan(&adminID); err != nil {
		t.Fatal(err)
	}
	admin := executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: adminID, Name: "admin"}, Role: auth.RoleAdmin}
	// tina's other conversation, and otto's.
	for conv, u := range map[string]auth.User{"pf-tina-other": tina, "pf-otto": otto} {
		if _, err := srv.App.Builtin.Workspace(conv); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.App.Grants.Claim(ctx, conv, conv, u.ID, u.Username); err != nil {
			t.Fatal(err)
		}
	}
	root := srv.App.Builtin.Root()
	other := filepath.Join(root, "pf-tina-other", "notes.txt")
	noneHeld := func(label string) {
		t.Helper()
		page, err := srv.Executions.List(ctx, executions.Query{RequestedBy: tina.ID, Status: []executions.Status{executions.AwaitingApproval}})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 0 {
			t.Fatalf("%s: %d executions wait for approval, want none", label, len(page.Items))
		}
	}
	token := srv.Token(t, "tina")
	for _, era := range eras {
		cs := mustConnect(t, srv, token, era)
		conv := "pf-tina-" + era
		create := func(conv, path string) <-chan callOutcome {
			return callIn(ctx, cs, "builtin__file_operations.create_file", map[string]any{"filePath": path, "content": "x"}, "", conv)
		}
		res := wait(t, create(conv, "/etc/toolwarden-preflight"))
		if !res.IsError || !strings.HasPrefix(text(res), "Not run; the call may not reach what its arguments name:") ||
			!strings.Contains(text(res), "filePath: /etc/toolwarden-preflight is outside the built-in root") {
			t.Fatalf("%s: a write outside the root: %+v %q", era, res, text(res))
		}
		if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"errorType":"PathNotAllowed"}` {
			t.Fatalf("%s: a path no grant could allow has structured content %s, want the path guard's errorType", era, sc)
		}
		res = wait(t, create(conv, other))
		if !res.IsError || !strings.Contains(text(res), "authorization required: "+other) ||
			!strings.Contains(text(res), "user_collaboration") {
			t.Fatalf("%s: a write to another workspace with no grant: %+v %q", era, res, text(res))
		}
		// Its structured content is the tool's own refusal's: what to ask for, and for which path.
		if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"requiresAuthorization":true`) ||
			!strings.Contains(string(sc), `"errorType":"AuthorizationRequired"`) ||
			!strings.Contains(string(sc), `"authorizationKey":"file_operations.create_file"`) || !strings.Contains(string(sc), `"attemptedPath":`+jsonText(other)) {
			t.Fatalf("%s: the refusal's structured content: %s", era, sc)
		}
		// Another person's conversation is the call's to change: a result the model reads,
		// as the tool's own refusal of a low call there is.
		res = wait(t, create("pf-otto", "notes.txt"))
		if !res.IsError || !strings.Contains(text(res), `_meta.conversation_id: the conversation "pf-otto" belongs to another person`) {
			t.Fatalf("%s: a call in another person's conversation: %+v %q", era, res, text(res))
		}
		if res := wait(t, callIn(ctx, cs, "builtin__file_operations.read_file", map[string]any{"filePath": "notes.txt"}, "", "pf-otto")); !res.IsError ||
			!strings.Contains(text(res), `the conversation "pf-otto" belongs to another person`) {
			t.Fatalf("%s: a low call in another person's conversation: %+v %q", era, res, text(res))
		}
		noneHeld(era)
		// A read runs at once: its own level is low, though the tool's is high.
		ws, err := srv.App.Builtin.Workspace(conv)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "seen.txt"), []byte("read me\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := wait(t, callIn(ctx, cs, "builtin__file_operations.read_file", map[string]any{"filePath": "seen.txt"}, "", conv)); res.IsError || text(res) != "read me\n" {
			t.Fatalf("%s: read_file: %+v %q", era, res, text(res))
		}

		// With a grant, the call is held; the check did not use the grant, the run does.
		g, err := srv.App.Grants.Create(ctx, grants.Spec{ConversationID: conv, Operation: "file_operations.create_file",
			Target: other, OneTime: true, By: admin.Actor})
		if err != nil {
			t.Fatal(err)
		}
		out := create(conv, other)
		ex := pendingFor(t, srv, tina.ID, "builtin__file_operations")
		if cur, err := srv.App.Grants.Get(ctx, g.ID); err != nil || cur.Uses != 0 || cur.ConsumedAt != nil {
			t.Fatalf("%s: the grant before the approval: %+v %v", era, cur, err)
		}
		if _, err := srv.Executions.Confirm(ctx, admin, ex.ID, ex.ConfirmationPhrase, ""); err != nil {
			t.Fatal(err)
		}
		if res := wait(t, out); res.IsError {
			t.Fatalf("%s: the approved write: %q", era, text(res))
		}
		if b, err := os.ReadFile(other); err != nil || string(b) != "x" {
			t.Fatalf("%s: the file: %q %v", era, b, err)
		}
		if cur, err := srv.App.Grants.Get(ctx, g.ID); err != nil || cur.ConsumedAt == nil {
			t.Fatalf("%s: the one-time grant after the write: %+v %v", era, cur, err)
		}
		if err := os.Remove(other); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND result = 'denied'
		AND actor_id = $1 AND payload->>'code' = 'forbidden'`, tina.ID); n != len(eras) {
		t.Fatalf("audited refusals of another person's conversation: %d, want %d", n, len(eras))
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND result = 'denied'
		AND actor_id = $1 AND payload->>'code' = 'invalid_arguments'`, tina.ID); n != 2*len(eras) {
		t.Fatalf("audited refusals of paths: %d, want %d", n, 2*len(eras))
	}

	// A plan with such a step is refused where it is submitted, at the step's argument.
	steps, _ := json.Marshal(map[string]any{"filePath": other, "content": "x"})
	_, err := srv.Executions.Create(ctx, executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: tina.ID, Name: "tina"}, Role: auth.RoleToolUser},
		executions.Input{ConversationID: "pf-plan", Plan: &executions.Request{Steps: []executions.RequestStep{
			{Tool: "builtin__file_operations.create_file", Arguments: steps}}}})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.For("/steps/0/arguments/filePath"), "authorization required") {
		t.Fatalf("a plan writing outside its workspace: %v", err)
	}
	noneHeld("plan")
}

// pendingFor waits for userID's execution of tool (a step's tool, dotted operations
// aside) awaiting approval.
func pendingFor(t *testing.T, srv *webtest.Server, userID, tool string) *executions.Execution {
	t.Helper()
	var found *executions.Execution
	webtest.WaitFor(t, 10*time.Second, func() bool {
		page, err := srv.Executions.List(context.Background(), executions.Query{RequestedBy: userID,
			Status: []executions.Status{executions.AwaitingApproval}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range page.Items {
			if strings.HasPrefix(ex.Plan.Steps[0].Tool, tool) {
				found = &ex
				return true
			}
		}
		return false
	}, "no execution of "+tool+" awaits approval")
	return found
}

func jsonText(s string) string { b, _ := json.Marshal(s); return string(b) }
