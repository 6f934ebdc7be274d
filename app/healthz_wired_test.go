package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// /healthz names this replica's heartbeat, down once its beats stop reaching the
// database while the probes' own connections still work.
func TestHealthzSaysTheHeartbeatStopped(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{Config: func(c *app.Config) {
		c.Replica = replicas.Options{Every: 100 * time.Millisecond, DeadAfter: 300 * time.Millisecond}
	}})
	healthz := func() (status string, down []string, heartbeat string) {
		rec := httptest.NewRecorder()
		a.Web.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body struct {
			Status     string   `json:"status"`
			Down       []string `json:"down"`
			Components map[string]struct {
				Status string `json:"status"`
			} `json:"components"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			t.Fatalf("/healthz: %d %s", rec.Code, rec.Body)
		}
		return body.Status, body.Down, body.Components["replica_heartbeat"].Status
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { s, _, hb := healthz(); return s == "ok" && hb == "up" }, "/healthz never ok with the heartbeat up")
	a.StopBeats()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		s, down, hb := healthz()
		return s == "degraded" && hb == "down" && slices.Contains(down, "replica_heartbeat") && !slices.Contains(down, "database")
	}, "/healthz never says the heartbeat is down")
}
