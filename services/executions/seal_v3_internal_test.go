package executions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// sealFixture is an execution with every field a seal covers set, its steps at
// different risk levels in each phase (the plan's, its undo steps, the rollback's).
func sealFixture() (*Execution, *Plan) {
	by, tok := "0B9D2C1E-5F7A-4E3B-9C8D-1A2B3C4D5E6F", "6f1e2d3c-4b5a-4968-8776-655443322110"
	st := func(tool string, level risk.Level, secrets ...string) PlannedStep {
		return PlannedStep{Prepared: router.Prepared{Pin: router.Pin{ToolID: "t-" + tool}, Tool: tool,
			Risk: risk.Decision{Level: level, Why: "because"}}, SecretArgs: secrets}
	}
	ex := &Execution{ID: "11111111-2222-3333-4444-555555555555", RequestedBy: &by, RequestedToken: &tok,
		RequesterKind: "user", RequesterName: "alice", RequesterRole: "tool_user", ConversationID: "c-1",
		PlanHash: bytes.Repeat([]byte{1}, 32),
		Plan:     Plan{Steps: []PlannedStep{st("mt__add", risk.Medium, "b", "a", "b"), st("mt__echo", risk.Low)}, Rollback: []PlannedStep{st("mt__fail", risk.Low)}}}
	return ex, &Plan{Steps: []PlannedStep{st("mt__echo", risk.High, "message")}}
}

// The v2 seal's input is the one the previous release MACed, byte for byte: seals it
// wrote must still verify (the digest was taken from that release's sealInputV2).
func TestSealInputV2Unchanged(t *testing.T) {
	ex, rp := sealFixture()
	sum := sha256.Sum256(sealInputV2(ex, bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32), rp))
	if got, want := hex.EncodeToString(sum[:]), "461ce32d53bbb07b3474aeda78d2d5d8a18d0e48b95d366ec52d3115ae0a907d"; got != want {
		t.Fatalf("v2 seal input digest: got %s, want %s", got, want)
	}
}

// A v3 seal covers each step's risk level in every phase (the plan's steps, its own undo
// steps, the rollback's), and is told from a v2 seal of the same record.
func TestSealInputV3CoversRiskLevels(t *testing.T) {
	approved, rollback := bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	ex, rp := sealFixture()
	base := sealInputV3(ex, approved, rollback, rp)
	if bytes.Equal(base, sealInputV2(ex, approved, rollback, rp)) {
		t.Fatal("the v3 seal input is the v2 one")
	}
	for name, alter := range map[string]func(ex *Execution, rp *Plan){
		"run step":      func(ex *Execution, _ *Plan) { ex.Plan.Steps[0].Risk.Level = risk.High },
		"undo step":     func(ex *Execution, _ *Plan) { ex.Plan.Rollback[0].Risk.Level = risk.Medium },
		"rollback step": func(_ *Execution, rp *Plan) { rp.Steps[0].Risk.Level = risk.Low },
	} {
		ex, rp := sealFixture()
		alter(ex, rp)
		if bytes.Equal(sealInputV3(ex, approved, rollback, rp), base) {
			t.Errorf("%s: a changed risk level leaves the v3 seal input as it was", name)
		}
	}
}
