package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/services/usage"
)

// A planned step's arguments are masked where its plan recorded them secret, though the
// tool's definition no longer marks them (or the tool is gone), together with what the
// definition marks now and what looks like a credential.
func TestArgMaskerMasksPlannedSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.tool(toolSpec{server: f.server("s", true), name: "login",
		schema: `{"type":"object","properties":{"answer":{"type":"string"},"pin":{"type":"string","writeOnly":true},"conn":{"type":"object"}}}`})
	const token = "ghp_R4nd0mT0k3nV4lu3Th4tL00ksR34l1234567"
	args := json.RawMessage(`{"answer":"tulip-Otter","pin":"1234","conn":{"code":"c-9","host":"h"},"note":"` + token + `"}`)
	m := f.svc.NewArgMasker()
	got, err := m.MaskStep(f.ctx, id, "s__login", []string{"answer", "/conn/code"}, args)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "a redefined tool", got, `{"answer":"`+usage.Mask+`","pin":"`+usage.Mask+`","conn":{"code":"`+usage.Mask+`","host":"h"},"note":"`+usage.Mask+`"}`)
	// Without its plan's names, only what the definition marks now.
	got, err = m.Mask(f.ctx, id, "s__login", args)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "the definition alone", got, `{"answer":"tulip-Otter","pin":"`+usage.Mask+`","conn":{"code":"c-9","host":"h"},"note":"`+usage.Mask+`"}`)
	// A deleted tool: its plan's names still mask.
	got, err = m.MaskStep(f.ctx, "00000000-0000-4000-8000-000000000000", "gone__login", []string{"answer"}, args)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "a deleted tool", got, `{"answer":"`+usage.Mask+`","pin":"1234","conn":{"code":"c-9","host":"h"},"note":"`+usage.Mask+`"}`)
}
