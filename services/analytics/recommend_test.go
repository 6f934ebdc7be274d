package analytics_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// advice is the tools a report recommends kind (raise_risk, lower_risk) for.
func advice(t *testing.T, svc *analytics.Service, now time.Time, kind string) []string {
	t.Helper()
	r, err := svc.Report(context.Background(), analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range r.Recommendations {
		if rec.Kind == kind {
			out = append(out, rec.Tool)
		}
	}
	slices.Sort(out)
	return out
}

// Quick approvals of MEDIUM steps whose level came from the operation they named (a
// built-in file_operations create_file) or from their arguments (a terminal command)
// are no reason to lower the tool's level: an administrator's LOW for the tool would
// make every operation LOW, delete_file too. The tools' own levels are MEDIUM here, so
// only the steps' sources tell them from a tool MEDIUM by its annotations.
func TestQuickApprovalsOfAnOperationAreNoReasonToLower(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	builtin, alpha := w.builtin(), w.server("alpha")
	files := w.tool(builtin, "file_operations", now.Add(-48*time.Hour))
	terminal := w.tool(builtin, "terminal", now.Add(-48*time.Hour))
	deploy := w.tool(alpha, "deploy", now.Add(-48*time.Hour))
	for _, id := range []string{files, terminal, deploy} {
		// Not destructive on an untrusted server: MEDIUM by its annotations.
		w.exec(`UPDATE mcp_tools SET annotations = '{"destructiveHint": false}' WHERE id = $1`, id)
	}
	bob := w.user("bob")
	for _, c := range []struct{ id, name, source string }{
		{files, "builtin__file_operations", "operation"},
		{terminal, "builtin__terminal", "arguments"},
		{deploy, "alpha__deploy", "annotations"},
	} {
		for i := range analytics.QuickApprovals {
			w.planFrom("ann", [][2]string{{c.id, c.name}}, "medium", c.source, "success", bob,
				now.Add(-time.Duration(i+1)*time.Hour), 2*time.Second)
		}
	}
	if got := advice(t, analytics.New(w.pool), now, "lower_risk"); !slices.Equal(got, []string{"alpha__deploy"}) {
		t.Fatalf("lower the risk of %v, want alpha__deploy only", got)
	}
}

// Advice about a tool's level lasts while it holds: a deleted tool gets none (its link
// would be a 404), nor does one whose level is no longer the one its steps had (the
// advice was followed).
func TestRiskAdviceFollowsTheTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	srv := w.server("alpha")
	bob := w.user("bob")
	tools := map[string]string{}
	for _, name := range []string{"deploy", "old_deploy", "flaky", "old_flaky"} {
		tools[name] = w.tool(srv, name, now.Add(-48*time.Hour))
	}
	for _, name := range []string{"deploy", "old_deploy"} {
		w.level(tools[name], "medium")
		for i := range analytics.QuickApprovals {
			w.execution(tools[name], "alpha__"+name, "medium", "success", bob, now.Add(-time.Duration(i+1)*time.Hour), 2*time.Second)
		}
	}
	for _, name := range []string{"flaky", "old_flaky"} {
		w.level(tools[name], "low")
		w.execution(tools[name], "alpha__"+name, "low", "rolled_back", "", now.Add(-time.Hour), 0)
	}
	svc := analytics.New(w.pool)
	if got := advice(t, svc, now, "lower_risk"); !slices.Equal(got, []string{"alpha__deploy", "alpha__old_deploy"}) {
		t.Fatalf("before: lower the risk of %v", got)
	}
	if got := advice(t, svc, now, "raise_risk"); !slices.Equal(got, []string{"alpha__flaky", "alpha__old_flaky"}) {
		t.Fatalf("before: raise the risk of %v", got)
	}
	w.exec(`DELETE FROM mcp_tools WHERE id = ANY($1::uuid[])`, []string{tools["old_deploy"], tools["old_flaky"]})
	if got := advice(t, svc, now, "lower_risk"); !slices.Equal(got, []string{"alpha__deploy"}) {
		t.Errorf("deleted: lower the risk of %v, want alpha__deploy only", got)
	}
	if got := advice(t, svc, now, "raise_risk"); !slices.Equal(got, []string{"alpha__flaky"}) {
		t.Errorf("deleted: raise the risk of %v, want alpha__flaky only", got)
	}
	w.level(tools["deploy"], "low")
	w.level(tools["flaky"], "medium")
	if got := advice(t, svc, now, "lower_risk"); len(got) != 0 {
		t.Errorf("followed: lower the risk of %v, want none", got)
	}
	if got := advice(t, svc, now, "raise_risk"); len(got) != 0 {
		t.Errorf("followed: raise the risk of %v, want none", got)
	}
}

// An approver whose user was deleted (executions.approved_by set NULL, approver_name
// kept) is still someone: alice's approvals beside bob's are two people's, not "all
// given by alice" (count(DISTINCT approved_by) skipped the NULLs), while all of them
// hers still are one person's.
func TestQuickApprovalsByADeletedApprover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	srv := w.server("alpha")
	alice, bob := w.user("alice"), w.user("bob")
	shared, hers := w.tool(srv, "shared", now.Add(-48*time.Hour)), w.tool(srv, "hers", now.Add(-48*time.Hour))
	w.level(shared, "medium")
	w.level(hers, "medium")
	for i := range analytics.QuickApprovals {
		at := now.Add(-time.Duration(i+1) * time.Hour)
		w.execution(shared, "alpha__shared", "medium", "success", alice, at, 2*time.Second)
		w.execution(shared, "alpha__shared", "medium", "success", bob, at, 2*time.Second)
		w.execution(hers, "alpha__hers", "medium", "success", alice, at, 2*time.Second)
	}
	svc := analytics.New(w.pool)
	if got := advice(t, svc, now, "lower_risk"); !slices.Equal(got, []string{"alpha__hers"}) {
		t.Fatalf("before alice was deleted: lower the risk of %v, want alpha__hers only", got)
	}
	w.exec(`DELETE FROM users WHERE id = $1`, alice)
	r, err := svc.Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range r.Recommendations {
		if rec.Kind == "lower_risk" {
			got = append(got, rec.Tool)
			if rec.Numbers["approver"] != "alice" {
				t.Errorf("%s: approver %v, want alice", rec.Tool, rec.Numbers["approver"])
			}
		}
	}
	if !slices.Equal(got, []string{"alpha__hers"}) {
		t.Fatalf("after alice was deleted: lower the risk of %v, want alpha__hers only (shared was approved by alice and bob)", got)
	}
	// Approvals naming nobody at all (a deleted user's, recorded before approver_name
	// was) are nobody's known: no advice naming no one.
	w.exec(`UPDATE executions SET approver_name = '' WHERE approved_by IS NULL`)
	if got := advice(t, svc, now, "lower_risk"); len(got) != 0 {
		t.Fatalf("approvals naming no approver: lower the risk of %v, want none", got)
	}
}
