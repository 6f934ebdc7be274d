package executions_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
)

const sealMismatch = "its record was altered after it was planned or approved (its seal does not match"

// An approved plan whose requester is rewritten in the database (to an administrator,
// whose role the runner would check instead) is refused as altered when it runs: the
// seal covers who asked for it.
func TestSealCoversRequesterAtRun(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	ex := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash()); err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, e.pool, `UPDATE executions SET requested_by = $2 WHERE id = $1`, ex.ID, e.admin.Actor.ID)
	e.run(nil)
	got := e.waitEnded(ex.ID, 30*time.Second)
	if got.Status != executions.Failed || !strings.Contains(got.Error, sealMismatch) {
		t.Fatalf("run with the requester rewritten: got %s (%q), want failed on the seal mismatch", got.Status, got.Error)
	}
	if st := e.steps(ex.ID); st[0].Status != executions.StepSkipped {
		t.Errorf("its step: got %s, want skipped", st[0].Status)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.plan_hash_mismatch": 1})
}

// A plan awaiting approval whose conversation, requester kind, role or name is
// rewritten in the database is cancelled as altered when confirmed.
func TestSealCoversRequesterAtConfirm(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	for _, tc := range []struct{ name, set string }{
		{"conversation_id", `conversation_id = 'user-' || $2::text`},
		{"requester_kind", `requester_kind = 'system'`},
		{"requester_role", `requester_role = 'admin'`},
		{"requester_name", `requester_name = 'boss'`},
		{"requested_by", `requested_by = $2::text::uuid`},
	} {
		ex := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
		testkit.Exec(t, e.pool, `UPDATE executions SET `+tc.set+` WHERE id = $1 AND $2::text <> ''`, ex.ID, e.admin.Actor.ID)
		_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash())
		if !isCode(err, executions.CodeStale) || !strings.Contains(err.Error(), "seal does not match") {
			t.Errorf("%s rewritten: confirm got %v, want it refused as altered", tc.name, err)
			continue
		}
		if got := e.get(ex.ID); got.Status != executions.Cancelled {
			t.Errorf("%s rewritten: got %s, want cancelled", tc.name, got.Status)
		}
		if n := e.audits(ex.ID, "execution.plan_hash_mismatch"); n != 1 {
			t.Errorf("%s rewritten: execution.plan_hash_mismatch audit rows: got %d, want 1", tc.name, n)
		}
	}
}

// A HIGH plan whose stored secret argument names are rewritten to hide its target from
// the phrase is refused when confirmed with the shortened phrase.
func TestSealCoversSecretArgs(t *testing.T) {
	t.Parallel()
	e := start(t)
	hs := e.server("mt", true, "echo")
	hs.Server().SetTool(mcptest.ToolSpec{Name: "drop", Description: "Drops a table (pretend).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"table":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}})
	e.enable("mt__drop")
	ex := e.create(e.admin, step("mt__drop", `{"table":"users"}`))
	if ex.Risk != "high" || ex.ConfirmationPhrase != "mt__drop users" {
		t.Fatalf("got risk %s, phrase %q; want high, mt__drop users", ex.Risk, ex.ConfirmationPhrase)
	}
	testkit.Exec(t, e.pool, `UPDATE executions SET plan = jsonb_set(plan, '{steps,0,secret_arguments}', '["table"]') WHERE id = $1`, ex.ID)
	if got := e.get(ex.ID).ConfirmationPhrase; got != "mt__drop" {
		t.Fatalf("the phrase after the rewrite: %q, want mt__drop", got)
	}
	_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "mt__drop", ex.Hash())
	if !isCode(err, executions.CodeStale) || !strings.Contains(err.Error(), "seal does not match") {
		t.Fatalf("confirm with the shortened phrase: got %v, want it refused as altered", err)
	}
	if got := e.get(ex.ID); got.Status != executions.Cancelled {
		t.Fatalf("got %s, want cancelled", got.Status)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.plan_hash_mismatch": 1})
}

// sealV1 is an execution's seal as Toolwarden made it before v2: the MAC of the id and
// the three hashes only.
func sealV1(t *testing.T, key secrets.Key, id string, hashes ...[]byte) []byte {
	t.Helper()
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("toolwarden execution seal v1\x00" + id)
	for _, h := range hashes {
		b = append(b, 0)
		b = append(b, h...)
	}
	return keys.MAC(b)
}

// A plan sealed before the upgrade (v1) is refused as planned by an earlier version
// (its seal did not cover the requester), at approval and at rollback; nothing seals it
// again as v2, which would vouch for a requester rewritten beside it.
func TestSealV1Refused(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	e.run(nil)
	alice := e.user("alice", auth.RoleToolUser)
	ex := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
	testkit.Exec(t, e.pool, `UPDATE executions SET seal = $2 WHERE id = $1`, ex.ID, sealV1(t, e.key, ex.ID, ex.PlanHash, nil, nil))
	_, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash())
	if !isCode(err, executions.CodeStale) || !strings.Contains(err.Error(), "earlier version") {
		t.Fatalf("confirm of a v1-sealed plan: got %v, want it refused as planned by an earlier version", err)
	}
}

// A failed execution sealed before the upgrade (v1) is refused a rollback, as planned by
// an earlier version.
func TestSealV1RefusedAtRollback(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	e.run(nil)
	ex, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"do"}`), step("mt__fail", `{}`)},
		Rollback: []executions.RequestStep{step("mt__echo", `{"message":"undo"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ex.ID, executions.Failed, 20*time.Second)
	got := e.get(ex.ID)
	testkit.Exec(t, e.pool, `UPDATE executions SET seal = $2 WHERE id = $1`, ex.ID,
		sealV1(t, e.key, ex.ID, got.PlanHash, got.ApprovedHash, got.RollbackHash))
	// Its plan says so, so its page offers no rollback that cannot run.
	if _, rp, err := e.svc.PlanRollback(e.ctx, ex.ID); err != nil || rp == nil || rp.Problems == nil ||
		!strings.Contains(rp.Problems.Error(), "earlier version") {
		t.Errorf("the rollback plan of a v1-sealed execution: %+v, %v; want a problem saying it was planned by an earlier version", rp, err)
	}
	_, err = e.svc.Rollback(e.ctx, e.admin, ex.ID, executions.RollbackDecision{})
	if !isCode(err, executions.CodeStale) || !strings.Contains(err.Error(), "earlier version") {
		t.Fatalf("rollback of a v1-sealed execution: got %v, want it refused as planned by an earlier version", err)
	}
	if got := e.get(ex.ID); got.Status != executions.Failed {
		t.Errorf("got %s, want it left failed", got.Status)
	}
	e.wantAudits(ex.ID, map[string]int{"execution.approve.refused": 1})
}

// Reseal (a key rotation) leaves a v1 seal made with the key rotated away as it is:
// sealing it again as v2 would vouch for whatever the row holds now, its requester too.
// SealUsage counts it apart from that key's, so the key can be retired (it would wait
// for a reseal that never comes: a failed v1 execution stays open for good).
func TestResealLeavesV1(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	ex := e.create(alice, step("mt__add", `{"a":1,"b":2}`))
	v1 := sealV1(t, e.key, ex.ID, ex.PlanHash, nil, nil)
	testkit.Exec(t, e.pool, `UPDATE executions SET seal = $2, requested_by = $3 WHERE id = $1`, ex.ID, v1, e.admin.Actor.ID)
	// A rotation: a new primary key, the old one (which made the v1 seal) kept.
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
	if n, err := executions.Reseal(e.ctx, e.pool, keys, keyOf); err != nil || n != 0 {
		t.Fatalf("reseal: got %d, %v; want the v1 seal left as it is", n, err)
	}
	if got := e.get(ex.ID).Seal; string(got) != string(v1) {
		t.Fatal("the v1 seal was sealed again")
	}
	usage, err := executions.SealUsage(e.ctx, e.pool, keyOf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, v1 := usage[keys.IDs()[1]], usage[executions.EarlierSeal(keys.IDs()[1])]; n != 0 || v1 != 1 {
		t.Errorf("seal usage of the old key: %d, and %d as an earlier release's; want 0 and 1 (a v1 seal is refused whichever key made it)", n, v1)
	}
	if _, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, "", ex.Hash()); !isCode(err, executions.CodeStale) {
		t.Fatalf("confirm of the v1-sealed plan after a reseal: got %v, want it refused", err)
	}
}
