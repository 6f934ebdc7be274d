package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/verr"
)

// The decisions the page posts. Each redirects back to the page with a flash: what
// happened, or why nothing did.

// ConfirmForm approves: the plan hash the page showed and, for HIGH, the typed phrase.
func (h ExecutionsHandler) ConfirmForm(c echo.Context) error {
	return h.pageDecision(c, "Not approved", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Confirm(ctx, who, id, c.FormValue("phrase"), c.FormValue("plan_hash"))
	}, func(*executions.Execution) string { return "Approved: the plan was started." })
}

// RejectForm turns a plan down with a reason.
func (h ExecutionsHandler) RejectForm(c echo.Context) error {
	return h.pageDecision(c, "Not rejected", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Reject(ctx, who, id, c.FormValue("reason"))
	}, func(*executions.Execution) string { return "Rejected: nothing of the plan runs." })
}

// CancelForm withdraws a plan waiting for approval or stops a running one, or its
// rollback.
func (h ExecutionsHandler) CancelForm(c echo.Context) error {
	return h.pageDecision(c, "Not cancelled", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Cancel(ctx, who, id, c.FormValue("reason"))
	}, func(ex *executions.Execution) string {
		if ex.Status == executions.RollbackFailed {
			return "Rollback cancelled: the undo step that was running finishes, and no further undo step starts."
		}
		if ex.StartedAt != nil {
			return "Cancelled: the step that was running finishes, and no further step starts."
		}
		return "Cancelled: nothing of the plan runs."
	})
}

// RollbackForm starts the rollback of a failed execution: confirm for MEDIUM undo
// steps, the phrase for HIGH.
func (h ExecutionsHandler) RollbackForm(c echo.Context) error {
	return h.pageDecision(c, "Not rolled back", func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error) {
		return h.Executions.Rollback(ctx, who, id, executions.RollbackDecision{Confirmed: c.FormValue("confirm") != "",
			Phrase: c.FormValue("phrase"), Hash: c.FormValue("rollback_hash")})
	}, func(*executions.Execution) string {
		return "Rollback started: the completed steps are undone, last first."
	})
}

// pageDecision makes a decision and redirects back to the execution with a flash. An
// unknown execution is a 404; refusals a person can act on (a wrong phrase, a conflict,
// a missing reason, not allowed) are error flashes.
func (h ExecutionsHandler) pageDecision(c echo.Context, refused string,
	do func(ctx context.Context, who executions.Caller, id string) (*executions.Execution, error),
	ok func(*executions.Execution) string) error {
	id := c.Param("id")
	ex, err := do(c.Request().Context(), callerOf(c), id)
	to := "/executions/" + id
	if errors.Is(err, executions.ErrNotFound) {
		return err
	}
	if err != nil {
		if msg, mine := decisionMessage(refused, err); mine {
			setFlash(c, "error", msg, h.SecureCookies)
			return c.Redirect(http.StatusSeeOther, to)
		}
	}
	return h.redirectWithOutcome(c, err, func() string { return ok(ex) }, to)
}

// decisionMessage says why a decision was refused, for the errors worth saying better
// than userMessage does.
func decisionMessage(refused string, err error) (string, bool) {
	phrase, wrongPhrase := executions.WrongPhrase(err)
	var ve *verr.Error
	switch {
	case wrongPhrase:
		return fmt.Sprintf("%s: the phrase you typed does not match. Type %q exactly (letters, spaces and case); nothing was run.",
			refused, phrase), true
	case errors.As(err, &ve):
		msgs := make([]string, 0, len(ve.Fields))
		for _, f := range ve.Fields {
			msgs = append(msgs, f.Message)
		}
		return refused + ": " + strings.Join(msgs, "; ") + ".", true
	}
	if msg, mine := userMessage(err); mine {
		return refused + ". " + msg, true
	}
	return "", false
}
