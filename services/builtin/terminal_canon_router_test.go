package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// With terminal_operations at LOW, keys that a shell without readline (after
// "set +o emacs") edits into rm -rf need an approval, as does binding a key to a hidden
// command (bind, or a write to ~/.inputrc): rated as readline rebuilds them they were
// LOW, and typed, they deleted the directory.
func TestTypedKeysWithoutReadlineNeedApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := lowTerminals(t)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	const conv = "conv-canon"
	call := func(args map[string]string) (*router.Result, error) {
		raw, _ := json.Marshal(args)
		return srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: raw, Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceAPI, ConversationID: conv})
	}
	res, err := call(map[string]string{"operation": "create_session"})
	if err != nil || res.IsError {
		t.Fatalf("create_session: %v %+v", err, res)
	}
	var cs struct{ SessionID string }
	if err := json.Unmarshal(res.StructuredContent, &cs); err != nil {
		t.Fatal(err)
	}
	ws, err := srv.App.Builtin.Workspace(conv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	send := func(input string) (*router.Result, error) {
		return call(map[string]string{"operation": "send_input", "sessionId": cs.SessionID, "input": input})
	}
	if res, err := send("set +o emacs\n"); err != nil || res.IsError {
		t.Fatalf("set +o emacs: %v %+v", err, res)
	}
	for _, in := range []string{
		"rm \x01\x7f-rf d\n",
		`bind '"\C-e":"\162\155 -\162f d\n"'` + "\n",
		"printf '\"\\\\C-e\":\"rm -rf d\\\\n\"' > ~/.inputrc\n",
	} {
		_, err := send(in)
		var re *router.Error
		if !errors.As(err, &re) || re.Code != router.CodeApprovalRequired {
			t.Errorf("%q at LOW: %v, want an approval required", in, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "d", "e")); err != nil {
		t.Fatalf("the directory is gone: %v", err)
	}
}
