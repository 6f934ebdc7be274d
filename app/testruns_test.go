package app_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/testkit"
)

// A page following a test run another replica holds keeps a watch open there. A
// watch held open a while and then cut (a proxy's idle timeout) is no sign of the run
// being lost, however often it happens over the run's life; only watches that keep
// failing at once are, and then the run is announced ended on its topic.
func TestRemoteRunWatch(t *testing.T) {
	a := apptest.Start(t, nil)
	const hold = 50 * time.Millisecond
	// other stands for the replica holding the run: each watch is held for hold, or
	// not at all, and then its connection is cut without an answer.
	other := func(t *testing.T, held bool, watches *atomic.Int32) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/watch") {
				http.NotFound(w, r)
				return
			}
			if held {
				time.Sleep(hold) // the watch is held open that long (what is tested), not a wait
			}
			watches.Add(1)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		}))
		t.Cleanup(srv.Close)
		var id string
		if err := a.Pool.QueryRow(t.Context(), `INSERT INTO replicas (id, name, address, host, pid)
			VALUES (gen_random_uuid(), 'other', $1, 'test', 1) RETURNING id::text`, srv.URL).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	ended := func(t *testing.T, replica, run string) int {
		return a.Count(t, `SELECT count(*) FROM events WHERE topic = $1 AND kind = 'run.ended'`, handlers.TestRunTopic(run, replica))
	}

	t.Run("held watches cut", func(t *testing.T) {
		var watches atomic.Int32
		replica, run := other(t, true, &watches), uuid.NewString()
		stop := a.RemoteRuns(t, hold, time.Millisecond).Watch(replica, run)
		defer stop()
		// Half again as many cut watches as would take a run for lost when in a row.
		testkit.WaitFor(t, time.Minute, func() bool {
			return watches.Load() >= 15 || ended(t, replica, run) > 0
		}, "the run's replica was not asked again")
		if n := ended(t, replica, run); n != 0 {
			t.Fatalf("after %d watches held and cut the run was announced ended (%d events); want it followed still", watches.Load(), n)
		}
	})
	t.Run("owner's host gone", func(t *testing.T) {
		// The owner's host died or was cut off: the watch is held and never answered or
		// reset. Once its replica stops beating, the run is announced ended, without
		// waiting minutes for TCP to give up.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		var replica string
		if err := a.Pool.QueryRow(t.Context(), `INSERT INTO replicas (id, name, address, host, pid)
			VALUES (gen_random_uuid(), 'silent', $1, 'test', 1) RETURNING id::text`, srv.URL).Scan(&replica); err != nil {
			t.Fatal(err)
		}
		run := uuid.NewString()
		stop := a.RemoteRuns(t, time.Hour, time.Millisecond).Watch(replica, run)
		defer stop()
		if _, err := a.Pool.Exec(t.Context(), `UPDATE replicas SET seen_at = now() - interval '1 hour' WHERE id::text = $1`, replica); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, time.Minute, func() bool { return ended(t, replica, run) > 0 },
			"a run whose replica stopped beating while its watch was held was never announced ended")
	})
	t.Run("failing at once", func(t *testing.T) {
		var watches atomic.Int32
		replica, run := other(t, false, &watches), uuid.NewString()
		stop := a.RemoteRuns(t, time.Hour, time.Millisecond).Watch(replica, run)
		defer stop()
		testkit.WaitFor(t, time.Minute, func() bool { return ended(t, replica, run) > 0 },
			"a run whose watches all fail at once was never announced ended")
		if n := watches.Load(); n != 10 {
			t.Errorf("announced ended after %d watches, want 10", n)
		}
	})
}
