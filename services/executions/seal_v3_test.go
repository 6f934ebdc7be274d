package executions_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// setStoredLevel rewrites, as whoever can write the database, the risk level stored for
// step position of execution id's plan.
func (e *env) setStoredLevel(id string, position int, level risk.Level) {
	e.t.Helper()
	testkit.Exec(e.t, e.pool, `UPDATE executions SET plan = jsonb_set(plan, ARRAY['steps', $2::int::text, 'risk', 'level'], to_jsonb($3::text)) WHERE id = $1`,
		id, position, string(level))
}

// An approved MEDIUM step whose stored risk level is raised in the database (so that a
// later rise of its tool to HIGH would match it) is refused as altered before it runs;
// the same plan left as it was runs.
func TestSealCoversRiskLevel(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	altered := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
	kept := e.create(alice, step("mt__add", `{"a":3,"b":4}`))
	for _, ex := range []*executions.Execution{altered, kept} {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash()); err != nil {
			t.Fatal(err)
		}
	}
	e.setStoredLevel(altered.ID, 0, risk.High)
	e.run(nil)
	got := e.waitEnded(altered.ID, 30*time.Second)
	if got.Status != executions.Failed || !strings.Contains(got.Error, sealMismatch) {
		t.Fatalf("run with the step's level raised in the database: got %s (%q), want failed on the seal mismatch", got.Status, got.Error)
	}
	if st := e.steps(altered.ID); st[0].Status != executions.StepSkipped {
		t.Errorf("its step: got %s, want skipped (never run)", st[0].Status)
	}
	e.wantAudits(altered.ID, map[string]int{"execution.plan_hash_mismatch": 1})
	if got := e.waitEnded(kept.ID, 30*time.Second); got.Status != executions.Success {
		t.Fatalf("the plan left as it was: got %s (%q), want success", got.Status, got.Error)
	}
}

// The attack end to end: a LOW step (approved by policy) stored as MEDIUM in the
// database, then its server no longer trusted, which makes it MEDIUM without a new
// configuration version. The level compared with would hide the rise; the seal finds
// the rewrite. The same plan left as it was is refused as stale, its risk having risen.
func TestSealCoversRiskLevelBeforeRise(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	if p, err := e.prepared("mt__echo", sampleArgs("mt__echo")); err != nil || p.Risk.Level != risk.Low {
		t.Fatalf("mt__echo on a trusted server: %+v, %v; want low risk", p, err)
	}
	altered := e.create(e.admin, step("mt__echo", `{"message":"one"}`))
	kept := e.create(e.admin, step("mt__echo", `{"message":"two"}`))
	for _, ex := range []*executions.Execution{altered, kept} {
		if ex.Status != executions.Executing || ex.Approval != "policy" {
			t.Fatalf("the LOW plan: %s approved by %q, want executing by policy", ex.Status, ex.Approval)
		}
	}
	e.setStoredLevel(altered.ID, 0, risk.Medium)
	off := false
	if _, err := e.reg.UpdateServer(e.ctx, audit.System, e.tool("mt__echo").ServerID, registry.Patch{Trusted: &off}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		p, err := e.prepared("mt__echo", sampleArgs("mt__echo"))
		return err == nil && p.Risk.Level == risk.Medium
	}, "the router never saw mt__echo become medium")
	e.run(nil)
	got := e.waitEnded(altered.ID, 30*time.Second)
	if got.Status != executions.Failed || !strings.Contains(got.Error, sealMismatch) {
		t.Fatalf("run with the step's level raised in the database: got %s (%q), want failed on the seal mismatch", got.Status, got.Error)
	}
	if st := e.steps(altered.ID); st[0].Status != executions.StepSkipped {
		t.Errorf("its step: got %s, want skipped (never run)", st[0].Status)
	}
	got = e.waitEnded(kept.ID, 30*time.Second)
	if got.Status != executions.Failed || !strings.Contains(got.Error, "medium risk now, low when the plan was made") {
		t.Fatalf("the plan left as it was: got %s (%q), want failed as its risk rose", got.Status, got.Error)
	}
}

// sealV2 is an execution's seal as the release before v3 made it (built here from its
// format, not from the package's code): the length-prefixed id, hashes, requester and
// conversation, and the SHA-256 of each phase's steps' secret argument names.
func sealV2(t *testing.T, key secrets.Key, ex *executions.Execution, approved, rollback []byte) []byte {
	t.Helper()
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("toolwarden execution seal v2\x00")
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	optional := func(id *string) {
		if id == nil {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		field([]byte(uuidtext.Canonicalize(*id)))
	}
	field([]byte(ex.ID))
	field(ex.PlanHash)
	field(approved)
	field(rollback)
	optional(ex.RequestedBy)
	optional(ex.RequestedToken)
	field([]byte(ex.RequesterKind))
	field([]byte(ex.RequesterName))
	field([]byte(ex.RequesterRole))
	field([]byte(ex.ConversationID))
	names := func(sts []executions.PlannedStep) [][]string {
		out := make([][]string, len(sts))
		for i, st := range sts {
			out[i] = slices.Compact(slices.Sorted(slices.Values(st.SecretArgs)))
			if out[i] == nil {
				out[i] = []string{}
			}
		}
		return out
	}
	var undo []executions.PlannedStep
	if ex.RollbackPlan != nil {
		undo = ex.RollbackPlan.Steps
	}
	raw, err := json.Marshal([][][]string{names(ex.Plan.Steps), names(ex.Plan.Rollback), names(undo)})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(raw)
	field(h[:])
	return keys.MAC(b)
}

// Executions sealed by the release before v3 go on: one planned then is approved (and
// sealed v3 by its approval), one approved then runs.
func TestSealV2StillAccepted(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)

	planned := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
	v2 := sealV2(t, e.key, e.get(planned.ID), nil, nil)
	testkit.Exec(t, e.pool, `UPDATE executions SET seal = $2 WHERE id = $1`, planned.ID, v2)
	if _, err := e.svc.Confirm(e.ctx, e.admin, planned.ID, "", planned.Hash()); err != nil {
		t.Fatalf("confirm of a plan sealed v2: %v", err)
	}
	if got := e.get(planned.ID).Seal; string(got) == string(v2) {
		t.Error("its approval left the v2 seal")
	}

	approved := e.create(alice, step("mt__add", `{"a":3,"b":4}`))
	if _, err := e.svc.Confirm(e.ctx, e.admin, approved.ID, "", approved.Hash()); err != nil {
		t.Fatal(err)
	}
	cur := e.get(approved.ID)
	testkit.Exec(t, e.pool, `UPDATE executions SET seal = $2 WHERE id = $1`, approved.ID, sealV2(t, e.key, cur, cur.ApprovedHash, cur.RollbackHash))

	e.run(nil)
	for _, id := range []string{planned.ID, approved.ID} {
		if got := e.waitEnded(id, 30*time.Second); got.Status != executions.Success {
			t.Errorf("execution sealed v2: got %s (%q), want success", got.Status, got.Error)
		}
	}
}

// A key rotation seals a v2 seal made with the retiring key again, as v3: the
// execution runs under the new key, and a risk level rewritten after that is found.
func TestResealV2AsV3(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	altered := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
	kept := e.create(alice, step("mt__add", `{"a":3,"b":4}`))
	for _, ex := range []*executions.Execution{altered, kept} {
		if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash()); err != nil {
			t.Fatal(err)
		}
		cur := e.get(ex.ID)
		testkit.Exec(t, e.pool, `UPDATE executions SET seal = $2 WHERE id = $1`, ex.ID, sealV2(t, e.key, cur, cur.ApprovedHash, cur.RollbackHash))
	}
	k1, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(k1, e.key)
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(input, seal []byte) string {
		for _, k := range []secrets.Key{k1, e.key} {
			if one, err := secrets.NewKeyring(k); err == nil && one.VerifyMAC(input, seal) {
				return one.PrimaryID()
			}
		}
		return ""
	}
	usage, err := executions.SealUsage(e.ctx, e.pool, keyOf, 0)
	if err != nil || usage[e.key.ID] != 2 {
		t.Fatalf("seal usage before the reseal: %v, %v; want the two v2 seals under the old key", usage, err)
	}
	if n, err := executions.Reseal(e.ctx, e.pool, keys, keyOf); err != nil || n != 2 {
		t.Fatalf("reseal: got %d, %v; want the two v2 seals sealed again", n, err)
	}
	usage, err = executions.SealUsage(e.ctx, e.pool, keyOf, 0)
	if err != nil || usage[k1.ID] != 2 || usage[e.key.ID] != 0 {
		t.Fatalf("seal usage after the reseal: %v, %v; want both under the new key", usage, err)
	}
	e.setStoredLevel(altered.ID, 0, risk.High)
	// A runner holding only the new key: the seals verify under it.
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: mustKeyring(t, k1),
		Local: e.app.Local, Previewer: e.app.Previewer(), Display: e.app.BuiltinDisplay})
	if err != nil {
		t.Fatal(err)
	}
	e.run(svc)
	if got := e.waitEnded(altered.ID, 30*time.Second); got.Status != executions.Failed || !strings.Contains(got.Error, sealMismatch) {
		t.Errorf("resealed, then its level raised: got %s (%q), want failed on the seal mismatch", got.Status, got.Error)
	}
	if got := e.waitEnded(kept.ID, 30*time.Second); got.Status != executions.Success {
		t.Errorf("resealed and left as it was: got %s (%q), want success", got.Status, got.Error)
	}
}

func mustKeyring(t *testing.T, k ...secrets.Key) *secrets.Keyring {
	t.Helper()
	keys, err := secrets.NewKeyring(k...)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
