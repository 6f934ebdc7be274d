package executions_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// sameTx checks that execution id's row was last written by the transaction that
// wrote its kind events (on both topics) and its audit row with action: the change,
// its events and its audit entry commit together.
func (e *env) sameTx(id, kind, action string) {
	e.t.Helper()
	var row string
	if err := e.pool.QueryRow(e.ctx, `SELECT xmin::text FROM executions WHERE id = $1`, id).Scan(&row); err != nil {
		e.t.Fatal(err)
	}
	e.inTx(row, id, kind, action)
}

// earlierTx is sameTx for a transition the execution has moved on from: its events
// and audit row were written by one transaction.
func (e *env) earlierTx(id, kind, action string) {
	e.t.Helper()
	var tx string
	if err := e.pool.QueryRow(e.ctx, `SELECT xmin::text FROM audit_log WHERE target_id = $1 AND action = $2`, id, action).Scan(&tx); err != nil {
		e.t.Fatal(err)
	}
	e.inTx(tx, id, kind, action)
}

// inTx checks execution id's kind events (on both topics) and its audit row with
// action were written by transaction row.
func (e *env) inTx(row, id, kind, action string) {
	e.t.Helper()
	var evs []string
	rows, err := e.pool.Query(e.ctx, `SELECT xmin::text FROM events WHERE kind = $1 AND payload->>'execution_id' = $2
		AND topic IN ($3, $4)`, kind, id, executions.Topic, executions.TopicOf(id))
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			e.t.Fatal(err)
		}
		evs = append(evs, x)
	}
	if len(evs) != 2 || evs[0] != row || evs[1] != row {
		e.t.Errorf("%s events: written by transactions %v, want 2 by %s (the execution's last write)", kind, evs, row)
	}
	var au []string
	rows, err = e.pool.Query(e.ctx, `SELECT xmin::text FROM audit_log WHERE target_id = $1 AND action = $2`, id, action)
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			e.t.Fatal(err)
		}
		au = append(au, x)
	}
	if len(au) != 1 || au[0] != row {
		e.t.Errorf("%s audit rows: written by transactions %v, want 1 by %s", action, au, row)
	}
}

// ownEvents counts execution id's own events (not its steps' tool.* events) on topic.
func (e *env) ownEvents(topic, id string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM events WHERE topic = $1 AND payload->>'execution_id' = $2 AND kind NOT LIKE 'tool.%'`, topic, id)
}

// Every transition writes its events on both topics and its audit row in its own
// transaction, and the approval queues the run job in the same one.
func TestEventsAndAudit(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "add")
	e.setRisk("mt__add", risk.Medium)
	counts := func(id string, events, audits int) {
		t.Helper()
		for _, topic := range []string{executions.Topic, executions.TopicOf(id)} {
			if n := e.ownEvents(topic, id); n != events {
				t.Errorf("events on %s: got %d, want %d", topic, n, events)
			}
		}
		if n := e.count(`SELECT count(*) FROM audit_log WHERE target_type = 'execution' AND target_id = $1`, id); n != audits {
			t.Errorf("audit rows: got %d, want %d", n, audits)
		}
	}
	jobTx := func(id string) {
		t.Helper()
		if n := e.count(`SELECT count(*) FROM river_job j, executions x WHERE x.id = $1 AND j.kind = 'execution.run'
			AND j.args->>'execution_id' = $2 AND j.xmin = x.xmin`, id, id); n != 1 {
			t.Errorf("run jobs queued by the approving transaction: got %d, want 1", n)
		}
	}

	// MEDIUM: planned and waiting; confirmed; run.
	m := e.create(e.admin, step("mt__echo", `{"message":"a"}`), step("mt__add", `{"a":1,"b":2}`))
	counts(m.ID, 2, 1)
	e.sameTx(m.ID, "plan.created", "execution.create")
	e.sameTx(m.ID, "approval.requested", "execution.create")
	if _, err := e.svc.Confirm(e.ctx, e.admin, m.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	counts(m.ID, 3, 2)
	e.sameTx(m.ID, "approval.granted", "execution.approve")
	jobTx(m.ID)

	// LOW: planned and approved by policy in one transaction, with its job.
	l := e.create(e.admin, step("mt__echo", `{"message":"b"}`))
	if l.Status != executions.Executing || l.Approval != "policy" || l.ApproverName != "policy" || l.ApprovedBy != nil {
		t.Fatalf("LOW plan: got %s approved %q by %q (%v), want executing approved by policy", l.Status, l.Approval,
			l.ApproverName, l.ApprovedBy)
	}
	counts(l.ID, 2, 2)
	e.sameTx(l.ID, "plan.created", "execution.create")
	e.sameTx(l.ID, "approval.granted", "execution.approve")
	e.bothTopics(l.ID, "approval.requested", 0)
	jobTx(l.ID)
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.approve' AND actor_kind = 'system'`, l.ID); n != 1 {
		t.Errorf("policy approvals audited as the system: got %d, want 1", n)
	}

	// Cancelled while waiting.
	c := e.create(e.admin, step("mt__add", `{"a":1,"b":2}`))
	if _, err := e.svc.Cancel(e.ctx, e.admin, c.ID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	counts(c.ID, 3, 2)
	e.sameTx(c.ID, "execution.cancelled", "execution.cancel")

	e.run(nil)
	for _, id := range []string{m.ID, l.ID} {
		e.waitStatus(id, executions.Success, 20*time.Second)
		counts(id, map[bool]int{true: 4, false: 3}[id == m.ID], 3)
		e.sameTx(id, "execution.success", "execution.success")
		checkInvariant(t, e, id)
	}
	checkInvariant(t, e, c.ID)
}

// LOW plans run at once, step by step through the router, to success: each step's
// state, call and result stored, its tool events on the execution's topic.
func TestRunLow(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "add", "sleep")
	e.run(nil)
	ex := e.create(e.admin, step("mt__echo", `{"message":"hi"}`), step("mt__sleep", `{"ms":250}`), step("mt__add", `{"a":2,"b":3}`))
	if ex.Status != executions.Executing || ex.Risk != "low" {
		t.Fatalf("got %s (%s), want a low plan executing at once", ex.Status, ex.Risk)
	}
	done := e.waitStatus(ex.ID, executions.Success, 20*time.Second)
	if done.StartedAt == nil || done.FinishedAt == nil || done.Error != "" {
		t.Errorf("got started %v, finished %v, error %q; want both times and no error", done.StartedAt, done.FinishedAt, done.Error)
	}
	sts := e.steps(ex.ID)
	if got := stepStatuses(sts); !slices.Equal(got, []string{"succeeded", "succeeded", "succeeded"}) {
		t.Fatalf("steps: got %v, want all succeeded", got)
	}
	type result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structured_content"`
		IsError    bool            `json:"is_error"`
	}
	var r0, r2 result
	if err := json.Unmarshal(sts[0].Result, &r0); err != nil || len(r0.Content) != 1 || r0.Content[0].Text != "Echo: hi" || r0.IsError {
		t.Errorf("step 1 result: got %s, want Echo: hi", sts[0].Result)
	}
	var sum struct{ Sum float64 }
	if err := json.Unmarshal(sts[2].Result, &r2); err != nil || json.Unmarshal(r2.Structured, &sum) != nil || sum.Sum != 5 {
		t.Errorf("step 3 result: got %s, want structured content {\"sum\":5}", sts[2].Result)
	}
	e.flush()
	topic := executions.TopicOf(ex.ID)
	for i, st := range sts {
		if st.CallID == nil || st.StartedAt == nil || st.FinishedAt == nil || st.DurationMS == nil {
			t.Fatalf("step %d: got call %v, started %v, finished %v, duration %v; want all set", i+1, st.CallID,
				st.StartedAt, st.FinishedAt, st.DurationMS)
		}
		for _, kind := range []string{"tool.started", "tool.completed"} {
			if n := e.count(`SELECT count(*) FROM events WHERE topic = $1 AND kind = $2 AND payload->>'call_id' = $3`,
				topic, kind, *st.CallID); n != 1 {
				t.Errorf("step %d: %s events on %s: got %d, want 1", i+1, kind, topic, n)
			}
		}
		if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE source = 'execution' AND success AND metadata->>'call_id' = $1`,
			*st.CallID); n != 1 {
			t.Errorf("step %d: usage rows: got %d, want 1", i+1, n)
		}
	}
	if n := e.count(`SELECT count(*) FROM events WHERE topic = $1 AND kind = 'tool.output' AND payload->>'call_id' = $2`,
		topic, *sts[1].CallID); n < 1 {
		t.Errorf("the sleep step's tool.output events: got %d, want its progress", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'approval' = $1`, "execution:"+ex.ID); n != 3 {
		t.Errorf("tool.call audit rows carrying the execution's approval: got %d, want 3", n)
	}
	e.bothTopics(ex.ID, "execution.success", 1)
	e.sameTx(ex.ID, "execution.success", "execution.success")
}

// A failing step fails the execution with its error; the later steps are skipped.
func TestFailingStep(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	ex := e.create(e.admin, step("mt__echo", `{"message":"a"}`), step("mt__fail", `{"message":"disk full"}`),
		step("mt__echo", `{"message":"c"}`))
	got := e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	const want = "step 2 (mt__fail) failed: the tool reported an error: disk full"
	if got.Error != want || got.FinishedAt == nil {
		t.Errorf("error: got %q (finished %v), want %q", got.Error, got.FinishedAt, want)
	}
	sts := e.steps(ex.ID)
	if s := stepStatuses(sts); !slices.Equal(s, []string{"succeeded", "failed", "skipped"}) {
		t.Fatalf("steps: got %v, want succeeded, failed, skipped", s)
	}
	if !strings.Contains(sts[1].Error, "disk full") || sts[2].CallID != nil {
		t.Errorf("got step 2 error %q and step 3 call %v; want the tool's error and no call", sts[1].Error, sts[2].CallID)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'approval' = $1`, "execution:"+ex.ID); n != 2 {
		t.Errorf("calls made: got %d, want 2", n)
	}
	e.bothTopics(ex.ID, "execution.failed", 1)
	e.sameTx(ex.ID, "execution.failed", "execution.failed")
	// The audit row of a failed run reads failure, not the success of recording it.
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.failed' AND result = 'failure'`, ex.ID); n != 1 {
		t.Errorf("execution.failed audit rows with result failure: %d, want 1", n)
	}
	checkInvariant(t, e, ex.ID)
}

// Cancelling a running execution lets the running step finish and starts no other.
func TestCancelBetweenSteps(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "sleep")
	// Approved (by policy) and cancelled before the runner took it: nothing runs.
	early := e.create(e.admin, step("mt__echo", `{"message":"never"}`))
	if _, err := e.svc.Cancel(e.ctx, e.admin, early.ID, "too early"); err != nil {
		t.Fatal(err)
	}
	e.run(nil)
	ex := e.create(e.admin, step("mt__sleep", `{"ms":400}`), step("mt__echo", `{"message":"never"}`))
	testkit.WaitFor(t, 20*time.Second, func() bool { return stepStatuses(e.steps(ex.ID))[0] == executions.StepRunning },
		"the first step never ran")
	got, err := e.svc.Cancel(e.ctx, e.admin, ex.ID, "stop after this one")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != executions.Cancelled || got.Reason != "stop after this one" {
		t.Fatalf("got %s (%q), want cancelled with the reason", got.Status, got.Reason)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return slices.Equal(stepStatuses(e.steps(ex.ID)), []string{"succeeded", "skipped"})
	}, "steps never became succeeded, skipped")
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_name = 'mt__echo'`); n != 0 {
		t.Errorf("echo calls: got %d, want 0", n)
	}
	if got := e.get(ex.ID); got.Status != executions.Cancelled || got.Error != "" {
		t.Errorf("got %s (error %q), want still cancelled", got.Status, got.Error)
	}
	e.bothTopics(ex.ID, "execution.cancelled", 1)
	e.bothTopics(ex.ID, "execution.success", 0)
	e.sameTx(ex.ID, "execution.cancelled", "execution.cancel")
	checkInvariant(t, e, ex.ID)
	testkit.WaitFor(t, 20*time.Second, func() bool { return slices.Equal(stepStatuses(e.steps(early.ID)), []string{"skipped"}) },
		"the step of the execution cancelled before it ran was never skipped")
	if got := e.get(early.ID).Status; got != executions.Cancelled {
		t.Errorf("cancelled before it ran: got %s, want cancelled", got)
	}
	checkInvariant(t, e, early.ID)
}

// A tool that changed between approval and the run is found before the first step
// (every step is checked against what was approved before each one runs): nothing
// runs, and the execution fails, audited as stale.
func TestStaleAtRun(t *testing.T) {
	t.Parallel()
	e := start(t)
	hs := e.server("mt", true, "echo", "add")
	e.setRisk("mt__add", risk.Medium)
	noteSpec := mcptest.ToolSpec{Name: "note", Description: "Keeps a note.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}}
	hs.Server().SetTool(noteSpec)
	e.enable("mt__note")
	confirmed := func(steps ...executions.RequestStep) *executions.Execution {
		ex := e.create(e.admin, steps...)
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ""); err != nil {
			t.Fatal(err)
		}
		return ex
	}
	cfg := confirmed(step("mt__echo", `{"message":"first"}`), step("mt__add", `{"a":1,"b":1}`))
	def := confirmed(step("mt__echo", `{"message":"first"}`), step("mt__note", `{"path":"/n"}`))

	ms := 7000
	e.update("mt__add", tools.Patch{TimeoutMS: &ms})
	changed := noteSpec
	changed.Description = "Keeps a note, now differently."
	before := e.tool("mt__note").DefinitionHash
	hs.Server().SetTool(changed)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		p, err := e.prepared("mt__note", `{"path":"/n"}`)
		return err != nil || p.DefinitionHash != before
	}, "the router never saw the new definition of mt__note")

	e.run(nil)
	for _, tc := range []struct {
		name string
		ex   *executions.Execution
		want string
	}{
		{"configuration", cfg, "step 1 (mt__echo) was not run: step 2: mt__add's configuration changed since the plan was made"},
		{"definition", def, "step 1 (mt__echo) was not run: step 2: mt__note changed its definition since the plan was made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.waitStatus(tc.ex.ID, executions.Failed, 20*time.Second)
			if !strings.HasPrefix(got.Error, tc.want) {
				t.Errorf("error: got %q, want %q…", got.Error, tc.want)
			}
			sts := e.steps(tc.ex.ID)
			if s := stepStatuses(sts); !slices.Equal(s, []string{"skipped", "skipped"}) {
				t.Fatalf("steps: got %v, want skipped, skipped", s)
			}
			if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.stale' AND result = 'failure'`, tc.ex.ID); n != 1 {
				t.Errorf("execution.stale audit rows with result failure (the execution failed): got %d, want 1", n)
			}
			e.bothTopics(tc.ex.ID, "execution.failed", 1)
			checkInvariant(t, e, tc.ex.ID)
		})
	}
}

// Only a failed execution rolls back: its completed steps are undone, last first, by
// the plan's undo steps or the compensations administrators configured, each through
// the router; the undone steps become compensated.
func TestRollback(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "add", "fail")
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	if err := e.svc.SetCompensation(e.ctx, admin, e.tool("mt__add").ID, e.tool("mt__echo").ID,
		map[string]executions.MappedArgument{"message": {Value: json.RawMessage(`"undo add"`)}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		req       executions.Request
		want      executions.Status
		runSteps  []string
		undoSteps []string
	}{
		{"the plan's undo step", executions.Request{
			Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
			Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)},
		}, executions.RolledBack, []string{"compensated", "failed"}, []string{"succeeded"}},
		{"a configured compensation", executions.Request{
			Steps: []executions.RequestStep{step("mt__add", `{"a":1,"b":2}`), step("mt__fail", `{}`)},
		}, executions.RolledBack, []string{"compensated", "failed"}, []string{"succeeded"}},
		{"an undo step that fails", executions.Request{
			Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__echo", `{"message":"again"}`), step("mt__fail", `{}`)},
			Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo 1"}`), step("mt__fail", `{"message":"cannot undo"}`)},
		}, executions.RollbackFailed, []string{"succeeded", "succeeded", "failed"}, []string{"failed", "skipped"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &tc.req})
			if err != nil {
				t.Fatal(err)
			}
			e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
			got, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{})
			if err != nil {
				t.Fatalf("rollback: %v", err)
			}
			if got.Status != executions.RollingBack {
				t.Fatalf("got %s, want rolling_back", got.Status)
			}
			_, err = e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{})
			if !isConflict(err) {
				t.Errorf("a second rollback: got %v, want a *ConflictError", err)
			}
			end := e.waitStatus(ex.ID, tc.want, 20*time.Second)
			if tc.want == executions.RollbackFailed && !strings.HasPrefix(end.Error, "undo step 1 (mt__fail, which undoes step 2) failed: ") {
				t.Errorf("error: got %q, want it to name the undo step as one", end.Error)
			}
			var run, undo []string
			for _, st := range e.steps(ex.ID) {
				if st.Phase == executions.PhaseRollback {
					undo = append(undo, st.Status)
				} else {
					run = append(run, st.Status)
				}
			}
			if !slices.Equal(run, tc.runSteps) || !slices.Equal(undo, tc.undoSteps) {
				t.Errorf("steps: got run %v, rollback %v; want %v, %v", run, undo, tc.runSteps, tc.undoSteps)
			}
			e.bothTopics(ex.ID, "rollback.started", 1)
			e.earlierTx(ex.ID, "rollback.started", "execution.rollback")
			if tc.want == executions.RolledBack {
				e.sameTx(ex.ID, "rollback.completed", "execution.rolled_back")
			} else {
				e.sameTx(ex.ID, "rollback.failed", "execution.rollback_failed")
			}
			_, err = e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{})
			conflictIn(t, err, tc.want)
			checkInvariant(t, e, ex.ID)
		})
	}
}

// Stopping the runner lets the running step finish and starts no other; the next
// runner continues with the next step and never runs a completed one again.
func TestRestartBetweenSteps(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "sleep")
	first := e.service()
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- first.Run(ctx) }()
	ex := e.create(e.admin, step("mt__sleep", `{"ms":300}`), step("mt__echo", `{"message":"after"}`))
	testkit.WaitFor(t, 20*time.Second, func() bool { return stepStatuses(e.steps(ex.ID))[0] == executions.StepRunning },
		"the first step never ran")
	stop()
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"succeeded", "pending"}) {
		t.Fatalf("after the stop: got %v, want succeeded, pending", s)
	}
	if got := e.get(ex.ID).Status; got != executions.Executing {
		t.Fatalf("after the stop: got %s, want still executing", got)
	}
	e.run(e.service())
	e.waitStatus(ex.ID, executions.Success, 20*time.Second)
	e.flush()
	for tool, want := range map[string]int{"mt__sleep": 1, "mt__echo": 1} {
		if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_name = $1`, tool); n != want {
			t.Errorf("%s calls: got %d, want %d", tool, n, want)
		}
	}
	checkInvariant(t, e, ex.ID)
}

const (
	childDB   = "TW_EXECUTIONS_CHILD_DB"
	childKey  = "TW_EXECUTIONS_CHILD_KEY"
	childExec = "TW_EXECUTIONS_CHILD_EXECUTION"
)

// The runner process dies (SIGKILL) while a step runs: a fresh runner finds the step
// running with nobody holding the execution, marks it interrupted and fails the
// execution; the completed step is not run again and the later one never runs.
func TestRunnerCrash(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "sleep")
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__sleep", `{"ms":3000}`),
		step("mt__echo", `{"message":"three"}`))

	// The sleep is long enough to kill the child in the middle of it, and short: the
	// test server's handler sleeps on after the kill and its cleanup waits for it.

	// The child is this test binary running only TestRunnerChild, on the same database.
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunnerChild$", "-test.v", "-test.count=1")
	// Its temporary folders (a test cluster's among them) go inside one of ours: it is
	// killed, so its own clean-up never runs.
	cmd.Env = append(os.Environ(), childDB+"="+e.url, childKey+"="+keyHex(e.key), childExec+"="+ex.ID, "TMPDIR="+dbtest.TempDir(t))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Wait until the second step's call is under way: it is running and the router
	// has made its audit row durable (which it does just before the server sees it).
	inFlight := func() bool {
		sts := e.steps(ex.ID)
		return slices.Equal(stepStatuses(sts), []string{"succeeded", "running", "pending"}) && sts[1].CallID != nil &&
			e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'call_id' = $1`, *sts[1].CallID) == 1
	}
	deadline := time.Now().Add(60 * time.Second)
	for !inFlight() {
		select {
		case err := <-exited:
			t.Fatalf("the child exited (%v) before its second step ran:\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child never ran the second step:\n%s", out.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: got %v, want killed", err)
	}
	exited <- nil // for the cleanup

	// The database notices the dead connection and drops its lock; nothing has
	// touched the execution since.
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database =
			(SELECT oid FROM pg_database WHERE datname = current_database())`) == 0
	}, "the killed runner's lock never went away")
	if got := e.get(ex.ID).Status; got != executions.Executing {
		t.Fatalf("after the crash: got %s, want executing", got)
	}

	e.run(e.service())
	got := e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	if !strings.Contains(got.Error, "interrupted: Toolwarden stopped while step 2 ran") {
		t.Errorf("error: got %q, want it to say step 2 was interrupted", got.Error)
	}
	sts := e.steps(ex.ID)
	if s := stepStatuses(sts); !slices.Equal(s, []string{"succeeded", "interrupted", "skipped"}) {
		t.Fatalf("steps: got %v, want succeeded, interrupted, skipped", s)
	}
	if !strings.Contains(sts[1].Error, "not run again") || sts[1].FinishedAt == nil {
		t.Errorf("step 2: got error %q, finished %v; want it marked interrupted", sts[1].Error, sts[1].FinishedAt)
	}
	e.flush()
	for _, tc := range []struct {
		tool, message string
		want          int
	}{{"mt__echo", "one", 1}, {"mt__sleep", "", 1}, {"mt__echo", "three", 0}} {
		q := `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_name = $1 AND payload->>'approval' = $2`
		args := []any{tc.tool, "execution:" + ex.ID}
		if tc.message != "" {
			q += ` AND payload->'arguments'->>'message' = $3`
			args = append(args, tc.message)
		}
		if n := e.count(q, args...); n != tc.want {
			t.Errorf("%s %s calls: got %d, want %d", tc.tool, tc.message, n, tc.want)
		}
	}
	e.bothTopics(ex.ID, "execution.failed", 1)
	e.sameTx(ex.ID, "execution.failed", "execution.interrupted")
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.interrupted' AND actor_kind = 'system'`, ex.ID); n != 1 {
		t.Errorf("interruption audit rows: got %d, want 1", n)
	}
	checkInvariant(t, e, ex.ID)
}

// A cancelled execution's running step is left to finish on its own; if its runner
// stops first, the next runner marks that step interrupted (audited) and the execution
// stays cancelled, where the step stayed running for good.
func TestCancelledStepOfAStoppedRunner(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
	// As a runner leaves it when it stops after a cancel: the first step running.
	for _, q := range []string{`UPDATE executions SET status = 'cancelled', finished_at = now() WHERE id = $1`,
		`UPDATE tool_calls SET status = 'running', started_at = now() WHERE execution_id = $1 AND position = 0`,
		`UPDATE tool_calls SET status = 'skipped' WHERE execution_id = $1 AND position = 1`} {
		if _, err := e.pool.Exec(e.ctx, q, ex.ID); err != nil {
			t.Fatal(err)
		}
	}
	e.run(e.service())
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return slices.Equal(stepStatuses(e.steps(ex.ID)), []string{"interrupted", "skipped"})
	}, "the cancelled execution's running step was never settled")
	if got := e.get(ex.ID).Status; got != executions.Cancelled {
		t.Errorf("execution: got %s, want it still cancelled", got)
	}
	if sts := e.steps(ex.ID); !strings.Contains(sts[0].Error, "after the execution was cancelled") || sts[0].FinishedAt == nil {
		t.Errorf("step 1: error %q, finished %v", sts[0].Error, sts[0].FinishedAt)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action = 'execution.step_interrupted' AND actor_kind = 'system'`, ex.ID); n != 1 {
		t.Errorf("audit rows: got %d, want 1", n)
	}
}

// A run job that failed as many times as it may try fails its execution, saying why,
// instead of leaving it executing while its runner lives (no sweep takes a live
// runner's execution over); an earlier attempt leaves it to River's retry. The runner
// here cannot record itself (its id is not one), so every attempt fails.
func TestRunJobGivesUp(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		t.Fatal(err)
	}
	broken, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: keys,
		Local: e.app.Local, Runner: "broken", RunnerID: "not-a-replica-id"})
	if err != nil {
		t.Fatal(err)
	}
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
	for _, q := range []string{`UPDATE executions SET status = 'executing' WHERE id = $1`,
		`UPDATE tool_calls SET status = 'running', started_at = now() WHERE execution_id = $1 AND position = 0`} {
		if _, err := e.pool.Exec(e.ctx, q, ex.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := executions.WorkRun(e.ctx, broken, ex.ID, 1, 3); err == nil {
		t.Fatal("the first attempt did not fail")
	}
	if got := e.get(ex.ID); got.Status != executions.Executing {
		t.Fatalf("after the first failed attempt: %s, want executing (River tries again)", got.Status)
	}
	if err := executions.WorkRun(e.ctx, broken, ex.ID, 3, 3); err == nil {
		t.Fatal("the last attempt did not fail")
	}
	got := e.get(ex.ID)
	if got.Status != executions.Failed || !strings.Contains(got.Error, "interrupted") {
		t.Errorf("after the last attempt: %s %q, want failed, its running step interrupted", got.Status, got.Error)
	}
	if s := stepStatuses(e.steps(ex.ID)); !slices.Equal(s, []string{"interrupted", "skipped"}) {
		t.Errorf("steps: %v", s)
	}

	// Between steps: failed with the cause.
	ex = e.create(e.admin, step("mt__echo", `{"message":"three"}`))
	if _, err := e.pool.Exec(e.ctx, `UPDATE executions SET status = 'executing' WHERE id = $1`, ex.ID); err != nil {
		t.Fatal(err)
	}
	_ = executions.WorkRun(e.ctx, broken, ex.ID, 3, 3)
	if got := e.get(ex.ID); got.Status != executions.Failed || !strings.Contains(got.Error, "could not run it: executions: record the runner") {
		t.Errorf("execution between steps: %s %q", got.Status, got.Error)
	}
}

// TestRunnerChild is TestRunnerCrash's runner process: it builds its own services on
// the parent's database and runs the runner until the execution ends (it is killed
// long before).
func TestRunnerChild(t *testing.T) {
	url := os.Getenv(childDB)
	if url == "" {
		t.Skip("the runner process of TestRunnerCrash")
	}
	id, raw, _ := strings.Cut(os.Getenv(childKey), ":")
	b, err := hex.DecodeString(raw)
	if err != nil {
		t.Fatal(err)
	}
	e := startOn(t, url, secrets.Key{ID: id, Bytes: b})
	e.run(nil)
	e.waitStatus(os.Getenv(childExec), executions.Success, 2*time.Minute)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A job whose execution another runner holds (the runner that just queued it, or one
// whose dead connection PostgreSQL has not yet noticed) waits and looks again instead
// of dropping the execution: it runs once the lock is free.
func TestBusyExecutionWaits(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	ex := e.create(e.admin, step("mt__echo", `{"message":"later"}`))
	conn, err := e.pool.Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(e.ctx, `SELECT pg_advisory_lock(hashtextextended($1, 7))`, ex.ID); err != nil {
		t.Fatal(err)
	}
	e.run(nil)
	time.Sleep(time.Second)
	if got := stepStatuses(e.steps(ex.ID)); !slices.Equal(got, []string{"pending"}) || e.get(ex.ID).Status != executions.Executing {
		t.Fatalf("while another holds it: steps %v, status %s; want pending and executing", got, e.get(ex.ID).Status)
	}
	if _, err := conn.Exec(e.ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, ex.ID); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Success, 30*time.Second)
}

// Many executions at once all finish: each running one holds a connection for its lock,
// and the runners are never more than the pool can serve besides (with pgx's default
// pool of 4 on two cores, four slow plans used to wait for connections forever).
func TestManyAtOnce(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "sleep")
	e.run(nil)
	var ids []string
	for range 12 {
		ids = append(ids, e.create(e.admin, step("mt__sleep", `{"ms":300}`)).ID)
	}
	for _, id := range ids {
		e.waitStatus(id, executions.Success, 60*time.Second)
	}
}

// A rollback runs only from a record as it was sealed: rewritten with hashes to match
// (its undo step changed), it is refused, not sealed anew. A step left interrupted is
// named among what nothing undoes, never undone (it may not have happened).
func TestRollbackGuards(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	failed := func() *executions.Execution {
		ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
			Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
			Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
		return e.get(ex.ID)
	}

	ex := failed()
	ex.Plan.Rollback[0].Arguments = json.RawMessage(`{"message":"planted"}`)
	h, err := ex.Plan.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE executions SET plan = $2, plan_hash = $3, approved_hash = $3 WHERE id = $1`, ex.ID, ex.Plan, h); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{}); !isCode(err, executions.CodeStale) {
		t.Fatalf("the rollback of a rewritten record: got %v, want it refused as stale", err)
	}
	if got := e.get(ex.ID).Status; got != executions.Failed {
		t.Fatalf("after the refused rollback: got %s, want failed", got)
	}

	ex = failed()
	if _, err := e.pool.Exec(e.ctx, `UPDATE tool_calls SET status = 'interrupted' WHERE execution_id = $1 AND phase = 'run' AND position = 0`, ex.ID); err != nil {
		t.Fatal(err)
	}
	_, rp, err := e.svc.PlanRollback(e.ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	// (Its second step, mt__fail, failed with the tool's own error: named too.)
	if len(rp.Steps) != 0 || len(rp.Missing) != 2 || !strings.Contains(rp.Missing[0], "step 1 (mt__echo), interrupted") ||
		!strings.Contains(rp.Missing[1], "step 2 (mt__fail), failed with the tool's own error") {
		t.Fatalf("the rollback of an interrupted step: got steps %v, not undone %q; want none, and both steps named", rp.Steps, rp.Missing)
	}
	if _, err := e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{}); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("rolling back only an interrupted step: got %v, want nothing to roll back, naming it", err)
	}
}
