package router_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// A caller looping on names that resolve to no tool spends its calls as any caller
// does: past its limit it is answered rate_limited, without the name being looked up
// (a failed look-up is never kept, and costs the database several queries).
func TestUnresolvedNamesAreRateLimited(t *testing.T) {
	t.Parallel()
	e := start(t, &router.Options{UserRate: 60}) // a burst of 6, then one a second
	e.server("un", true, "echo")
	looper := audit.Actor{Kind: audit.ActorUser, Name: "name-looper"}
	call := func(a audit.Actor, tool, args string) error {
		_, err := e.r.Call(e.ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: a, Role: auth.RoleAdmin,
			Source: router.SourceGateway})
		return err
	}
	codes := map[string]int{}
	var last error
	for range 30 {
		last = call(looper, "zz.yy", `{}`)
		codes[codeOf(last)]++
	}
	var re *router.Error
	if !errors.As(last, &re) || re.Code != router.CodeRateLimited || re.RetryAfter <= 0 || re.CallID == "" {
		t.Fatalf("the 30th call of an unknown name: got %v (answers %v), want rate_limited with a wait", last, codes)
	}
	if codes[router.CodeToolNotFound] == 0 || codes[router.CodeToolNotFound] > 8 {
		t.Errorf("tool_not_found answers: %d (all %v), want about the burst of 6", codes[router.CodeToolNotFound], codes)
	}
	if strings.Contains(re.Message, "zz.yy") {
		t.Errorf("past the limit the name was still looked up: %q", re.Message)
	}
	// Arguments that are not a JSON object, to a tool that exists, count the same way.
	other := audit.Actor{Kind: audit.ActorUser, Name: "args-looper"}
	codes = map[string]int{}
	for range 30 {
		last = call(other, "un__echo", `"x"`)
		codes[codeOf(last)]++
	}
	if codeOf(last) != router.CodeRateLimited || codes[router.CodeInvalidArguments] == 0 || codes[router.CodeInvalidArguments] > 8 {
		t.Errorf("a loop of non-object arguments: answers %v, want invalid_arguments about the burst of 6, then rate_limited", codes)
	}
	// Another caller is not limited by them, and a tool the snapshot holds still says
	// why it was refused past the limit.
	fresh := audit.Actor{Kind: audit.ActorUser, Name: "fresh"}
	if err := call(fresh, "un__echo", `{"message":"x"}`); err != nil {
		t.Fatalf("another caller: %v", err)
	}
	if err := call(other, "un__echo", `"x"`); codeOf(err) != router.CodeRateLimited || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Errorf("a known tool past the limit: got %v, want rate_limited saying why the call was refused", err)
	}
}

// Arguments that are not a JSON object, to a tool the name resolves to, are a refusal of
// that tool: it leaves its usage row (docs/architecture.md, The path of a tool call, step 10).
func TestBadArgumentsOfARealToolAreRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("ba", true, "echo")
	id := e.tool("ba__echo").ID
	for _, bad := range []string{`{"message":`, `"x"`} {
		if _, err := e.call("ba__echo", bad); codeOf(err) != router.CodeInvalidArguments {
			t.Fatalf("arguments %s: got %v, want invalid_arguments", bad, err)
		}
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE tool_id = $1 AND NOT success AND error_code = 'invalid_arguments'
		AND source = 'test_panel' AND actor = 'admin'`, id); n != 2 {
		t.Errorf("usage rows of the refused calls: got %d, want 2", n)
	}
	// What is not JSON is not kept as it was sent.
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE tool_id = $1 AND request::text = '"(unreadable JSON withheld)"'`, id); n != 1 {
		t.Errorf("the call with arguments that are not JSON: %d rows with them withheld, want 1", n)
	}
}

// A caller the tool is forbidden to is told so, and audited as such, whatever its
// arguments: with bad ones it was answered invalid_arguments, the refusal unaudited as
// one of access.
func TestBadArgumentsToAForbiddenToolAreForbidden(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("bf", true, "echo")
	guest := audit.Actor{Kind: audit.ActorUser, Name: "guest-prober"}
	for _, bad := range []string{`{"message":`, `"x"`, `{"message":"x"}`} {
		_, err := e.r.Call(e.ctx, router.Call{Tool: "bf__echo", Arguments: json.RawMessage(bad), Actor: guest,
			Role: auth.RoleGuest, Source: router.SourceAPI})
		if codeOf(err) != router.CodeForbidden {
			t.Fatalf("a guest's call with arguments %s: got %v, want forbidden", bad, err)
		}
	}
	e.flush()
	if got := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND actor_name = 'guest-prober'
		AND payload->>'code' = 'forbidden'`); got != 3 {
		t.Errorf("forbidden refusals audited: %d, want 3", got)
	}
}

// The tool.call row says what let the call through, not what it carried: a MEDIUM call
// that also carries a typed phrase (kept by the test panel from another operation) ran
// on its confirm.
func TestApprovalRecordedIsWhatConsentAccepted(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("trusted", true, "echo", "write-note")
	e.server("untrusted", false, "echo")
	for _, tc := range []struct{ tool, args, want string }{
		{"trusted__echo", `{"message":"x"}`, "policy"},
		{"untrusted__echo", `{"message":"x"}`, "confirmed"},
		{"trusted__write-note", `{"text":"x"}`, "phrase"},
	} {
		// e.call confirms and types the phrase, as the test panel may send both.
		res, err := e.call(tc.tool, tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		e.flush()
		var got string
		if err := e.pool.QueryRow(e.ctx, `SELECT payload->>'approval' FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1`,
			res.CallID).Scan(&got); err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if got != tc.want {
			t.Errorf("%s (%s risk): approval recorded %q, want %q", tc.tool, res.Risk, got, tc.want)
		}
	}
	// Without the phrase, a MEDIUM call is recorded the same.
	res, err := e.r.Call(e.ctx, router.Call{Tool: "untrusted__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: admin,
		Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true}})
	if err != nil {
		t.Fatal(err)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1 AND payload->>'approval' = 'confirmed'`,
		res.CallID); n != 1 {
		t.Errorf("a MEDIUM call confirmed without a phrase: %d rows recorded confirmed, want 1", n)
	}
}
