package router_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// Close cancels the runs still going and forgets every run: their timers (ten minutes
// for an ended run's result, the idle one of a running run) held them, and the router,
// after the App stopped. A run started after Close ends at once and is not kept.
func TestRunsClose(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("mt", true, "echo", "sleep")
	e.tool("mt__sleep")
	runs := router.NewRuns(e.r)
	ended := runAs(t, runs, "alice", "mt__echo", `{"message":"kept"}`)
	long := runs.Start(router.Call{Tool: "mt__sleep", Arguments: json.RawMessage(`{"ms":600000}`), Actor: audit.Actor{Kind: audit.ActorUser, Name: "alice"},
		Role: auth.RoleAdmin, Source: router.SourceTestPanel, Approval: router.Approval{Confirmed: true, Phrase: "mt__sleep"}}, "tool-id")
	if got := kept(runs, []*router.Run{ended, long}); !got[0] || !got[1] {
		t.Fatalf("kept before Close: %v", got)
	}
	began := time.Now()
	runs.Close()
	select {
	case <-long.Done():
		if _, _, err, _ := long.State(); err == nil {
			t.Error("the running run ended without an error: want it cancelled")
		}
	default:
		t.Error("Close returned before the running run ended")
	}
	if d := time.Since(began); d > 4*time.Second {
		t.Errorf("Close took %s: the run's cancel did not end it", d)
	}
	if got := kept(runs, []*router.Run{ended, long}); got[0] || got[1] {
		t.Errorf("kept after Close: %v, want neither", got)
	}
	late := runs.Start(router.Call{Tool: "mt__echo", Arguments: json.RawMessage(`{"message":"late"}`), Actor: audit.Actor{Kind: audit.ActorUser, Name: "alice"},
		Role: auth.RoleAdmin, Source: router.SourceTestPanel}, "tool-id")
	if !late.Wait(10 * time.Second) {
		t.Fatal("a run started after Close did not end")
	}
	if _, ok := runs.Lookup(late.ID); ok {
		t.Error("a run started after Close is kept")
	}
}
