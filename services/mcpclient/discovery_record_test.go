package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
)

// disableOnInsert makes every tool stored on e's database disabled at once, as if a
// person disabled each one while its discovery ran: the discovery then loses the race
// to enable it by the server's auto-enable policy on every attempt
// (toolstate.Moved, a conflict fault).
func disableOnInsert(t *testing.T, e *env) {
	t.Helper()
	testkit.Exec(t, e.pool, `
		CREATE FUNCTION disable_tool() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			UPDATE mcp_tools SET status = 'disabled' WHERE id = NEW.id;
			RETURN NULL;
		END $$;
		CREATE TRIGGER disable_tool AFTER INSERT ON mcp_tools FOR EACH ROW EXECUTE FUNCTION disable_tool();`)
}

// failedRuns counts server id's failed discovery runs with trigger.
func (e *env) failedRuns(t *testing.T, id, trigger string) int {
	t.Helper()
	return testkit.Count(t, e.pool, `SELECT count(*) FROM discovery_runs WHERE server_id = $1 AND status = 'failed' AND trigger = $2`, id, trigger)
}

// A session's discovery that fails with a fault other than the registry's own refusals
// (here a tool moved meanwhile, on every attempt) is a failed run on the server's page,
// and its caller gets the conflict.
func TestDiscoveryConflictRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	disableOnInsert(t, e)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "raced"})
	sv := e.create(t, registry.Spec{Name: "raced", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, AutoEnable: true})
	if got := e.failedDiscovery(t, sv.ID); !strings.Contains(got, "changed meanwhile") {
		t.Fatalf("failed run's error: %q, want the conflict", got)
	}
	_, err := e.mgr.Discover(context.Background(), sv.ID, audit.System)
	if fault.KindOf(err) != fault.KindConflict {
		t.Fatalf("discover: %v (kind %v), want a conflict", err, fault.KindOf(err))
	}
	if n := e.failedRuns(t, sv.ID, "manual"); n != 1 {
		t.Fatalf("failed manual runs: %d, want 1", n)
	}
}

// DiscoverOnce (the import's) records such a failure too.
func TestDiscoverOnceConflictRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	disableOnInsert(t, e)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "raced-once"})
	// Disabled: no session of the manager's discovers it meanwhile.
	sv := e.create(t, registry.Spec{Name: "raced-once", Type: registry.TypeStreamableHTTP, URL: hs.URL(), AutoEnable: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System)
	if fault.KindOf(err) != fault.KindConflict {
		t.Fatalf("DiscoverOnce: %v (kind %v), want a conflict", err, fault.KindOf(err))
	}
	runs := e.runs(t, sv.ID)
	if len(runs) != 1 || runs[0].Status != "failed" || runs[0].Error == nil || !strings.Contains(*runs[0].Error, "changed meanwhile") {
		t.Fatalf("runs: %+v, want one failed run saying the tool changed meanwhile", runs)
	}
}

// A list refused for too many tools is stored as one failed run, by the registry: the
// discovery records no second one, whether a session's or DiscoverOnce.
func TestDiscoveryTooManyToolsOneRun(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "crowded"})
	sv := e.create(t, registry.Spec{Name: "crowded", Type: registry.TypeStreamableHTTP, URL: hs.URL()})
	// The server holds as many tools as it may, none of them listed now.
	testkit.Exec(t, e.pool, `INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash, status, available)
		SELECT gen_random_uuid(), $1, 'old-' || g, '{}', 'h' || g, 'disabled', false FROM generate_series(1, $2::int) g`,
		sv.ID, registry.MaxToolsPerServer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System); !errors.Is(err, registry.ErrTooManyTools) {
		t.Fatalf("DiscoverOnce: %v, want ErrTooManyTools", err)
	}
	if n := e.failedRuns(t, sv.ID, "import"); n != 1 {
		t.Fatalf("failed import runs: %d, want 1", n)
	}
	if _, err := e.reg.SetEnabled(ctx, audit.System, sv.ID, true); err != nil {
		t.Fatal(err)
	}
	e.mgr.Refresh(ctx, sv.ID)
	testkit.WaitFor(t, 30*time.Second, func() bool { return e.failedRuns(t, sv.ID, "connect") > 0 }, "the connect discovery was not recorded")
	// A manual discovery waits for the connect one to end, and its own run is written
	// before it returns: the counts are final.
	if _, err := e.mgr.Discover(ctx, sv.ID, audit.System); !errors.Is(err, registry.ErrTooManyTools) {
		t.Fatalf("discover: %v, want ErrTooManyTools", err)
	}
	if c, m := e.failedRuns(t, sv.ID, "connect"), e.failedRuns(t, sv.ID, "manual"); c != 1 || m != 1 {
		t.Fatalf("failed runs: %d connect and %d manual, want one each", c, m)
	}
}

// A list superseded by a change of the server's settings, and one of a server deleted
// meanwhile, are not recorded by DiscoverOnce: the registry stored the first, and the
// second has nowhere to go. The change is made while the server holds its answer to
// tools/list.
func TestDiscoverOnceSupersededOrDeleted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(e *env, id string) error
		want   error
		runs   int
	}{
		{"superseded", func(e *env, id string) error {
			timeout := 45_000
			_, err := e.reg.UpdateServer(context.Background(), audit.System, id, registry.Patch{TimeoutMS: &timeout})
			return err
		}, registry.ErrDiscoverySuperseded, 1},
		{"deleted", func(e *env, id string) error {
			return e.reg.DeleteServer(context.Background(), audit.System, id)
		}, registry.ErrNotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, nil)
			asked, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			u := interposed(t, &mcptest.Options{Name: "held"}, func(_ http.ResponseWriter, _ *http.Request, method string, _ json.RawMessage, _ []byte) bool {
				if method == "tools/list" {
					once.Do(func() { close(asked) })
					<-release
				}
				return false
			})
			sv := e.create(t, registry.Spec{Name: "held", Type: registry.TypeStreamableHTTP, URL: u})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := e.mgr.DiscoverOnce(ctx, sv.ID, "import", audit.System)
				done <- err
			}()
			select {
			case <-asked:
			case err := <-done:
				t.Fatalf("DiscoverOnce ended (%v) before listing tools", err)
			}
			if err := tc.change(e, sv.ID); err != nil {
				close(release)
				t.Fatal(err)
			}
			close(release)
			if err := <-done; !errors.Is(err, tc.want) {
				t.Fatalf("DiscoverOnce: %v, want %v", err, tc.want)
			}
			if n := testkit.Count(t, e.pool, `SELECT count(*) FROM discovery_runs WHERE server_id = $1`, sv.ID); n != tc.runs {
				t.Fatalf("runs: %d, want %d", n, tc.runs)
			}
		})
	}
}
