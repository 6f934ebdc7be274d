package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// The sweep puts right the record of a terminal of this replica that another replica
// ended as orphaned before the terminal's own end was written: the record then says it
// exited, with its exit code, not that it ended with its replica.
func TestTerminalSweepRecordsALateEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, &apptest.Options{Builtin: true})
	dir, err := a.Builtin.Workspace("conv-late")
	if err != nil {
		t.Fatal(err)
	}
	term, err := a.Terminals.Start(builtin.TerminalCaller{UserID: "u1", UserName: "carol"}, "conv-late", dir,
		"while [ ! -e go ]; do sleep 0.05; done; exit 7", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Another replica took this one for stopped (it was not seen for a while).
	if _, err := a.Pool.Exec(ctx, `UPDATE terminals SET ended_at = now(), ended_reason = 'replica_stopped' WHERE id = $1`, term.ID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	<-term.Done()
	testkit.WaitFor(t, 20*time.Second, func() bool {
		rec, err := a.Terminals.Store().Get(ctx, term.ID)
		return err == nil && rec.EndedReason == "exited" && rec.ExitCode != nil && *rec.ExitCode == 7
	}, "the record of the command that ended late still says it ended with its replica")
}
