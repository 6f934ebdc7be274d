package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// A grant asked for with a target the agent wrote in another form than the guard's
// (an uncleaned absolute path) still allows the retry: the question stores and shows
// the absolute, clean path the guard matches. Before, the approved retry was refused
// again and the agent asked again. A relative target is resolved in the asking
// conversation's workspace, as the guard reads a relative path, and the
// authorization-required message names the form.
func TestGrantTargetInTheGuardsForm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	session := webtest.API{T: t, Srv: srv, C: srv.Login(t, "alice", "alice-password-1")}
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.Enable(t, "builtin__user_collaboration")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	actor := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}

	other, err := srv.App.Builtin.Workspace("conv-b")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(other, "notes.md")
	write := func() *router.Result {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"filePath": target, "content": "granted", "overwrite": true})
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__file_operations.create_file", Arguments: args,
			Actor: actor, Role: auth.RoleToolUser, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true},
			ConversationID: "conv-a"})
		if err != nil {
			t.Fatalf("create_file: %v", err)
		}
		return res
	}
	ask := func(ctx context.Context, target string) *router.Result {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"prompt": "May I write notes.md?",
			"authorize_operation": "file_operations.create_file", "target": target, "one_time_use": true})
		res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__user_collaboration", Arguments: args, Actor: actor,
			Role: auth.RoleToolUser, Source: router.SourceAPI, ConversationID: "conv-a"})
		if err != nil {
			t.Error(err)
		}
		return res
	}

	refused := write()
	if text := router.TextOf(refused.Content); !refused.IsError || !strings.Contains(text, `"target": `+strconv.Quote(target)) ||
		!strings.Contains(text, "absolute path") {
		t.Fatalf("the refusal does not name the target's form: %s", text)
	}

	// Relative to conv-a's workspace, and absolute but not clean: each asks for target.
	for _, asked := range []string{filepath.Join("..", filepath.Base(other), "notes.md"), other + "/./notes.md/"} {
		answer := make(chan *router.Result, 1)
		go func() { answer <- ask(ctx, asked) }()
		q := waitPending(t, session)
		var shown struct {
			Items []struct {
				Target string `json:"target"`
			}
		}
		session.JSON(http.MethodGet, "/api/v1/collaborations?status=pending", nil, http.StatusOK, &shown)
		if len(shown.Items) != 1 || shown.Items[0].Target != target {
			t.Errorf("asked for %q, the person is shown %+v, want target %q", asked, shown.Items, target)
		}
		session.JSON(http.MethodPost, "/api/v1/collaborations/"+q.ID+"/respond", map[string]string{"response": "yes"}, http.StatusOK, nil)
		select {
		case res := <-answer:
			if res == nil || res.IsError {
				t.Fatalf("user_collaboration: %+v", res)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("user_collaboration still waits after the answer")
		}
		_ = os.Remove(target)
		if res := write(); res.IsError {
			t.Fatalf("asked for %q, the approved retry: %s", asked, router.TextOf(res.Content))
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "granted" {
			t.Fatalf("the file: %q %v", b, err)
		}
	}
}
