package executions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// breach is why an approved plan (or rollback) may not go on: what is about to run is
// not what was approved, or its requester can no longer act.
type breach struct {
	action string // the audit action of the transition it causes
	reason string // for people: what changed
}

// The audit actions of a breach.
const (
	actionHashMismatch  = "execution.plan_hash_mismatch"
	actionStale         = "execution.stale"
	actionRequesterGone = "execution.requester_gone"
)

// checkBinding recomputes, from what is stored to run now, the hash of phase's plan
// and compares it with the hash that was approved (DESIGN §8): the steps' arguments as
// the runner will read them, each tool's definition and configuration, and each
// server's connection identity. It also re-checks the requester: still an active user
// (and their token still valid), still allowed to use every tool with the role they
// have now. It returns the requester as they act now, or the breach.
func (s *Service) checkBinding(ctx context.Context, ex *Execution, phase string) (Caller, *breach, error) {
	who := ex.Requester()
	if ex.RequestedBy != nil {
		role, err := s.auth.RequesterRole(ctx, *ex.RequestedBy, who.Actor.TokenID)
		if errors.Is(err, auth.ErrRequesterGone) {
			return who, &breach{actionRequesterGone, fmt.Sprintf("%s can no longer act (%s), so the plan they asked for does not run",
				ex.RequesterName, strings.TrimPrefix(err.Error(), auth.ErrRequesterGone.Error()+": "))}, nil
		}
		if err != nil {
			return who, nil, err
		}
		who.Role = role
	}
	approved, stored := ex.ApprovedHash, ex.Plan
	if phase == PhaseRollback {
		approved = ex.RollbackHash
		if ex.RollbackPlan != nil {
			stored = *ex.RollbackPlan
		} else {
			stored = Plan{}
		}
	}
	if len(approved) == 0 {
		approved = ex.PlanHash // not approved yet: the hash the plan was made with
	}
	if h, err := stored.Hash(); err != nil || !bytes.Equal(h, approved) {
		return who, &breach{actionHashMismatch, "the stored plan is not the one that was approved (it was altered after approval)"}, nil
	}
	steps, err := s.Steps(ctx, ex.ID)
	if err != nil {
		return who, nil, err
	}
	now := Plan{}
	if phase == PhaseRun {
		now.Rollback = stored.Rollback
	}
	for _, st := range steps {
		if st.Phase != phase {
			continue
		}
		if st.Position >= len(stored.Steps) {
			return who, &breach{actionHashMismatch, fmt.Sprintf("step %d is not part of the approved plan", st.Position+1)}, nil
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
		var msg string
		if perr == nil {
			msg = pinChange(want, p.Pin)
		} else if msg, err = s.stale(ctx, ref, want); err != nil {
			return who, nil, err
		}
		if msg != "" {
			return who, &breach{actionStale, fmt.Sprintf("step %d: %s", st.Position+1, msg)}, nil
		}
		if perr != nil {
			// The tool is the one planned: the router refused the call for another reason.
			var re *router.Error
			if !errors.As(perr, &re) {
				return who, nil, perr
			}
			action := actionStale
			if re.Code == router.CodeForbidden {
				action = actionRequesterGone
			}
			return who, &breach{action, fmt.Sprintf("step %d (%s): %s", st.Position+1, st.Tool, re.Message)}, nil
		}
		now.Steps = append(now.Steps, PlannedStep{Prepared: *p, Undoes: st.Undoes})
	}
	h, err := now.Hash()
	if err != nil {
		return who, nil, err
	}
	if !bytes.Equal(h, approved) {
		return who, &breach{actionHashMismatch, mismatch(stored, now)}, nil
	}
	return who, nil, nil
}

// pinChange says how a step's tool changed since it was planned, from what the router
// prepared now ("" when it did not; a changed server connection is the hash's to find).
func pinChange(want PlannedStep, now router.Pin) string {
	switch {
	case now.ToolID != want.ToolID:
		return fmt.Sprintf("%s is no longer the tool that was planned", want.Tool)
	case now.DefinitionHash != want.DefinitionHash:
		return fmt.Sprintf("%s changed its definition since the plan was made", want.Tool)
	case now.ConfigVersion != want.ConfigVersion:
		return fmt.Sprintf("%s's configuration changed since the plan was made", want.Tool)
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

// mismatch says where what is about to run differs from what was approved.
func mismatch(approved, now Plan) string {
	if len(approved.Steps) != len(now.Steps) {
		return fmt.Sprintf("the plan has %d steps stored to run, but %d were approved", len(now.Steps), len(approved.Steps))
	}
	for i := range now.Steps {
		a, n := approved.Steps[i], now.Steps[i]
		switch {
		case a.ToolID != n.ToolID || a.Tool != n.Tool:
			return fmt.Sprintf("step %d would run %s, but %s was approved", i+1, n.Tool, a.Tool)
		case a.ServerIdentity != n.ServerIdentity:
			return fmt.Sprintf("step %d: the connection settings of server %s (command, environment, URL or credentials) changed since approval", i+1, n.Server)
		case !sameJSON(a.Effective, n.Effective):
			return fmt.Sprintf("step %d (%s): its arguments are not the ones that were approved", i+1, n.Tool)
		case !sameUndo(a.Undoes, n.Undoes):
			return fmt.Sprintf("step %d (%s) undoes another step than was approved", i+1, n.Tool)
		}
	}
	return "what is about to run is not what was approved"
}

func sameJSON(a, b []byte) bool {
	ca, err1 := canonicalJSON(a)
	cb, err2 := canonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

func sameUndo(a, b *int) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
