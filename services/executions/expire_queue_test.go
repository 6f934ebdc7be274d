package executions_test

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
)

// The approval expiry runs on the maintenance queue, not behind the executions' steps,
// and with a timeout (River rescues a job left running past it).
func TestExpiryRunsOnTheMaintenanceQueue(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.run(nil)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		return testkit.Count(t, e.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.expire'`) > 0
	}, "the expiry job")
	if n := testkit.Count(t, e.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.expire' AND queue <> 'maintenance'`); n != 0 {
		t.Fatalf("%d expiry jobs on another queue than maintenance", n)
	}
}
