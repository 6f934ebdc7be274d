package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
)

// failedWithCases saves cases a (passes) and b (fails) on a configured tool and records
// a verifying run of both: the tool fails.
func failedWithCases(t *testing.T, f *fixture, name string) (id string, a, b tools.TestCase) {
	t.Helper()
	id = f.tool(toolSpec{server: f.server(name, true), name: name, status: "configured"})
	a, err := f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "a", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err = f.svc.SaveTestCase(f.ctx, alice, id, tools.TestCase{Name: "b", Arguments: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{
		{CaseID: a.ID, Name: "a", Passed: true}, {CaseID: b.ID, Name: "b", Passed: false}}, true, false)
	if err != nil || rec.Status != "failed" {
		t.Fatalf("first run: got %+v %v, want failed", rec, err)
	}
	return id, a, b
}

// A tool manager (no tool.override) cannot verify a failed tool by deleting or weakening
// the case that failed and running the rest: that is an override, which administrators
// make. Rerunning the cases the tool failed on, unchanged, still verifies it.
func TestFailedToolCasesChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	t.Run("case deleted", func(t *testing.T) {
		id, a, b := failedWithCases(t, f, "deleted")
		if err := f.svc.DeleteTestCase(f.ctx, bob, id, b.ID); err != nil {
			t.Fatal(err)
		}
		rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{{CaseID: a.ID, Name: "a", Passed: true}}, true, false)
		if err != nil || rec.Status != "failed" || f.status(id) != "failed" {
			t.Fatalf("run after deleting the failing case: got %+v %v (stored %s), want the tool still failed", rec, err, f.status(id))
		}
		if !strings.Contains(rec.OverrideNeeded, "override is needed: the cases changed since the tool failed") {
			t.Fatalf("OverrideNeeded: got %q, want it to say the cases changed", rec.OverrideNeeded)
		}
		if p := f.auditPayloads("tool.test", id); p[len(p)-1]["override_needed"] != true {
			t.Fatalf("audit payload: got %v, want override_needed", p[len(p)-1])
		}
		// A failing run of what is left does not lower the bar: the case the tool first
		// failed on is still needed.
		c, err := f.svc.SaveTestCase(f.ctx, bob, id, tools.TestCase{Name: "c", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{
			{CaseID: a.ID, Name: "a", Passed: true}, {CaseID: c.ID, Name: "c", Passed: false}}, true, false); err != nil || rec.Status != "failed" {
			t.Fatalf("failing rerun: got %+v %v, want failed", rec, err)
		}
		if rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{
			{CaseID: a.ID, Name: "a", Passed: true}, {CaseID: c.ID, Name: "c", Passed: true}}, true, false); err != nil || rec.Status != "failed" {
			t.Fatalf("passing run after a failing rerun: got %+v %v, want still failed", rec, err)
		}
		// An administrator (tool.override) verifies it as before.
		rec, err = f.svc.RecordTestRun(f.ctx, alice, id, "", []tools.CaseResult{
			{CaseID: a.ID, Name: "a", Passed: true}, {CaseID: c.ID, Name: "c", Passed: true}}, true, true)
		if err != nil || rec.Status != "verified" || rec.OverrideNeeded != "" {
			t.Fatalf("administrator's run: got %+v %v, want verified", rec, err)
		}
	})

	t.Run("case weakened", func(t *testing.T) {
		id, a, _ := failedWithCases(t, f, "weakened")
		b, err := f.svc.SaveTestCase(f.ctx, bob, id, tools.TestCase{Name: "b", Arguments: json.RawMessage(`{"n":1}`), Expect: tools.ExpectError})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{
			{CaseID: a.ID, Name: "a", Passed: true}, {CaseID: b.ID, Name: "b", Passed: true}}, true, false)
		if err != nil || rec.Status != "failed" || f.status(id) != "failed" {
			t.Fatalf("run after re-saving the failing case: got %+v %v (stored %s), want the tool still failed", rec, err, f.status(id))
		}
	})

	t.Run("unchanged cases pass now", func(t *testing.T) {
		id, a, b := failedWithCases(t, f, "fixed")
		// A case added since is run too; the ones the tool failed on are unchanged.
		c, err := f.svc.SaveTestCase(f.ctx, bob, id, tools.TestCase{Name: "c", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{
			{CaseID: a.ID, Name: "a", Passed: true}, {CaseID: b.ID, Name: "b", Passed: true}, {CaseID: c.ID, Name: "c", Passed: true}}, true, false)
		if err != nil || rec.Status != "verified" {
			t.Fatalf("rerun of the unchanged cases: got %+v %v, want verified", rec, err)
		}
	})

	t.Run("run leaves out a failing case", func(t *testing.T) {
		id, a, _ := failedWithCases(t, f, "partial")
		rec, err := f.svc.RecordTestRun(f.ctx, bob, id, "", []tools.CaseResult{{CaseID: a.ID, Name: "a", Passed: true}}, true, false)
		if err != nil || rec.Status != "failed" || !strings.Contains(rec.OverrideNeeded, "did not include every case") {
			t.Fatalf("run of a only: got %+v %v, want failed, saying b did not run", rec, err)
		}
	})
}
