package router_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A case failed by a server whose error holds a NUL and a credential is recorded (the
// NUL would make PostgreSQL refuse the run, a 500 that records nothing), and its
// message, shown to every tool.view holder and put in the audit row, masks the credential.
func TestRunCasesServerErrorStorableAndMasked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("ce", true, "echo")
	answerEcho(hs, "boom", &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: "query failed\x00 at postgres://app:hunter2pw@db.internal:5432/prod"})
	id := e.tool("ce__echo").ID
	tc, err := e.tools.SaveTestCase(e.ctx, admin, id, tools.TestCase{Name: "boom", Arguments: json.RawMessage(`{"message":"boom"}`)})
	if err != nil {
		t.Fatal(err)
	}
	results, err := e.r.RunCases(e.ctx, router.Call{Tool: "ce__echo", Actor: admin, Role: auth.RoleAdmin,
		Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true, Phrase: "ce__echo"}}, []tools.TestCase{tc})
	if err != nil || len(results) != 1 || results[0].Passed {
		t.Fatalf("run: got %+v %v, want one failed case", results, err)
	}
	msg := results[0].Message
	if strings.Contains(msg, "\x00") || strings.Contains(msg, "hunter2pw") || !strings.Contains(msg, "query failed") {
		t.Errorf("the case's message %q: want the server's error without NUL or the password", msg)
	}
	if _, err := e.tools.RecordTestRun(e.ctx, admin, id, "", results, false, false); err != nil {
		t.Fatalf("record the run: %v", err)
	}
	if n := e.count(`SELECT count(*) FROM tool_test_cases WHERE id = $1 AND last_passed = false
		AND last_message LIKE '%query failed%' AND last_message NOT LIKE '%hunter2pw%'`, tc.ID); n != 1 {
		t.Errorf("the case's recorded outcome: %d rows with the masked message, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.test' AND target_id = $1 AND payload::text NOT LIKE '%hunter2pw%'`, id); n != 1 {
		t.Errorf("tool.test audit rows without the password: %d, want 1", n)
	}
}
