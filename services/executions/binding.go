package executions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// breach is why an approved plan (or rollback) may not go on: what is about to run is
// not what was approved, or its requester can no longer act.
type breach struct {
	action string // the audit action of the transition it causes
	reason string // for people: what changed
	// transient: the router refused a step for a reason that may pass (the tool or its
	// server disabled for a while): at approval the plan waits instead of being cancelled,
	// and a running phase waits a while before that step (runPhase).
	transient bool
	// step is the step the breach is about (nil when it is about the whole record), and
	// detail the reason without naming it: a message about that very step names it once.
	step   *Step
	detail string
}

// stepLabel names step st as the execution's messages do: a run step by its position
// and tool; an undo step as one, with the run step it undoes, since its position is the
// rollback's own and would read as the run step of that number.
func stepLabel(st Step) string {
	switch {
	case st.Phase != PhaseRollback:
		return fmt.Sprintf("step %d (%s)", st.Position+1, st.Tool)
	case st.Undoes == nil:
		return fmt.Sprintf("undo step %d (%s)", st.Position+1, st.Tool)
	}
	return fmt.Sprintf("undo step %d (%s, which undoes step %d)", st.Position+1, st.Tool, *st.Undoes+1)
}

// stepWord is what a phase calls its steps in a message that names one by number.
func stepWord(phase string) string {
	if phase == PhaseRollback {
		return "undo step"
	}
	return "step"
}

// The audit actions of a breach.
const (
	actionHashMismatch  = "execution.plan_hash_mismatch"
	actionStale         = "execution.stale"
	actionRequesterGone = "execution.requester_gone"
)

// sealOf is the seal (v3) of ex with the approval and rollback hashes and the rollback
// plan it is about to store: a MAC under the secret key, which the database does not
// hold, so whoever rewrites an execution's row cannot make a seal that verifies.
func (s *Service) sealOf(ex *Execution, approved, rollback []byte, rollbackPlan *Plan) []byte {
	return s.opts.Keys.MAC(sealInputV3(ex, approved, rollback, rollbackPlan))
}

// sealInputV1 is what a seal made before v2 covers: the id and the three hashes only.
func sealInputV1(id string, hashes ...[]byte) []byte {
	b := []byte("toolwarden execution seal v1\x00" + id)
	for _, h := range hashes {
		b = append(b, 0)
		b = append(b, h...)
	}
	return b
}

// sealInputV3 is what a seal covers: all that v2 does, and each step's risk level as
// planned and approved (riskLevelsHash), which the plan's hash leaves out but the check
// that a step's risk rose since approval (pinChange) and the approval's own level read.
func sealInputV3(ex *Execution, approved, rollback []byte, rollbackPlan *Plan) []byte {
	return sealFields("toolwarden execution seal v3\x00", ex, approved, rollback, rollbackPlan,
		riskLevelsHash(ex.Plan, rollbackPlan))
}

// sealInputV2 is what a seal made before v3 covers: the id and the three hashes, who
// asked and on whose behalf (the runner acts as them: requester id, token, kind, name,
// role, conversation), and each step's secret argument names (the phrase leaves them
// out; the plan's hash does not cover them), but not the steps' risk levels.
func sealInputV2(ex *Execution, approved, rollback []byte, rollbackPlan *Plan) []byte {
	return sealFields("toolwarden execution seal v2\x00", ex, approved, rollback, rollbackPlan)
}

// sealFields is a seal's input after its version's tag: v2's fields, then extra. Each
// field is length-prefixed, a missing id told from an empty one.
func sealFields(tag string, ex *Execution, approved, rollback []byte, rollbackPlan *Plan, extra ...[]byte) []byte {
	b := []byte(tag)
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
	field(secretArgsHash(ex.Plan, rollbackPlan))
	for _, v := range extra {
		field(v)
	}
	return b
}

// riskLevelsHash is the SHA-256 of each step's risk level, in order, of each phase (the
// plan's steps, its own undo steps, the rollback's): a level raised in the database
// would otherwise hide that the tool's risk rose to it since approval.
func riskLevelsHash(plan Plan, rollback *Plan) []byte {
	levels := func(sts []PlannedStep) []string {
		out := make([]string, len(sts))
		for i, st := range sts {
			out[i] = string(st.Risk.Level)
		}
		return out
	}
	var undo []PlannedStep
	if rollback != nil {
		undo = rollback.Steps
	}
	raw, err := json.Marshal([][]string{levels(plan.Steps), levels(plan.Rollback), levels(undo)})
	if err != nil {
		panic(err) // slices of strings always marshal
	}
	h := sha256.Sum256(raw)
	return h[:]
}

// secretArgsHash is the SHA-256 of the secret argument names of every step of each phase
// (the plan's steps, its own undo steps, the rollback's), each step's sorted and without
// repeats: the same names in any order are the same phrase and masking.
func secretArgsHash(plan Plan, rollback *Plan) []byte {
	names := func(sts []PlannedStep) [][]string {
		out := make([][]string, len(sts))
		for i, st := range sts {
			out[i] = slices.Compact(slices.Sorted(slices.Values(st.SecretArgs)))
			if out[i] == nil {
				out[i] = []string{}
			}
		}
		return out
	}
	var undo []PlannedStep
	if rollback != nil {
		undo = rollback.Steps
	}
	raw, err := json.Marshal([][][]string{names(plan.Steps), names(plan.Rollback), names(undo)})
	if err != nil {
		panic(err) // slices of strings always marshal
	}
	h := sha256.Sum256(raw)
	return h[:]
}

// sealState is what an execution's seal says of its record as stored.
type sealState int

const (
	sealIntact  sealState = iota // the v3 (or v2) MAC of what it covers as stored
	sealNone                     // none: planned before records were sealed
	sealEarlier                  // one made before v2, over the id and hashes only
	sealAltered                  // the MAC of nothing stored, under any key held
)

// sealStateOf tells what ex's seal says, verifying each MAC once. A seal made before v2
// covered the hashes alone: a requester rewritten beside it, or beside an old one put
// back from a backup, would pass, and sealing such a row again as v2 would vouch for
// that. Its execution is refused as planned by an earlier version, as one sealed
// before seals were. A v2 seal (the release before v3) is still intact: refusing it
// would strand every plan approved before an upgrade, though it leaves the steps' risk
// levels uncovered until the execution is sealed again (an approval, a rollback, Reseal).
func (s *Service) sealStateOf(ex *Execution) sealState {
	switch {
	case ex.Seal == nil:
		return sealNone
	case s.opts.Keys.VerifyMAC(sealInputV3(ex, ex.ApprovedHash, ex.RollbackHash, ex.RollbackPlan), ex.Seal),
		s.opts.Keys.VerifyMAC(sealInputV2(ex, ex.ApprovedHash, ex.RollbackHash, ex.RollbackPlan), ex.Seal):
		return sealIntact
	case s.opts.Keys.VerifyMAC(sealInputV1(ex.ID, ex.PlanHash, ex.ApprovedHash, ex.RollbackHash), ex.Seal):
		return sealEarlier
	}
	return sealAltered
}

// sealMismatch is why an execution whose seal no key held verifies does not go on. A
// seal an earlier release made (v1) with a key retired since matches no key either.
const sealMismatch = "its record was altered after it was planned or approved (its seal does not match; " +
	"or an earlier release sealed it with a key retired since)"

// earlierSeal is why an execution sealed v1 does not go on.
const earlierSeal = "it was planned by an earlier version of Toolwarden, whose seal did not cover who asked for it"

// checkBinding recomputes, from what is stored to run now, the hash of phase's plan
// and compares it with the hash that was approved (docs/security.md): the steps' tools and
// arguments as the runner will read them, each tool's definition, configuration and
// risk, and each server's connection identity; and it checks the execution's seal over
// those hashes, its requester, its steps' secret argument names and (a v3 seal) their
// risk levels, pinChange's baseline. It also re-checks the requester: still an active
// user (and their token still valid), still allowed to use every tool with the role they
// have now. It returns the requester as they act now and the phase's steps as verified
// (by id), which are what runs; or the breach.
func (s *Service) checkBinding(ctx context.Context, ex *Execution, phase string) (Caller, map[string]Step, *breach, error) {
	who := ex.Requester()
	if ex.Seal == nil {
		return who, nil, &breach{action: actionStale, reason: "it was planned by an earlier version of Toolwarden, " +
			"whose approvals were not bound to the servers' connection settings"}, nil
	}
	// Before the seal: a requester's row deleted sets its id NULL (the foreign key), which
	// the seal covers; refused either way, it is said as what it most likely is.
	if ex.RequesterKind == audit.ActorToken && ex.RequestedToken == nil {
		return who, nil, &breach{action: actionRequesterGone, reason: fmt.Sprintf("%s can no longer act (the API token it was asked with is gone)", ex.RequesterName)}, nil
	}
	if ex.RequestedBy == nil && ex.personal() {
		return who, nil, &breach{action: actionRequesterGone, reason: fmt.Sprintf("%s can no longer act (their account is gone)", ex.RequesterName)}, nil
	}
	switch s.sealStateOf(ex) { // sealNone was refused first, above
	case sealEarlier:
		return who, nil, &breach{action: actionStale, reason: earlierSeal}, nil
	case sealAltered:
		return who, nil, &breach{action: actionHashMismatch, reason: sealMismatch}, nil
	}
	if ex.RequestedBy != nil {
		role, err := s.auth.RequesterRole(ctx, *ex.RequestedBy, who.Actor.TokenID)
		if errors.Is(err, auth.ErrRequesterGone) {
			return who, nil, &breach{action: actionRequesterGone, reason: fmt.Sprintf("%s can no longer act (%s), so the plan they asked for does not run",
				ex.RequesterName, strings.TrimPrefix(err.Error(), auth.ErrRequesterGone.Error()+": "))}, nil
		}
		if err != nil {
			return who, nil, nil, err
		}
		who.Role = role
	}
	approved, stored := ex.ApprovedHash, ex.Plan
	if phase == PhaseRollback {
		approved, stored = ex.RollbackHash, Plan{}
		if ex.RollbackPlan != nil {
			stored = *ex.RollbackPlan
		}
	}
	if len(approved) == 0 {
		// Only a plan still awaiting its approval is checked without one (Confirm): a
		// status moved on by a write to that column alone has no approval sealed with it.
		if phase == PhaseRollback || ex.Status != AwaitingApproval {
			return who, nil, &breach{action: actionHashMismatch, reason: "it was never approved (no approval is sealed with its record)"}, nil
		}
		approved = ex.PlanHash
	}
	if h, err := stored.Hash(); err != nil || !bytes.Equal(h, approved) {
		return who, nil, &breach{action: actionHashMismatch, reason: "the stored plan is not the one that was approved (it was altered after approval)"}, nil
	}
	steps, err := s.StepsBrief(ctx, ex.ID)
	if err != nil {
		return who, nil, nil, err
	}
	now := Plan{}
	if phase == PhaseRun {
		now.Rollback = stored.Rollback
	}
	verified := map[string]Step{}
	for _, st := range steps {
		if st.Phase != phase {
			continue
		}
		if st.Position >= len(stored.Steps) {
			return who, nil, &breach{action: actionHashMismatch, reason: fmt.Sprintf("%s %d is not part of the approved plan", stepWord(phase), st.Position+1)}, nil
		}
		want := stored.Steps[st.Position]
		if st.Status != StepPending {
			// It ran (or is running): nothing about it decides what runs next, and its
			// tool may have changed since without making the plan's rest stale.
			now.Steps = append(now.Steps, want)
			continue
		}
		ref := st.Tool
		if st.ToolID != nil {
			ref = *st.ToolID
		}
		p, perr := s.router.Prepare(ctx, router.Call{Tool: ref, Arguments: st.Arguments, Actor: who.Actor, Role: who.Role,
			Source: router.SourceExecution})
		if perr == nil && p.ServerIdentity != want.ServerIdentity && p.ToolID == want.ToolID &&
			s.router.SameConnection(ctx, p.ToolID, want.ServerIdentity) {
			// The same settings under another key (a rotation since it was approved): the
			// plan's hash holds the approved identity.
			p.ServerIdentity = want.ServerIdentity
		}
		var msg string
		if perr == nil {
			msg = pinChange(want, p)
		} else if msg, err = s.stale(ctx, ref, want); err != nil {
			return who, nil, nil, err
		}
		at := st
		if msg != "" {
			// msg names the tool: a run step is named by its number alone, as it always was.
			where := fmt.Sprintf("step %d", st.Position+1)
			if phase == PhaseRollback {
				where = stepLabel(st)
			}
			return who, nil, &breach{action: actionStale, reason: where + ": " + msg, step: &at, detail: msg}, nil
		}
		if perr != nil {
			// The tool is the one planned: the router refused the call for another reason.
			var re *router.Error
			if !errors.As(perr, &re) {
				return who, nil, nil, perr
			}
			b := &breach{action: actionStale, reason: stepLabel(st) + ": " + re.Message, step: &at, detail: re.Message,
				transient: re.Code == router.CodeToolDisabled}
			if re.Code == router.CodeForbidden {
				b.action = actionRequesterGone
			}
			return who, nil, b, nil
		}
		// The preview is checked against the file when the step runs (staleFile).
		now.Steps = append(now.Steps, PlannedStep{Prepared: *p, Undoes: st.Undoes, Preview: want.Preview})
		verified[st.ID] = st
	}
	h, err := now.Hash()
	if err != nil {
		return who, nil, nil, err
	}
	if !bytes.Equal(h, approved) {
		return who, nil, &breach{action: actionHashMismatch, reason: mismatch(stored, now, stepWord(phase))}, nil
	}
	return who, verified, nil, nil
}

// pinChange says how a step's tool changed since it was planned, from what the router
// prepared now ("" when it did not; a changed server connection is the hash's to find).
// A risk that rose (its server no longer trusted, an administrator's setting) needs a
// new approval of the level it rose to; one that fell does not. want's level is the one
// approved only as far as the seal covers it (v3; checkBinding checks the seal first).
func pinChange(want PlannedStep, now *router.Prepared) string {
	switch {
	case now.ToolID != want.ToolID:
		return fmt.Sprintf("%s is no longer the tool that was planned", want.Tool)
	case now.DefinitionHash != want.DefinitionHash:
		return fmt.Sprintf("%s changed its definition since the plan was made", want.Tool)
	case now.ConfigVersion != want.ConfigVersion:
		return fmt.Sprintf("%s's configuration changed since the plan was made", want.Tool)
	case rank(now.Risk.Level) > rank(want.Risk.Level):
		return fmt.Sprintf("%s is %s risk now, %s when the plan was made (%s)", want.Tool, now.Risk.Level, want.Risk.Level, now.Risk.Why)
	}
	return ""
}

// stale says how the tool of a step changed since it was planned ("" when it did not),
// asking the database: for a step the router refused, whose tool may be gone.
func (s *Service) stale(ctx context.Context, ref string, want PlannedStep) (string, error) {
	t, err := s.tools.Target(ctx, ref)
	switch {
	case errors.Is(err, tools.ErrNotFound):
		return fmt.Sprintf("%s no longer exists", want.Tool), nil
	case err != nil:
		return "", err
	case t.ID != want.ToolID:
		return fmt.Sprintf("%s is no longer the tool that was planned", want.Tool), nil
	case t.DefinitionHash != want.DefinitionHash:
		return fmt.Sprintf("%s changed its definition since the plan was made", want.Tool), nil
	case t.ConfigVersion != want.ConfigVersion:
		return fmt.Sprintf("%s's configuration changed since the plan was made", want.Tool), nil
	}
	return "", nil
}

// mismatch says where what is about to run differs from what was approved, calling
// the steps word (stepWord).
func mismatch(approved, now Plan, word string) string {
	if len(approved.Steps) != len(now.Steps) {
		return fmt.Sprintf("the plan has %d %ss stored to run, but %d were approved", len(now.Steps), word, len(approved.Steps))
	}
	for i := range now.Steps {
		a, n := approved.Steps[i], now.Steps[i]
		switch {
		case a.ToolID != n.ToolID || a.Tool != n.Tool:
			return fmt.Sprintf("%s %d would run %s, but %s was approved", word, i+1, n.Tool, a.Tool)
		case a.ServerIdentity != n.ServerIdentity:
			return fmt.Sprintf("%s %d: the connection settings of server %s (command, environment, URL or credentials) changed since approval", word, i+1, n.Server)
		case !sameJSON(a.Effective, n.Effective):
			return fmt.Sprintf("%s %d (%s): its arguments are not the ones that were approved", word, i+1, n.Tool)
		case !sameUndo(a.Undoes, n.Undoes):
			return fmt.Sprintf("%s %d (%s) undoes another step than was approved", word, i+1, n.Tool)
		}
	}
	return "what is about to run is not what was approved"
}

// sameJSON: a and b are the same arguments, none given being {}.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 {
		a = []byte("{}")
	}
	if len(b) == 0 {
		b = []byte("{}")
	}
	return canonjson.Equal(a, b)
}

func sameUndo(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// RevealsSecretArgs: p, a person who may decide ex while it awaits approval (approve, or
// confirm their own), sees its plan's arguments whole, secret ones too: approving what
// one cannot read is no decision (send_input's masked text is what would be typed).
// Records, tokens and everyone else, and the plan once decided, keep them masked.
func (ex *Execution) RevealsSecretArgs(p *auth.Principal) bool {
	return ex.Status == AwaitingApproval && p != nil && p.Kind == audit.ActorUser &&
		(p.Can(auth.PermExecutionApprove) || ex.RequestedBy != nil && *ex.RequestedBy == p.User.ID)
}

// PrivateResult: a step of a built-in tool (tool is its qualified name) holds its
// caller's notes, answers, files or command output, so its result is for
// RevealsBuiltinResults only, as the tool's calls on its Logs tab are.
func PrivateResult(tool string) bool {
	server, _, ok := toolname.Split(tool)
	return ok && server == toolname.Builtin
}

// WithholdsResult: st has a result that a viewer who does not see built-in results
// (sees: RevealsBuiltinResults) must not read.
func WithholdsResult(st Step, sees bool) bool {
	return !sees && PrivateResult(st.Tool) && (st.HasResult || len(st.Result) > 0 && string(st.Result) != "null")
}

// RevealsBuiltinResults: p, the person who asked for ex (themselves or through a token)
// or one who reads the audit log, sees the results of its built-in steps (PrivateResult).
func (ex *Execution) RevealsBuiltinResults(p *auth.Principal) bool {
	return ex.RevealsResults(p) || p != nil && p.Can(auth.PermAuditView)
}

// RevealsResults: p, the person who asked for ex (themselves or through a token), reads
// its upstream steps' results whole; everyone else, auditors too, reads them with what
// looks like a credential masked (usage.Redact), as on the tool's Logs tab.
func (ex *Execution) RevealsResults(p *auth.Principal) bool {
	return p != nil && ex.RequestedBy != nil && *ex.RequestedBy == p.User.ID
}

// RevealsRollbackArgs: p, a person who may decide a rollback (execution.approve), reads
// the rollback plan's arguments whole (GET …/rollback), as RevealsSecretArgs.
func RevealsRollbackArgs(p *auth.Principal) bool {
	return p != nil && p.Kind == audit.ActorUser && p.Can(auth.PermExecutionApprove)
}
