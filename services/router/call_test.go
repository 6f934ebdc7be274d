package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A call runs and leaves its audit row, usage row, events, last_used and runtime state.
func TestCallRecordsEverything(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("mt", true, "echo", "fail")
	res, err := e.call("mt__echo", `{"message":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	failed, err := e.call("mt__fail", `{"message":"out of paper"}`)
	if err != nil || !failed.IsError {
		t.Fatalf("fail: got %+v, %v; want an error result", failed, err)
	}
	// A credential the caller passed and the tool echoed back is masked in the audit row.
	leaked, err := e.call("mt__fail", `{"message":"rejected key sk-abcdefghijklmnopqrstuvwxyz0123"}`)
	if err != nil || !leaked.IsError {
		t.Fatalf("fail: got %+v, %v; want an error result", leaked, err)
	}
	if res.IsError || router.TextOf(res.Content) != "Echo: hi" || res.Tool != "mt__echo" || res.Attempts != 1 {
		t.Fatalf("got %+v, want Echo: hi in one attempt", res)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_name = 'mt__echo' AND payload->>'call_id' = $1`, res.CallID); n != 1 {
		t.Errorf("audit rows: got %d, want 1", n)
	}
	// A call whose tool answered with an error has a second row saying so (result
	// failure); a call that succeeded has none.
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.failed'`); n != 2 {
		t.Errorf("tool.call.failed rows: got %d, want 2 (the failed calls' only)", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.failed' AND payload->>'call_id' = $1
		AND payload->>'message' LIKE '%rejected key%' AND payload::text NOT LIKE '%sk-abcdefghij%'`, leaked.CallID); n != 1 {
		t.Errorf("the echoed key in the audit row: got %d rows without it, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.failed' AND result = 'failure' AND target_name = 'mt__fail'
		AND payload->>'call_id' = $1 AND payload->>'code' = 'tool_error' AND payload->>'message' LIKE '%out of paper%'`, failed.CallID); n != 1 {
		t.Errorf("the failed call's audit row: got %d, want 1 with result failure, code tool_error and the tool's message", n)
	}
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE success AND source = 'test_panel' AND metadata->>'call_id' = $1 AND request->>'message' = 'hi'`, res.CallID); n != 1 {
		t.Errorf("usage rows: got %d, want 1", n)
	}
	for _, kind := range []string{"tool.started", "tool.completed"} {
		if n := e.count(`SELECT count(*) FROM events WHERE topic = 'calls' AND kind = $1 AND payload->>'call_id' = $2`, kind, res.CallID); n != 1 {
			t.Errorf("%s events: got %d, want 1", kind, n)
		}
	}
	if n := e.count(`SELECT count(*) FROM mcp_tools WHERE id = $1 AND last_used IS NOT NULL`, res.ToolID); n != 1 {
		t.Errorf("last_used not set")
	}
	if rt := e.r.RuntimeOf(res.ToolID); rt.State != router.StateCompleted || rt.Active != 0 {
		t.Errorf("runtime: got %+v, want completed with nothing active", rt)
	}
}

// Names resolve by id, qualified name, unique bare name and dotted operation (seed 001).
func TestResolution(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("one", true, "echo")
	hs.Server().SetTool(mcptest.ToolSpec{Name: "files", Description: "Consolidated file operations for the tests.", Reply: "files ran",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"operation":{"type":"string","enum":["read","list"],"description":"what to do"},"path":{"type":"string","description":"a path"}},"required":["operation"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	e.enable("one__files")
	e.server("two", true, "echo")
	echo := e.tool("one__echo")
	for _, tc := range []struct {
		name, tool, args, want, code string
	}{
		{"id", echo.ID, `{"message":"a"}`, "Echo: a", ""},
		{"qualified", "one__echo", `{"message":"b"}`, "Echo: b", ""},
		{"bare and unique", "files", `{"operation":"read"}`, "files ran", ""},
		{"dotted qualified", "one__files.list", `{}`, "files ran", ""},
		{"dotted bare", "files.read", `{"path":"x"}`, "files ran", ""},
		{"dotted with an operation given keeps it", "files.read", `{"operation":"list"}`, "files ran", ""},
		{"dotted unknown operation", "files.delete", `{}`, "", router.CodeInvalidArguments},
		{"bare on two servers", "echo", `{"message":"c"}`, "", router.CodeToolNotFound},
		{"unknown", "one__nope", `{}`, "", router.CodeToolNotFound},
		{"unknown server", "three__echo", `{}`, "", router.CodeToolNotFound},
		{"empty", " ", `{}`, "", router.CodeToolNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.call(tc.tool, tc.args)
			if got := codeOf(err); got != tc.code {
				t.Fatalf("got code %q (%v), want %q", got, err, tc.code)
			}
			if tc.code == "" && router.TextOf(res.Content) != tc.want {
				t.Fatalf("got %q, want %q", router.TextOf(res.Content), tc.want)
			}
		})
	}
	_, err := e.call("echo", `{}`)
	if !strings.Contains(err.Error(), "one__echo") || !strings.Contains(err.Error(), "two__echo") {
		t.Errorf("ambiguous: got %v, want both qualified names offered", err)
	}
}

// Every bad parameter is reported at once, each with its kind (seed 001 stages).
func TestValidationReportsEveryProblem(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("v", true)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "typed", Description: "A tool with typed parameters for the tests.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"a":{"type":"string","description":"required text"},
			"n":{"type":"integer","minimum":1,"description":"a count"},
			"mode":{"type":"string","enum":["fast","slow"],"description":"how"}},
			"required":["a"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	e.enable("v__typed")
	_, err := e.call("v__typed", `{"n":"x","mode":"zzz","extra":1}`)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeInvalidArguments || re.Kind != fault.KindInvalid {
		t.Fatalf("got %v, want invalid_arguments (400)", err)
	}
	fields, _ := re.Details.([]verr.Field)
	kinds := map[string]string{}
	for _, f := range fields {
		kinds[f.Field] = f.Kind
	}
	for path, kind := range map[string]string{"/a": verr.KindMissing, "/n": verr.KindType, "/mode": verr.KindValue} {
		if kinds[path] != kind {
			t.Errorf("%s: got kind %q, want %q (all: %+v)", path, kinds[path], kind, fields)
		}
	}
	if !strings.Contains(re.Message, "a is required") || !strings.Contains(re.Message, "mode") {
		t.Errorf("message: got %q, want every parameter named", re.Message)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":`} {
		if _, err := e.call("v__typed", bad); codeOf(err) != router.CodeInvalidArguments {
			t.Errorf("arguments %s: got %v, want invalid_arguments", bad, err)
		}
	}
	e.flush()
	// Arguments that are not a JSON object never reach the tool, but are a refusal of it,
	// recorded as the schema's are.
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE error_code = 'invalid_arguments'`); n != 4 {
		t.Errorf("refused calls logged: got %d, want 4", n)
	}
}

// Configured defaults fill gaps; fixed values win and cannot be contradicted.
func TestConfiguredValuesAreMerged(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("c", true, "echo")
	tg := e.tool("c__echo")
	if _, err := e.tools.Update(e.ctx, admin, tg.ID, tools.Patch{Params: map[string]tools.ParamInput{
		"message": {Mode: tools.ModeDefault, Value: json.RawMessage(`"from config"`)}}}); err != nil {
		t.Fatal(err)
	}
	// The change is seen by the next call: the router's snapshot is cleared before Update returns.
	if res, err := e.call("c__echo", `{}`); err != nil || router.TextOf(res.Content) != "Echo: from config" {
		t.Fatalf("default: got %v %v, want Echo: from config", res, err)
	}
	if res, err := e.call("c__echo", `{"message":"mine"}`); err != nil || router.TextOf(res.Content) != "Echo: mine" {
		t.Fatalf("caller's value: got %v %v, want Echo: mine", res, err)
	}
	if _, err := e.tools.Update(e.ctx, admin, tg.ID, tools.Patch{Params: map[string]tools.ParamInput{
		"message": {Mode: tools.ModeFixed, Value: json.RawMessage(`"pinned"`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("c__echo", `{"message":"mine"}`); codeOf(err) != router.CodeInvalidArguments {
		t.Fatalf("contradicted fixed value: got %v, want invalid_arguments", err)
	}
	if res, err := e.call("c__echo", `{}`); err != nil || router.TextOf(res.Content) != "Echo: pinned" {
		t.Fatalf("fixed: got %v %v, want Echo: pinned", res, err)
	}
}

// Risk decides: LOW runs, MEDIUM needs a confirm, HIGH the exact phrase; the API is
// pointed to executions (docs/architecture.md, The path of a tool call).
func TestRiskNeedsApproval(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("trusted", true, "echo", "write-note")
	e.server("untrusted", false, "echo")
	call := func(tool, source string, ap router.Approval) error {
		args := `{"message":"x"}`
		if strings.HasSuffix(tool, "write-note") {
			args = `{"text":"x"}`
		}
		_, err := e.r.Call(e.ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: admin,
			Role: auth.RoleAdmin, Source: source, Approval: ap})
		return err
	}
	for _, tc := range []struct {
		name, tool, source string
		ap                 router.Approval
		code, needs        string
	}{
		{"low runs", "trusted__echo", router.SourceAPI, router.Approval{}, "", ""},
		{"medium unconfirmed", "untrusted__echo", router.SourceTestPanel, router.Approval{}, router.CodeApprovalRequired, "confirm"},
		{"medium confirmed", "untrusted__echo", router.SourceTestPanel, router.Approval{Confirmed: true}, "", ""},
		{"medium from the API", "untrusted__echo", router.SourceAPI, router.Approval{Confirmed: true}, router.CodeApprovalRequired, "confirm"},
		{"high confirmed is not enough", "trusted__write-note", router.SourceTestPanel, router.Approval{Confirmed: true}, router.CodeApprovalRequired, "phrase"},
		{"high wrong phrase", "trusted__write-note", router.SourceTestPanel, router.Approval{Phrase: "trusted__write-not"}, router.CodeApprovalRequired, "phrase"},
		{"high phrase", "trusted__write-note", router.SourceTestPanel, router.Approval{Phrase: "trusted__write-note"}, "", ""},
		{"high from the API", "trusted__write-note", router.SourceAPI, router.Approval{}, router.CodeApprovalRequired, "phrase"},
		{"step of an approved execution", "trusted__write-note", router.SourceExecution, router.Approval{Execution: "e1"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := call(tc.tool, tc.source, tc.ap)
			if got := codeOf(err); got != tc.code {
				t.Fatalf("got %q (%v), want %q", got, err, tc.code)
			}
			if tc.code == "" {
				return
			}
			var re *router.Error
			errors.As(err, &re)
			need := re.Details.(router.ApprovalNeeded)
			if need.Needs != tc.needs || re.Kind != fault.KindForbidden {
				t.Fatalf("got needs %q kind %s, want %q forbidden", need.Needs, re.Kind, tc.needs)
			}
			if tc.source == router.SourceAPI && (need.Executions != "/api/v1/executions" || !strings.Contains(re.Message, "/api/v1/executions")) {
				t.Fatalf("API refusal does not point to executions: %+v", re)
			}
		})
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND payload->>'code' = 'approval_required'`); n != 5 {
		t.Errorf("audited refusals: got %d, want 5", n)
	}
}

// Roles and per-user permissions decide who may call; the snapshot follows changes.
func TestPermissions(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("p", true, "echo")
	for _, u := range []struct {
		name string
		role auth.Role
	}{{"ursula", auth.RoleToolUser}, {"gus", auth.RoleGuest}} {
		if _, _, err := e.auth.CreateUser(e.ctx, audit.System, auth.NewUser{Username: u.name, Role: u.role, Password: "correct horse battery"}); err != nil {
			t.Fatal(err)
		}
	}
	userOf := func(name string) (audit.Actor, auth.Role) {
		u, err := e.auth.GetUserByName(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}, u.Role
	}
	as := func(name string) string {
		a, role := userOf(name)
		_, err := e.r.Call(e.ctx, router.Call{Tool: "p__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: a, Role: role, Source: router.SourceAPI})
		return codeOf(err)
	}
	if got := as("ursula"); got != "" {
		t.Fatalf("tool user: got %q, want allowed", got)
	}
	if got := as("gus"); got != router.CodeForbidden {
		t.Fatalf("guest: got %q, want forbidden", got)
	}
	no, yes := false, true
	if err := e.tools.SetPermission(e.ctx, admin, e.tool("p__echo").ID, "ursula", &no); err != nil {
		t.Fatal(err)
	}
	if err := e.tools.SetPermission(e.ctx, admin, e.tool("p__echo").ID, "gus", &yes); err != nil {
		t.Fatal(err)
	}
	if u, g := as("ursula"), as("gus"); u != router.CodeForbidden || g != "" {
		t.Fatalf("per-user permissions: ursula %q, gus %q; want forbidden and allowed at once", u, g)
	}
	if err := e.tools.SetPermission(e.ctx, admin, e.tool("p__echo").ID, "nobody", &yes); err == nil {
		t.Fatal("a permission for an unknown user was accepted")
	}
}

// Only enabled tools run, except that a test may run any validated tool.
func TestDisabledTools(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("d", true)
	e.tool("d__echo")
	if _, err := e.call("d__echo", `{"message":"x"}`); codeOf(err) != router.CodeToolDisabled {
		t.Fatalf("validated tool: got %v, want tool_disabled", err)
	}
	res, err := e.r.Call(e.ctx, router.Call{Tool: "d__echo", Arguments: json.RawMessage(`{"message":"t"}`), Actor: admin,
		Role: auth.RoleAdmin, Source: router.SourceTestPanel, Test: true})
	if err != nil || router.TextOf(res.Content) != "Echo: t" {
		t.Fatalf("test run of a validated tool: got %v %v", res, err)
	}
}

// A tool disabled or enabled is refused or served by the very next call: the router's
// snapshot is cleared before SetEnabled returns, not when the NOTIFY arrives.
func TestEnableAndDisableTakeEffectAtOnce(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("o", true, "echo")
	id := e.tool("o__echo").ID
	set := func(on bool) {
		t.Helper()
		outs, err := e.tools.SetEnabled(e.ctx, admin, []string{id}, on, "test", true)
		if err != nil {
			t.Fatal(err)
		}
		if err := outs[0].Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if _, err := e.call("o__echo", `{"message":"x"}`); err != nil { // cached as enabled
			t.Fatalf("round %d, enabled: %v", i, err)
		}
		set(false)
		if _, err := e.call("o__echo", `{"message":"x"}`); codeOf(err) != router.CodeToolDisabled {
			t.Fatalf("round %d, the call right after the disable: got %v, want tool_disabled", i, err)
		}
		set(true)
	}
}

// Rate limits per user and per tool answer with how long to wait.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	e := start(t, &router.Options{UserRate: 60}) // a burst of 6
	e.server("r", true, "echo", "add")
	var limited *router.Error
	for i := range 10 {
		_, err := e.call("r__echo", `{"message":"x"}`)
		if errors.As(err, &limited) {
			if i != 6 {
				t.Fatalf("limited at call %d, want 7th", i+1)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if limited == nil || limited.Code != router.CodeRateLimited || limited.Kind != fault.KindRateLimited || limited.RetryAfter <= 0 {
		t.Fatalf("got %+v, want rate_limited 429 with a wait", limited)
	}
	// Another user is not limited by the first one's calls.
	other := audit.Actor{Kind: audit.ActorUser, Name: "other"}
	if _, err := e.r.Call(e.ctx, router.Call{Tool: "r__add", Arguments: json.RawMessage(`{"a":1,"b":2}`), Actor: other, Role: auth.RoleAdmin}); err != nil {
		t.Fatalf("another user: %v", err)
	}
	// A tool's own limit applies across callers.
	ten := 10
	if _, err := e.tools.Update(e.ctx, admin, e.tool("r__add").ID, tools.Patch{RateLimit: &ten}); err != nil {
		t.Fatal(err)
	}
	var toolLimited error
	for i := range 5 {
		a := audit.Actor{Kind: audit.ActorUser, Name: "u" + string(rune('a'+i))}
		if _, err := e.r.Call(e.ctx, router.Call{Tool: "r__add", Arguments: json.RawMessage(`{"a":1,"b":2}`), Actor: a, Role: auth.RoleAdmin}); err != nil {
			toolLimited = err
			break
		}
	}
	if codeOf(toolLimited) != router.CodeRateLimited || !strings.Contains(toolLimited.Error(), "r__add has made too many calls") {
		t.Fatalf("tool limit: got %v, want rate_limited naming the tool", toolLimited)
	}
	// A call that only asks for approval counts too: a loop on a risky tool is slowed.
	e.server("u", false, "echo")
	asker := audit.Actor{Kind: audit.ActorUser, Name: "asker"}
	var codes []string
	for range 8 {
		_, err := e.r.Call(e.ctx, router.Call{Tool: "u__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: asker, Role: auth.RoleAdmin})
		codes = append(codes, codeOf(err))
	}
	if codes[0] != router.CodeApprovalRequired || codes[len(codes)-1] != router.CodeRateLimited {
		t.Fatalf("calls asking for approval in a loop: %v, want approval_required, then rate_limited", codes)
	}
}

// A call past the tool's timeout fails with timeout, and nothing stays stuck.
func TestTimeout(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("tm", true, "sleep", "echo")
	tg := e.tool("tm__sleep")
	timeout := 200
	if _, err := e.tools.Update(e.ctx, admin, tg.ID, tools.Patch{TimeoutMS: &timeout}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		_, err := e.call("tm__sleep", `{"ms":3000}`)
		return codeOf(err) == router.CodeTimeout
	}, "the call never timed out")
	var re *router.Error
	_, err := e.call("tm__sleep", `{"ms":3000}`)
	if !errors.As(err, &re) || re.Kind != fault.KindTimeout {
		t.Fatalf("got %v, want 504", err)
	}
	if rt := e.r.RuntimeOf(tg.ID); rt.Active != 0 || rt.State != router.StateError {
		t.Fatalf("runtime after timeout: got %+v, want error with nothing active", rt)
	}
	if res, err := e.call("tm__echo", `{"message":"still here"}`); err != nil || res.IsError {
		t.Fatalf("after a timeout: %v %v", res, err)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.failed' AND result = 'failure' AND payload->>'code' = 'timeout'
		AND payload->>'call_id' = $1`, re.CallID); n != 1 {
		t.Errorf("the timed-out call's audit row: got %d, want 1 with result failure and code timeout", n)
	}
}

// A caller that goes away cancels the call upstream.
func TestCancelledCall(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("cx", true, "sleep")
	ctx, cancel := context.WithCancel(e.ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	began := time.Now()
	_, err := e.r.Call(ctx, router.Call{Tool: "cx__sleep", Arguments: json.RawMessage(`{"ms":10000}`), Actor: admin, Role: auth.RoleAdmin})
	if codeOf(err) != router.CodeCancelled {
		t.Fatalf("got %v, want cancelled", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("the cancelled call took %s", d)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE error_code = 'cancelled'`); n != 1 {
		t.Errorf("cancelled calls logged: got %d, want 1", n)
	}
}

// Progress notifications reach the caller and the call's events.
func TestProgress(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("pg", true, "sleep")
	var mu sync.Mutex
	var got []router.Progress
	res, err := e.r.Call(e.ctx, router.Call{Tool: "pg__sleep", Arguments: json.RawMessage(`{"ms":1000}`), Actor: admin, Role: auth.RoleAdmin,
		Progress: func(p router.Progress) { mu.Lock(); got = append(got, p); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The last notification may race the result (the SDK handles them concurrently),
	// and one that arrives after the call returned is dropped, not delivered late.
	if len(got) < 4 || got[0].Message != "slept 1 of 5" || got[0].Total != 5 {
		t.Fatalf("progress: got %+v, want at least 4 of 5 steps", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Progress != got[i-1].Progress+1 {
			t.Fatalf("progress out of order: %+v", got)
		}
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM events WHERE kind = 'tool.output' AND payload->>'call_id' = $1`, res.CallID); n < 3 {
		t.Errorf("tool.output events: got %d, want one per step (throttled to 10/s)", n)
	}
}

// Structured content comes back with the result.
func TestStructuredContent(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("sc", true, "add")
	res, err := e.call("sc__add", `{"a":2,"b":3}`)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Sum float64 }
	if err := json.Unmarshal(res.StructuredContent, &out); err != nil || out.Sum != 5 {
		t.Fatalf("structured: got %s, want sum 5", res.StructuredContent)
	}
}

// A server that dies mid-call gives a clear upstream error, and the tool is usable again
// once the server is back.
func TestUpstreamCrashMidCall(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("crash", true, "sleep", "echo")
	time.AfterFunc(300*time.Millisecond, hs.Stop)
	_, err := e.call("crash__sleep", `{"ms":10000}`)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeUpstream || re.Kind != fault.KindUpstream || !strings.Contains(re.Message, "crash") {
		t.Fatalf("got %v, want upstream_error 502 naming the server", err)
	}
	if rt := e.r.RuntimeOf(e.tool("crash__sleep").ID); rt.Active != 0 {
		t.Fatalf("runtime: got %+v, want nothing active", rt)
	}
	hs.Restart()
	testkit.WaitFor(t, 30*time.Second, func() bool {
		res, err := e.call("crash__echo", `{"message":"back"}`)
		return err == nil && router.TextOf(res.Content) == "Echo: back"
	}, "the tool never worked again after the server came back")
}

// Concurrent calls share transactions but each has its own audit row, and the chain
// holds, also while other actions append to it between the router's writes (so the
// head the router remembers goes stale).
func TestConcurrentCallsKeepTheAuditChain(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("cc", true, "echo")
	var wg sync.WaitGroup
	errs := make(chan error, 64+20)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			errs <- db.WithTx(e.ctx, e.pool, func(tx pgx.Tx) error {
				_, err := audit.Append(e.ctx, tx, audit.Entry{Actor: audit.System, Action: "other.action"})
				return err
			})
		}
	}()
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := audit.Actor{Kind: audit.ActorUser, Name: "caller" + string(rune('A'+i%26)) + string(rune('a'+i/26))}
			_, err := e.r.Call(e.ctx, router.Call{Tool: "cc__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: a, Role: auth.RoleAdmin})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call'`); n != 64 {
		t.Fatalf("audit rows: got %d, want 64", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'other.action'`); n != 20 {
		t.Fatalf("other audit rows: got %d, want 20", n)
	}
	if n := e.count(`SELECT count(*) FROM tool_usage_logs`); n != 64 {
		t.Fatalf("usage rows: got %d, want 64", n)
	}
	res, err := audit.Verify(e.ctx, e.pool)
	if err != nil || !res.OK() {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}

// A caller waits only for its own audit row: calls go on while the writes gathered
// behind them (usage rows, events) cannot proceed, and those follow, in order, once
// they can.
func TestCallsDoNotWaitForGatheredWrites(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("mt", true, "echo")
	// Inserts into tool_usage_logs wait for this lock: so does every gathered write.
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	if _, err := tx.Exec(e.ctx, `LOCK TABLE tool_usage_logs IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		done := make(chan error, 1)
		go func() {
			res, err := e.call("mt__echo", fmt.Sprintf(`{"message":"%d"}`, i))
			if err == nil {
				ids = append(ids, res.CallID)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("call %d is waiting for the gathered writes of the calls before it", i)
		}
		// The next call starts once the gathered write of this one waits for the lock.
		testkit.WaitFor(t, 10*time.Second, func() bool {
			return e.count(`SELECT count(*) FROM pg_locks WHERE relation = 'tool_usage_logs'::regclass AND NOT granted`) > 0
		}, "the call's usage row was never written")
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call'`); n != 3 {
		t.Errorf("audit rows while the rest waits: %d, want 3", n)
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.flush()
	for _, id := range ids {
		if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE metadata->>'call_id' = $1`, id); n != 1 {
			t.Errorf("call %s: %d usage rows, want 1", id, n)
		}
		if n := e.count(`SELECT count(*) FROM events s JOIN events c ON c.payload->>'call_id' = s.payload->>'call_id'
			WHERE s.kind = 'tool.started' AND c.kind = 'tool.completed' AND s.id < c.id AND s.payload->>'call_id' = $1`, id); n != 1 {
			t.Errorf("call %s: its started event does not precede its completed one", id)
		}
	}
}

// Flush says when what it waited for could not be written.
func TestFlushReportsFailedWrites(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("mt", true, "echo")
	if _, err := e.app.Owner.Exec(e.ctx, `ALTER TABLE tool_usage_logs RENAME TO tool_usage_logs_away`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("mt__echo", `{"message":"hi"}`); err != nil {
		t.Fatal(err)
	}
	if err := e.r.Flush(e.ctx); err == nil || !strings.Contains(err.Error(), "tool_usage_logs") {
		t.Errorf("Flush with the usage table gone: %v, want an error naming it", err)
	}
	if _, err := e.app.Owner.Exec(e.ctx, `ALTER TABLE tool_usage_logs_away RENAME TO tool_usage_logs`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.call("mt__echo", `{"message":"again"}`); err != nil {
		t.Fatal(err)
	}
	e.flush()
}

// A conversation id longer than conversations, grants and executions keep is refused
// for every tool, a LOW one too, naming the field.
func TestLongConversationIDRefused(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("v", true)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "look", Description: "A read-only tool for the tests.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	e.enable("v__look")
	call := func(conv string) error {
		_, err := e.r.Call(e.ctx, router.Call{Tool: "v__look", Actor: admin, Role: auth.RoleAdmin, Source: router.SourceAPI, ConversationID: conv})
		return err
	}
	if err := call(strings.Repeat("é", router.MaxConversationID)); err != nil {
		t.Fatalf("a conversation id of %d characters: %v", router.MaxConversationID, err)
	}
	err := call(strings.Repeat("c", router.MaxConversationID+1))
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeInvalidArguments || !strings.Contains(re.Message, "conversation_id is longer than 200 characters") {
		t.Fatalf("a conversation id of %d characters: %v", router.MaxConversationID+1, err)
	}
	if fields, _ := re.Details.([]verr.Field); len(fields) != 1 || fields[0].Field != "/conversation_id" {
		t.Fatalf("the details: %+v", re.Details)
	}
}

// A server that floods progress notifications, each saying the work is done and each
// long, costs a bounded number of short records: "done" lets one through, not all.
func TestProgressFloodBounded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.register(registry.Spec{Name: "fl", Type: registry.TypeStreamableHTTP, Enabled: true, Trusted: true,
		URL: mcptest.StartHTTP(t, &mcptest.Options{Name: "fl", Big: true}).URL()}, "flood")
	var mu sync.Mutex
	got := 0
	began := time.Now()
	res, err := e.r.Call(e.ctx, router.Call{Tool: "fl__flood", Arguments: json.RawMessage(`{"count":2000,"bytes":5000}`), Actor: admin, Role: auth.RoleAdmin,
		Progress: func(p router.Progress) {
			mu.Lock()
			got++
			mu.Unlock()
			if len(p.Message) > 1100 {
				t.Errorf("a progress message of %d bytes reached the caller", len(p.Message))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.flush()
	// One "done", plus ten a second.
	limit := 2 + int(time.Since(began)/(100*time.Millisecond))
	if n := e.count(`SELECT count(*) FROM events WHERE kind = 'tool.output' AND payload->>'call_id' = $1`, res.CallID); n > limit {
		t.Fatalf("tool.output events of 2,000 notifications over %s: %d, want at most %d", time.Since(began), n, limit)
	}
	if n := e.count(`SELECT max(length(payload::text)) FROM events WHERE kind = 'tool.output' AND payload->>'call_id' = $1`, res.CallID); n > 3000 {
		t.Fatalf("a tool.output event of %d bytes", n)
	}
}

// A person's default conversation cannot be named by anyone else (who would own it
// first, and leave its person's calls refused); the person may name it.
func TestDefaultConversationIsItsPersons(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("dc", true, "echo")
	bob := audit.Actor{Kind: audit.ActorUser, ID: "9f1c0e4e-0000-4000-8000-000000000002", Name: "bob"}
	call := func(conv string) error {
		_, err := e.r.Call(e.ctx, router.Call{Tool: "dc__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: bob, Role: auth.RoleAdmin,
			Source: router.SourceTestPanel, ConversationID: conv, Approval: router.Approval{Confirmed: true}})
		return err
	}
	for _, conv := range []string{"user-9f1c0e4e-0000-4000-8000-000000000001", "system"} {
		if err := call(conv); codeOf(err) != router.CodeInvalidArguments || !strings.Contains(err.Error(), "another person's default conversation") {
			t.Errorf("%s: got %v, want invalid_arguments", conv, err)
		}
	}
	for _, conv := range []string{router.DefaultConversation(bob), "", "my-own-work", "user-123-chat"} {
		if err := call(conv); err != nil {
			t.Errorf("%q: %v", conv, err)
		}
	}
}

// A caller looping on a call it may not make is charged for each refusal like a call:
// past its limit the refusals are answered rate_limited and not recorded one by one,
// so the append-only logs grow by about its burst, not by the loop.
func TestRefusalsAreRateLimited(t *testing.T) {
	t.Parallel()
	e := start(t, &router.Options{UserRate: 60}) // a burst of 6, then one a second
	e.server("rf", true, "echo")
	looper := audit.Actor{Kind: audit.ActorUser, Name: "looper"}
	began := time.Now()
	codes := map[string]int{}
	var last error
	for range 500 {
		_, last = e.r.Call(e.ctx, router.Call{Tool: "rf__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: looper,
			Role: auth.RoleGuest, Source: router.SourceAPI})
		codes[codeOf(last)]++
	}
	elapsed := time.Since(began)
	e.flush()
	var re *router.Error
	if !errors.As(last, &re) || re.Code != router.CodeRateLimited || re.RetryAfter <= 0 || re.CallID == "" {
		t.Fatalf("the 500th refused call: got %v, want rate_limited with a wait", last)
	}
	limit := 6 + int(elapsed/time.Second) + 1 // the burst, plus what refilled meanwhile
	refused := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND actor_name = 'looper'`)
	if refused == 0 || refused > limit || refused != codes[router.CodeForbidden] {
		t.Fatalf("tool.call.refused rows of 500 forbidden calls in %s: %d (answers %v), want 1..%d, one per forbidden answer",
			elapsed, refused, codes, limit)
	}
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE actor = 'looper'`); n != refused {
		t.Errorf("usage rows: %d, want %d (the recorded refusals')", n, refused)
	}
	if !strings.Contains(e.app.Logs.String(), "no longer each recorded") {
		t.Error("nothing logged about the refusals held back")
	}
	// Once the limit lets one through again, its record says how many were held back.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		_, err := e.r.Call(e.ctx, router.Call{Tool: "rf__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: looper,
			Role: auth.RoleGuest, Source: router.SourceAPI})
		return codeOf(err) == router.CodeForbidden
	}, "the limit never let a refusal through again")
	e.flush()
	// Each held back is counted by the next recorded one (the polls above add their own).
	if n := e.count(`SELECT coalesce(sum((payload->>'withheld_before')::int), 0) FROM audit_log
		WHERE action = 'tool.call.refused' AND actor_name = 'looper'`); n < codes[router.CodeRateLimited] {
		t.Errorf("refusals held back, as the recorded ones say: %d, want at least the %d answered rate_limited", n, codes[router.CodeRateLimited])
	}
}

// A call whose server is deleted while it runs still gets its failure recorded: its
// tool row went with the server (and the usage rows with it), so the usage row is left
// out, not the audit row and the events. (Closing the session waits for the calls in
// flight, so the call ends by its timeout.)
func TestServerDeletedMidCallKeepsItsFailure(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("gone", true, "sleep")
	tg := e.tool("gone__sleep")
	serverID := tg.ServerID
	timeout := 3000
	if _, err := e.tools.Update(e.ctx, admin, tg.ID, tools.Patch{TimeoutMS: &timeout}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := e.call("gone__sleep", `{"ms":10000}`)
		errc <- err
	}()
	testkit.WaitFor(t, 20*time.Second, func() bool { return hs.Server().Sleeping() == 1 }, "the call never reached the server")
	if err := e.reg.DeleteServer(e.ctx, audit.System, serverID); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-errc:
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end when its server was deleted")
	}
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeTimeout || re.CallID == "" {
		t.Fatalf("the call whose server was deleted: got %v, want timeout", err)
	}
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.failed' AND payload->>'call_id' = $1`, re.CallID) == 1
	}, "the call's tool.call.failed row was never written")
	// The failure came after the deletion, or this tested nothing.
	if n := e.count(`SELECT count(*) FROM audit_log f JOIN audit_log d ON d.action = 'server.delete' AND d.target_id = $2
		WHERE f.action = 'tool.call.failed' AND f.payload->>'call_id' = $1 AND f.id > d.id`, re.CallID, serverID); n != 1 {
		t.Fatal("the call failed before its server was deleted")
	}
	if n := e.count(`SELECT count(*) FROM events WHERE kind = 'tool.failed' AND payload->>'call_id' = $1`, re.CallID); n != 1 {
		t.Errorf("tool.failed events: got %d, want 1", n)
	}
}

// A call still running when the app stops gets its records written: the sessions
// close first, which lets their calls in flight end, and the router, still running,
// writes what those calls leave before it stops. The router's own wait for calls in
// flight is left out here (StopWait: a nanosecond), so this is the components' order.
func TestCallsInFlightAtShutdownAreRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, &router.Options{StopWait: time.Nanosecond})
	hs := e.server("sd", true, "sleep")
	type outcome struct {
		res *router.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.call("sd__sleep", `{"ms":3000}`)
		done <- outcome{res, err}
	}()
	testkit.WaitFor(t, 20*time.Second, func() bool { return hs.Server().Sleeping() == 1 }, "the call never reached the server")
	e.app.Stop()
	var out outcome
	select {
	case out = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end when the app stopped")
	}
	if out.err != nil {
		t.Fatalf("the call in flight at shutdown: %v", out.err)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE kind = 'tool.completed' AND payload->>'call_id' = $1`, out.res.CallID); n != 1 {
		t.Errorf("the call's tool.completed events after the app stopped: got %d, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE success AND metadata->>'call_id' = $1`, out.res.CallID); n != 1 {
		t.Errorf("the call's usage rows after the app stopped: got %d, want 1", n)
	}
}

// A router told to stop waits for the calls it has in flight and writes their records
// before its recorder stops.
func TestRunWaitsForCallsInFlight(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("dr", true, "sleep")
	r := router.New(e.pool, e.tools, e.mgr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		_ = r.Run(ctx)
		close(stopped)
	}()
	testkit.WaitFor(t, 10*time.Second, r.Running, "the router never ran")
	type outcome struct {
		res *router.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Call(e.ctx, router.Call{Tool: "dr__sleep", Arguments: json.RawMessage(`{"ms":2000}`), Actor: admin, Role: auth.RoleAdmin})
		done <- outcome{res, err}
	}()
	testkit.WaitFor(t, 20*time.Second, func() bool { return hs.Server().Sleeping() == 1 }, "the call never reached the server")
	cancel()
	out := <-done
	if out.err != nil {
		t.Fatalf("the call in flight while the router stopped: %v", out.err)
	}
	<-stopped
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE success AND metadata->>'call_id' = $1`, out.res.CallID); n != 1 {
		t.Errorf("the call's usage rows after the router stopped: got %d, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE kind = 'tool.completed' AND payload->>'call_id' = $1`, out.res.CallID); n != 1 {
		t.Errorf("the call's tool.completed events after the router stopped: got %d, want 1", n)
	}
}

// A run of saved cases that a rate limit stops is refused as a whole, not judged case by
// case: a case kept from the tool by a limit anyone calling it can use up says nothing
// of the tool (a case expecting an error counted as passed, one expecting success as failed).
// 20 cases are more than a limit of 60 a minute lets through while a run may wait.
func TestRunCasesStoppedByRateLimit(t *testing.T) {
	t.Parallel()
	e := start(t, &router.Options{UserRate: 60}) // a burst of 6
	e.server("r", true, "add")
	cases := make([]tools.TestCase, 20)
	for i := range cases {
		cases[i] = tools.TestCase{ID: strconv.Itoa(i), Name: "case " + strconv.Itoa(i), Arguments: json.RawMessage(`{"a":1,"b":2}`), Expect: "error"}
	}
	results, err := e.r.RunCases(e.ctx, router.Call{Tool: "r__add", Actor: audit.Actor{Kind: audit.ActorUser, Name: "runner"}, Role: auth.RoleAdmin}, cases)
	if codeOf(err) != router.CodeRateLimited || results != nil {
		t.Fatalf("20 cases past a burst of 6: got %d results, %v; want the run refused as rate_limited", len(results), err)
	}
}

// A refused value of an argument the schema marks secret (writeOnly, format password)
// is not quoted back: the error goes into the usage log, which tool managers read, and
// a mistyped secret is nearly the secret.
func TestValidationDoesNotQuoteSecretArguments(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("v", true)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "pin", Description: "A tool with a secret parameter for the tests.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"ssn":{"type":"string","writeOnly":true,"pattern":"^[0-9]{3}-[0-9]{2}-[0-9]{4}$"},
			"code":{"type":"string","format":"password","enum":["alpha","beta"]},
			"note":{"type":"string","enum":["a","b"]},
			"pin":{"type":"integer","writeOnly":true,"maximum":9999}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}})
	e.enable("v__pin")
	_, err := e.call("v__pin", `{"ssn":"123456789","code":"hunter-42","note":"visible-7","pin":73519}`)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeInvalidArguments {
		t.Fatalf("got %v, want invalid_arguments", err)
	}
	all, _ := json.Marshal(re)
	if strings.Contains(string(all)+re.Message, "123456789") || strings.Contains(string(all)+re.Message, "hunter-42") ||
		strings.Contains(string(all)+re.Message, "73519") {
		t.Errorf("the refusal quotes a secret argument: %s %s", re.Message, all)
	}
	if !strings.Contains(re.Message, "ssn") || !strings.Contains(re.Message, "code") || !strings.Contains(re.Message, "visible-7") ||
		!strings.Contains(re.Message, "pin maximum: want 9,999 (the value given is not shown)") {
		t.Errorf("the refusal: %s, want both secret parameters named and the plain one's value quoted", re.Message)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE error_code = 'invalid_arguments' AND (error::text LIKE '%123456789%' OR error::text LIKE '%hunter-42%')`); n != 0 {
		t.Errorf("usage log rows quoting a secret argument: %d", n)
	}
}

// A refused call is recorded even when its caller has already hung up: the queue's
// send raced the caller's context, and about half such refusals went unrecorded (and
// the web layer, told they were, recorded nothing either).
func TestRefusalRecordedAfterCallerLeft(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("rl", true, "echo")
	prober := audit.Actor{Kind: audit.ActorUser, Name: "prober"}
	// The first refusal loads the tool; the next ones touch no database before recording.
	if _, err := e.r.Call(e.ctx, router.Call{Tool: "rl__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: prober,
		Role: auth.RoleGuest, Source: router.SourceAPI}); codeOf(err) != router.CodeForbidden {
		t.Fatalf("a guest's call: %v, want forbidden", err)
	}
	gone, cancel := context.WithCancel(e.ctx)
	cancel()
	const n = 20
	for range n {
		_, err := e.r.Call(gone, router.Call{Tool: "rl__echo", Arguments: json.RawMessage(`{"message":"x"}`), Actor: prober,
			Role: auth.RoleGuest, Source: router.SourceAPI})
		if codeOf(err) != router.CodeForbidden {
			t.Fatalf("a guest's call: %v, want forbidden", err)
		}
	}
	e.flush()
	if got := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call.refused' AND actor_name = 'prober'`); got != n+1 {
		t.Errorf("tool.call.refused rows of %d refusals to a caller already gone (and one before): %d", n, got)
	}
}
