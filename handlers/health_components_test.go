package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/system"
)

// /healthz adds what the process knows of its other parts (this replica's heartbeat, a
// component that panicked) to the system service's report: one down makes it degraded
// and is named; a name the system service reports itself keeps that report.
func TestHealthzAddsComponents(t *testing.T) {
	// A database nobody answers at: its own check says down, quickly.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sys := system.New(pool, false)
	defer sys.Close()
	h := handlers.HealthHandler{System: sys, Components: func() map[string]system.Component {
		return map[string]system.Component{
			"replica_heartbeat": {Status: system.Down, Problem: "beats fail"},
			"audit_search":      {Status: system.Up},
			"database":          {Status: system.Up},
		}
	}}
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/healthz", nil), rec)
	if err := h.Healthz(c); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status     string                      `json:"status"`
		Down       []string                    `json:"down"`
		Components map[string]system.Component `json:"components"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || got.Status != "degraded" {
		t.Errorf("answer: %d %q, want 200 degraded", rec.Code, got.Status)
	}
	if !slices.Equal(got.Down, []string{"database", "replica_heartbeat"}) {
		t.Errorf("down: %v, want the database (its own check) and the heartbeat", got.Down)
	}
	if c := got.Components["replica_heartbeat"]; c.Problem != "beats fail" {
		t.Errorf("heartbeat: %+v", c)
	}
	if c := got.Components["audit_search"]; c.Status != system.Up {
		t.Errorf("audit_search: %+v, want it reported up", c)
	}
}
