package builtin_test

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
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// file_operations through the router: the dotted name chooses the operation, the call
// works in its conversation's workspace, and the audit row and the call's events say
// what it does in a short line (display).
func TestFileOperationsThroughRouter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	res, err := srv.Router.Call(ctx, router.Call{Tool: "builtin__file_operations.create_file",
		Arguments: json.RawMessage(`{"filePath":"docs/notes.txt","content":"hello"}`),
		Actor:     admin, Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true}, ConversationID: "conv-1"})
	if err != nil || res.IsError {
		t.Fatalf("create_file: %v %+v", err, res)
	}
	if b, err := os.ReadFile(filepath.Join(srv.App.Builtin.Root(), "conv-1", "docs", "notes.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("the file: %q %v", b, err)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1
		AND payload->>'display' = 'Creating file notes.txt'`, res.CallID); n != 1 {
		t.Fatalf("audit rows with the display line: %d", n)
	}
	// The operation the name chose is in what is recorded, as the tool got it.
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1
		AND payload->'arguments'->>'operation' = 'create_file'`, res.CallID); n != 1 {
		t.Errorf("audit rows whose arguments name the operation: %d", n)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { // usage rows are written in the background
		return srv.App.Count(t, `SELECT count(*) FROM tool_usage_logs WHERE metadata->>'call_id' = $1 AND request->>'operation' = 'create_file'`,
			res.CallID) == 1
	}, "no usage row whose request names the operation")
	testkit.WaitFor(t, 10*time.Second, func() bool {
		return srv.App.Count(t, `SELECT count(*) FROM events WHERE topic = 'calls' AND payload->>'call_id' = $1
			AND payload->>'display' = 'Creating file notes.txt'`, res.CallID) > 0
	}, "no call event with the display line")
}

// file_operations as discovered (destructive, so high) reads without asking: a read's
// own level is low, in place of the one its annotations give the whole tool; writes
// keep the tool's level. An administrator's level for the tool is never replaced: set
// high, a read asks too; set low, a write still asks for a confirm, and a delete or an
// overwrite for the phrase.
func TestFileReadsAreLowUnlessAnAdministratorSaysOtherwise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	level := func(op, args string) (string, string) {
		t.Helper()
		var p *router.Prepared
		var err error
		// The risk setting reaches the router's snapshot through the bus.
		webtest.WaitFor(t, 10*time.Second, func() bool {
			p, err = srv.Router.Prepare(ctx, router.Call{Tool: "builtin__file_operations." + op, Arguments: json.RawMessage(args),
				Actor: admin, Role: auth.RoleAdmin, Source: router.SourceAPI, ConversationID: "conv-r"})
			return err == nil
		}, "prepare "+op)
		return string(p.Risk.Level), p.Risk.Source
	}
	check := func(when, op, args, wantLevel, wantSource string) {
		t.Helper()
		var l, src string
		webtest.WaitFor(t, 10*time.Second, func() bool {
			l, src = level(op, args)
			return l == wantLevel && src == wantSource
		}, when+": "+op)
	}
	check("as discovered", "read_file", `{"filePath":"a.txt"}`, "low", "operation")
	check("as discovered", "grep_search", `{"pattern":"x"}`, "low", "operation")
	check("as discovered", "create_file", `{"filePath":"a.txt","content":"x"}`, "high", "annotations")
	// The operation is what the arguments say, whatever the dotted name.
	check("as discovered", "read_file", `{"operation":"delete_file","filePath":"a.txt"}`, "high", "annotations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.High)
	check("set high", "read_file", `{"filePath":"a.txt"}`, "high", "override")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	check("set low", "read_file", `{"filePath":"a.txt"}`, "low", "override")
	check("set low", "create_file", `{"filePath":"a.txt","content":"x"}`, "medium", "arguments")
	// Replacing or deleting what a file holds asks for the phrase, as a delete does.
	check("set low", "create_file", `{"filePath":"a.txt","content":"","overwrite":true}`, "high", "arguments")
	check("set low", "copy_file", `{"filePath":"b.txt","newPath":"a.txt","overwrite":true}`, "high", "arguments")
	check("set low", "delete_file", `{"filePath":"a.txt"}`, "high", "arguments")
}

// Clearing file_operations' level lets its reads run without asking, as lowering it
// would: only someone who may lower risk may.
func TestClearingFileOperationsLevelIsLowering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.High)
	id := srv.App.ToolID(t, "builtin__file_operations")
	empty := ""
	_, err := srv.App.Tools.Update(ctx, audit.System, id, tools.Patch{Risk: &empty, Reason: "a tool manager"})
	var ve *verr.Error
	if !errors.As(err, &ve) || !strings.Contains(ve.For("risk"), "only an administrator may clear this level") {
		t.Fatalf("a tool manager clears the level: %v", err)
	}
	if _, err := srv.App.Tools.Update(ctx, audit.System, id, tools.Patch{Risk: &empty, MayLowerRisk: true, Reason: "an administrator"}); err != nil {
		t.Fatalf("an administrator clears the level: %v", err)
	}
}
