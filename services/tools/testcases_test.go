package tools_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Cases are saved by name (a second save replaces), checked, listed and deleted, audited.
func TestTestCases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "echo"})
	tc, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: " hello ", Arguments: json.RawMessage(`{"message":"hi"}`), ExpectText: "hi"})
	if err != nil || tc.Name != "hello" || tc.Expect != tools.ExpectSuccess {
		t.Fatalf("save: got %+v %v", tc, err)
	}
	if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "hello", Arguments: json.RawMessage(`{"message":"again"}`), Expect: tools.ExpectError}); err != nil {
		t.Fatal(err)
	}
	cs, err := f.svc.TestCases(f.ctx, id)
	if err != nil || len(cs) != 1 || cs[0].Expect != tools.ExpectError || string(cs[0].Arguments) != `{"message": "again"}` {
		t.Fatalf("list: got %+v %v, want the replaced case", cs, err)
	}
	for _, bad := range []tools.TestCase{
		{Name: "", Arguments: json.RawMessage(`{}`)},
		{Name: "x", Arguments: json.RawMessage(`[1]`)},
		{Name: "x", Expect: "maybe"},
	} {
		_, err := f.svc.SaveTestCase(f.ctx, alice, id, bad)
		var ve *verr.Error
		if !errors.As(err, &ve) {
			t.Errorf("save %+v: got %v, want a field error", bad, err)
		}
	}
	if err := f.svc.DeleteTestCase(f.ctx, alice, id, cs[0].ID); err != nil {
		t.Fatal(err)
	}
	if cs, _ := f.svc.TestCases(f.ctx, id); len(cs) != 0 {
		t.Fatalf("after delete: got %d cases", len(cs))
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM audit_log WHERE action LIKE 'tool.testcase.%'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("audit rows: got %d %v, want 3", n, err)
	}
}

// Passes compares the outcome with the expectation.
func TestCasePasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    tools.TestCase
		ok   bool
		text string
		want bool
	}{
		{tools.TestCase{Expect: tools.ExpectSuccess}, true, "", true},
		{tools.TestCase{Expect: tools.ExpectSuccess}, false, "", false},
		{tools.TestCase{Expect: tools.ExpectError}, false, "boom", true},
		{tools.TestCase{Expect: tools.ExpectError}, true, "", false},
		{tools.TestCase{Expect: tools.ExpectSuccess, ExpectText: "42"}, true, "the sum is 42", true},
		{tools.TestCase{Expect: tools.ExpectSuccess, ExpectText: "42"}, true, "the sum is 41", false},
	} {
		if got, why := tc.c.Passes(tc.ok, tc.text); got != tc.want || why == "" {
			t.Errorf("%+v ok=%v %q: got %v %q, want %v", tc.c, tc.ok, tc.text, got, why, tc.want)
		}
	}
}

// A verifying run moves configured → testing → verified, or failed when a case fails;
// a run without verify changes no state.
func TestRecordTestRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.server("s", true)
	for _, tc := range []struct {
		name     string
		status   string
		passed   bool
		verify   bool
		override bool
		want     string
	}{
		{"verified", "configured", true, true, false, "verified"},
		{"failed", "validated", false, true, false, "failed"},
		{"retest of a failed tool", "failed", true, true, true, "verified"},
		// It failed on cases nobody recorded (TestFailedToolCasesChanged).
		{"retest of a failed tool without override", "failed", true, true, false, "failed"},
		{"not verifying", "configured", true, false, false, "configured"},
		{"enabled tools keep their state", "enabled", false, true, false, "enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := f.tool(toolSpec{server: sv, name: tc.name, status: tc.status})
			rec, err := f.svc.RecordTestRun(f.ctx, alice, id, "", []tools.CaseResult{{Name: "a", Passed: tc.passed}}, tc.verify, tc.override)
			got := rec.Status
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
			var moves int
			if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM tool_state_history WHERE tool_id = $1`, id).Scan(&moves); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 2, false: 0}[tc.want != tc.status]; moves != want {
				t.Fatalf("history rows: got %d, want %d", moves, want)
			}
		})
	}
}

// A run verifies only the definition it ran against: when discovery changes the tool
// while the cases run (leaving it validated), the outcomes are recorded but the tool
// stays validated, and the audit row says why.
func TestRecordTestRunDefinitionChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "changes", status: "configured"})
	seen := f.get(id).DefinitionHash // what the handler passes on to RunCases
	f.exec(`UPDATE mcp_tools SET definition_hash = 'hash-b', status = 'validated' WHERE id = $1`, id)
	got, err := f.svc.RecordTestRun(f.ctx, alice, id, seen, []tools.CaseResult{{Name: "a", Passed: true}}, true, false)
	if err != nil || got.Status != "validated" || !got.DefinitionChanged {
		t.Fatalf("got %+v %v, want status validated with the definition changed", got, err)
	}
	if s := f.status(id); s != "validated" || len(f.history(id)) != 0 {
		t.Fatalf("status %q with %d history rows, want validated and none", s, len(f.history(id)))
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'tool.test'
		AND payload->>'definition_changed' = 'true' AND payload->>'to' IS NULL`, id); n != 1 {
		t.Fatalf("audit rows noting the changed definition: got %d, want 1", n)
	}
	// Run again against the definition it has now: verified.
	got, err = f.svc.RecordTestRun(f.ctx, alice, id, "hash-b", []tools.CaseResult{{Name: "a", Passed: true}}, true, false)
	if err != nil || got.Status != "verified" || got.DefinitionChanged {
		t.Fatalf("a run of the current definition: got %+v %v, want verified", got, err)
	}
}

// A saved case is shown to everyone who may see the tool, and exported: it keeps no
// secret (a parameter the schema marks secret, or a key that looks secret at any
// depth), and text that PostgreSQL cannot store is a field error, not a failure.
func TestTestCaseRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "call", schema: `{"type":"object","properties":{
		"query":{"type":"string"},"pin":{"type":"string","writeOnly":true},"auth":{"type":"object"},
		"login":{"type":"object","writeOnly":true}}}`})
	for _, tc := range []struct {
		args, field, want string
	}{
		{`{"query":"x","pin":"1234"}`, "arguments", "/pin holds a secret"},
		{`{"auth":{"api_key":"sk-live-1"}}`, "arguments", "/auth/api_key holds a secret"},
		{`{"query":"a\u0000b"}`, "arguments", "NUL"},
		{`{"github_token":"x1"}`, "arguments", "/github_token holds a secret"},
		{`{"auth":{"password":1234}}`, "arguments", "/auth/password holds a secret"},
		{`{"query":"ghp_R4nd0mT0k3nV4lu3Th4tL00ksR34l1234567"}`, "arguments", "/query holds a secret"},
		// Inside a secret object, every value is as secret as the object.
		{`{"login":{"user":"bob"}}`, "arguments", "/login/user holds a secret"},
	} {
		_, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "c", Arguments: json.RawMessage(tc.args)})
		var ve *verr.Error
		if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != tc.field || !strings.Contains(ve.Fields[0].Message, tc.want) {
			t.Errorf("save %s: got %v, want a %s error saying %q", tc.args, err, tc.field, tc.want)
		}
	}
	for _, tc := range []tools.TestCase{{Name: "a\x00b"}, {Name: "c", ExpectText: "\xff"}} {
		if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tc); err == nil || !errors.As(err, new(*verr.Error)) {
			t.Errorf("save %q (expect %q): got %v, want a field error", tc.Name, tc.ExpectText, err)
		}
	}
	// Empty secrets and ordinary values are kept.
	if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "ok", Arguments: json.RawMessage(`{"query":"token bucket","pin":"",
		"auth":{"key":"PROJ-1","sessionId":"s-1","token_count":5,"tokens":["a"]}}`)}); err != nil {
		t.Fatalf("save a case without secret values: %v", err)
	}
}

// A tool keeps at most 100 cases (every view of its test panel loads them all, and Run
// all runs each), and a case's arguments at most 64 KiB: more is a field error naming
// the limit. At the limit a case can still be replaced under its name.
func TestTestCaseLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "echo"})
	f.exec(`INSERT INTO tool_test_cases (tool_id, name) SELECT $1, 'case ' || n FROM generate_series(1, 99) n`, id)
	if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "the 100th"}); err != nil {
		t.Fatalf("the 100th case: %v", err)
	}
	_, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "the 101st"})
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "case_name" || !strings.Contains(ve.Fields[0].Message, "100 test cases") {
		t.Errorf("the 101st case: got %v, want a case_name error naming the limit of 100", err)
	}
	if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "case 7", Expect: tools.ExpectError}); err != nil {
		t.Errorf("replacing a case at the limit: %v", err)
	}
	if n := f.count(`SELECT count(*) FROM tool_test_cases WHERE tool_id = $1`, id); n != 100 {
		t.Errorf("%d cases stored, want 100", n)
	}

	other := f.tool(toolSpec{server: f.server("s2", true), name: "echo"})
	big := json.RawMessage(`{"message":"` + strings.Repeat("x", 64<<10) + `"}`)
	_, err = f.svc.SaveTestCase(f.ctx, alice, other, tools.TestCase{Name: "big", Arguments: big})
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "arguments" || !strings.Contains(ve.Fields[0].Message, "64 KiB") {
		t.Errorf("arguments over 64 KiB: got %v, want an arguments error naming the limit", err)
	}
	fits := json.RawMessage(`{"message":"` + strings.Repeat("x", 60<<10) + `"}`)
	if _, err := f.svc.SaveTestCase(f.ctx, alice, other, tools.TestCase{Name: "fits", Arguments: fits}); err != nil {
		t.Errorf("arguments of 60 KiB: %v", err)
	}
}

// A case's outcome message (which may carry a server's error text) is kept to 1,000
// characters, in the case and in the audit entry of the run.
func TestTestRunMessageClipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "echo"})
	tc, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	msg := "expected success, got an error: " + strings.Repeat("é", 50_000)
	if _, err := f.svc.RecordTestRun(f.ctx, alice, id, "", []tools.CaseResult{{CaseID: tc.ID, Name: "c", Message: msg}}, false, false); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.TestCase(f.ctx, id, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.LastMessage) > 1000 || !strings.HasPrefix(got.LastMessage, "expected success, got an error: éé") {
		t.Errorf("stored message: %d bytes, starting %.40q; want at most 1,000", len(got.LastMessage), got.LastMessage)
	}
	if n := f.count(`SELECT max(length(payload->'results'->0->>'message')) FROM audit_log WHERE target_id = $1 AND action = 'tool.test'`, id); n > 1000 {
		t.Errorf("audited message: %d characters, want at most 1,000", n)
	}
}

// A run verifies only the cases it ran: a case saved again while they ran (under the
// same name, so the same id) keeps its outcome unknown, not the passed of arguments it
// no longer has, and a case added meanwhile did not run; either way the tool's state
// stays, and the audit row says why.
func TestRecordTestRunCasesChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, change := range []string{"saved again", "added"} {
		t.Run(change, func(t *testing.T) {
			id := f.tool(toolSpec{server: f.server("cc-"+strings.ReplaceAll(change, " ", "-"), true), name: "t", status: "configured"})
			a, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "a", Arguments: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ran := []tools.CaseResult{{CaseID: a.ID, Name: "a", Passed: true, Saved: a.UpdatedAt}}
			switch change {
			case "saved again":
				if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "a", Arguments: json.RawMessage(`{"n":1}`)}); err != nil {
					t.Fatal(err)
				}
			case "added":
				if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "b", Arguments: json.RawMessage(`{}`)}); err != nil {
					t.Fatal(err)
				}
			}
			rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", ran, true, false)
			if err != nil || !rec.CasesChanged || rec.Status != "configured" || f.status(id) != "configured" {
				t.Fatalf("got %+v %v (status %s), want the cases changed and the tool still configured", rec, err, f.status(id))
			}
			if change == "saved again" {
				if n := f.count(`SELECT count(*) FROM tool_test_cases WHERE id = $1 AND last_passed IS NOT NULL`, a.ID); n != 0 {
					t.Error("the case saved again meanwhile is marked with the run's outcome")
				}
			}
			if n := f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'tool.test' AND payload->>'cases_changed' = 'true'`, id); n != 1 {
				t.Errorf("audit rows noting the changed cases: %d", n)
			}
		})
	}
}

// A failed tool is not verified by a run while which a case was added either: the
// cases it failed on passing is not all of them passing.
func TestRecordTestRunCaseAddedToFailedTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, a, b := failedWithCases(t, f, "added-to-failed")
	if _, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "c", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{
		{CaseID: a.ID, Name: "a", Passed: true, Saved: a.UpdatedAt}, {CaseID: b.ID, Name: "b", Passed: true, Saved: b.UpdatedAt}}, true, false)
	if err != nil || !rec.CasesChanged || rec.Status != "failed" {
		t.Fatalf("got %+v %v, want the cases changed and the tool still failed", rec, err)
	}
}
