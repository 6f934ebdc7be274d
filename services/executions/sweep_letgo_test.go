package executions_test

import (
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A live runner that lets its job go, snoozed for a rate limit or failed for River to
// retry, forgets itself and frees the execution's lock before River records the job's
// end: until then the job's row is still marked running, picked up long ago (a long
// plan). A sweep then leaves it alone: discarded, River's snooze or retry was lost
// and the job queued instead ran at once, the rate limit's wait (or the retry's
// backoff) skipped. Here River never records the end, so the row stays in that state.
func TestSweepLeavesAJobItsLiveRunnerJustLetGo(t *testing.T) {
	e := start(t)
	e.server("mt", true, "echo")
	n := 1 // a call a minute
	e.update("mt__echo", tools.Patch{RateLimit: &n})
	const runnerID = "17171717-1717-4171-8171-171717171717"
	runner := e.replica(runnerID, func(string) bool { return true })
	jobs := func(id, state string) int {
		return e.count(`SELECT count(*) FROM river_job WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text
			AND state::text LIKE $2`, id, state)
	}
	// River picked its job up ten minutes ago (its earlier steps took that long).
	pickedLongAgo := func(id string) {
		t.Helper()
		testkit.Exec(t, e.pool, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '10 minutes',
			attempted_by = ARRAY['replica-17171717'] WHERE kind = 'execution.run' AND args->>'execution_id' = $1::text`, id)
	}

	limited := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`))
	pickedLongAgo(limited.ID)
	var snooze *rivertype.JobSnoozeError
	if err := executions.WorkRun(e.ctx, runner, limited.ID, 1, 25); !errors.As(err, &snooze) {
		t.Fatalf("a job whose second step is refused for the rate limit: %v; want it snoozed", err)
	}

	failing := e.create(e.admin, step("mt__echo", `{"message":"three"}`))
	pickedLongAgo(failing.ID)
	e.failToStart(runner, failing.ID)

	// Created last, with no job at all: once the sweep queued it, it went past the others.
	dropped := e.create(e.admin, step("mt__echo", `{"message":"dropped"}`))
	testkit.Exec(t, e.pool, `DELETE FROM river_job WHERE args->>'execution_id' = $1::text`, dropped.ID)

	e.sweeper("18181818-1818-4181-8181-181818181818", func(string) bool { return true })
	testkit.WaitFor(t, 20*time.Second, func() bool { return jobs(dropped.ID, "%") == 1 },
		"the sweep never queued the execution that had no job")
	for what, id := range map[string]string{"snoozed for the rate limit": limited.ID, "failed for River to retry": failing.ID} {
		if all, running := jobs(id, "%"), jobs(id, "running"); all != 1 || running != 1 {
			t.Errorf("the job %s, its runner alive: %d run jobs (%d running) after a sweep; want its one, as River left it",
				what, all, running)
		}
	}
}
