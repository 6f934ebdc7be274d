package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestStoppedJudgingDoesNotHang: after stop, waiting for any tool returns (a tool the
// stopped workers never reached has its done channel closed, and errStopped), and
// result reports the stop instead of passing an unjudged tool as clean.
func TestStoppedJudgingDoesNotHang(t *testing.T) {
	t.Parallel()
	ts := make([]toolstate.Pending, 5000)
	for i := range ts {
		ts[i] = toolstate.Pending{ID: fmt.Sprint(i), Status: toolstate.Discovered, Def: schema.Tool{Name: fmt.Sprintf("tool_%d", i),
			Description: "Does a thing for the tests and returns what it did.", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	}
	j := startJudging(ts, nil)
	j.stop()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := range ts {
			j.verdict(i)
		}
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("verdict waits for a tool the stopped workers never judged")
	}
	if _, err := j.result("system"); !errors.Is(err, errStopped) {
		t.Fatalf("result of a stopped validation: %v, want errStopped", err)
	}
}
