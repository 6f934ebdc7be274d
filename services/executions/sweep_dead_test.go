package executions_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
)

// A replica that recorded itself as an execution's runner and died less than a minute
// after picking its job up leaves that job's row marked running (River never rescues a
// job of no timeout). The sweep finalizes it however young, as it queues the execution
// again (or fails it, a step having been left running): kept, it counted as working the
// execution for good, and once a live runner later dropped the execution (its last
// attempt could fail nothing, the database being down), nothing queued it again.
func TestSweepFinalizesAYoungJobOfADeadRunner(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	const deadID, liveID, sweeperID = "12121212-1212-4212-8212-121212121212", "34343434-3434-4434-8434-343434343434",
		"56565656-5656-4656-8656-565656565656"
	jobs := func(id, state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text = $2`, id, state)
	}
	// Picked up by the dead replica 20 s ago, which recorded itself (and, for the second,
	// started its step).
	pickedByDead := func(message string, stepRunning bool) string {
		t.Helper()
		ex := e.create(e.admin, step("mt__echo", `{"message":"`+message+`"}`))
		testkit.Exec(t, e.pool, `UPDATE executions SET status = 'executing', runner = 'replica-12121212', runner_id = $2
			WHERE id = $1`, ex.ID, deadID)
		testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '20 seconds',
			attempted_by = ARRAY['replica-dead'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, ex.ID)
		if stepRunning {
			testkit.Exec(t, e.pool, `UPDATE tool_calls SET status = 'running', started_at = now() WHERE execution_id = $1`, ex.ID)
		}
		if n := jobs(ex.ID, "running"); n != 1 {
			t.Fatalf("%d run jobs running, want 1", n)
		}
		return ex.ID
	}
	between := pickedByDead("between steps", false)
	mid := pickedByDead("mid-step", true)

	svc := e.sweeper(sweeperID, func(id string) bool { return id != deadID })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs(between, "available") == 1 },
		"the sweep never queued the execution whose runner died")
	if n := jobs(between, "running"); n != 0 {
		t.Fatalf("the dead runner's job, picked up 20 s ago, is still marked running (%d) after the sweep queued another", n)
	}
	e.waitStatus(mid, executions.Failed, 20*time.Second)
	if n := jobs(mid, "running"); n != 0 {
		t.Fatalf("the dead runner's job of the execution failed as interrupted is still marked running (%d)", n)
	}

	// A live replica picks the new job up and records itself; its last attempt fails as
	// the database is down, so nothing fails the execution and River discards the job.
	testkit.Exec(t, e.pool, `UPDATE executions SET runner = 'replica-34343434', runner_id = $2 WHERE id = $1`, between, liveID)
	testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'discarded', finalized_at = now(), attempt = 3
		WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text AND state = 'available'`, between)
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs(between, "available") == 1 },
		"the sweep never queued again the execution its live runner dropped")
	e.run(svc)
	e.waitStatus(between, executions.Success, 30*time.Second)
}
