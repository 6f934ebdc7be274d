package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// judgingWorkers counts the goroutines validating a discovery's definitions.
func judgingWorkers() int { return testkit.CountGoroutines("tools.startJudging") }

// TestFailedDiscoveryStopsJudging: a discovery that fails after its definitions started
// being validated (here its COPY of new tools, refused for a NUL byte in a name) stops
// the validation: no worker goes on through the thousands of tools still pending once
// StoreDiscovery has returned, beside the discovery that retries it.
// Not parallel: it counts every goroutine of the process.
func TestFailedDiscoveryStopsJudging(t *testing.T) {
	f := newFixture(t)
	srv := f.server("many", false)
	props := map[string]any{}
	for k := range 20 {
		props[fmt.Sprintf("field_%d", k)] = map[string]any{"type": "string", "description": fmt.Sprintf("The value of field %d, as text.", k)}
	}
	in, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	desc := strings.Repeat("Reads the records the server keeps and returns what they hold. ", 8)
	waiting := make([]toolstate.Pending, 20000)
	for i := range waiting {
		name := fmt.Sprintf("tool_%05d", i)
		waiting[i] = toolstate.Pending{ID: uuid.NewString(), Status: toolstate.Discovered, Hash: "hash-" + name,
			Def: schema.Tool{Name: name, Description: desc, InputSchema: in}}
	}
	raw, _ := json.Marshal(map[string]any{"name": "bad"})
	bad := tools.NewTool{ID: uuid.NewString(), Name: "bad\x00name", Definition: tools.Definition{Description: desc,
		InputSchema: in, Raw: raw, Hash: "hash-bad"}}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", New: []tools.NewTool{bad}, Waiting: waiting})
		return err
	})
	if err == nil {
		t.Fatal("the discovery stored a name with a NUL byte")
	}
	// The workers are gone when StoreDiscovery returns; the moment allowed is for a
	// worker that has just finished to leave the stack.
	returned := time.Now()
	left := judgingWorkers()
	for left > 0 && time.Since(returned) < 50*time.Millisecond {
		time.Sleep(time.Millisecond)
		left = judgingWorkers()
	}
	if left > 0 {
		// Let them finish, so that they do not outlive the test, and say for how long.
		for judgingWorkers() > 0 && time.Since(returned) < time.Minute {
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("%d judging goroutines still running after the discovery failed (%v); they ran %v more", left, err, time.Since(returned))
	}
}
