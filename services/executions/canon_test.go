package executions_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/internal/canonjson/canonjsontest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/router"
)

// TestPlanHashPinned pins the plan hash (and so the rollback hash, the same function)
// over a varied corpus of arguments: approvals and seals store it, so the canonical form
// must never change. The digest was taken from the implementation that predates
// internal/canonjson; arguments that are not JSON must keep failing.
func TestPlanHashPinned(t *testing.T) {
	t.Parallel()
	all := sha256.New()
	undo := 0
	for i, raw := range canonjsontest.Corpus {
		step := func(args string) executions.PlannedStep {
			return executions.PlannedStep{Prepared: router.Prepared{
				Pin:  router.Pin{ToolID: "00000000-0000-0000-0000-000000000001", DefinitionHash: "abc", ConfigVersion: i, ServerIdentity: "id<&>"},
				Tool: "srv__tool", Server: "srv", Arguments: json.RawMessage(args), Effective: json.RawMessage(`{"fixed":"••••••"}`)}}
		}
		p := executions.Plan{Steps: []executions.PlannedStep{step(raw)}}
		rb := step(`{"undo":true}`)
		rb.Undoes = &undo
		p.Rollback = []executions.PlannedStep{rb}
		h, err := p.Hash()
		if err != nil {
			fmt.Fprintf(all, "%d error\n", i)
			continue
		}
		fmt.Fprintf(all, "%d %x\n", i, h)
	}
	const want = "e74f1008284cf80b06115b91e3b1b724458f9cde21c4d6f284c3f2d123b71f8c"
	if got := hex.EncodeToString(all.Sum(nil)); got != want {
		t.Fatalf("plan hashes over the corpus: got digest %s, want %s", got, want)
	}
}
