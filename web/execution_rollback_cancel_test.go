package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
)

// A rollback under way whose undo step waits for a person's answer can be cancelled
// from the execution's page: the page offers "Cancel the rollback" (saying what it
// does), and the form ends the rollback failed, the waiting undo step interrupted.
func TestExecutionPageCancelsARollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__user_collaboration")
	liveServer(t, srv, "lo", true, "echo", "fail")
	e := &xpEnv{srv: srv, admin: srv.Login(t, "admin", webtest.AdminPassword)}
	id := e.createPlan(t, e.admin, `{"steps":[{"tool":"lo__echo","arguments":{"message":"do"}},{"tool":"lo__fail","arguments":{"message":"boom"}}],
		"rollback":[{"tool":"builtin__user_collaboration","arguments":{"prompt":"Undo it now?"},"undoes":0}]}`)
	if ex := e.get(t, id); ex.Status == executions.AwaitingApproval {
		e.decide(t, e.admin, id, "confirm", url.Values{"plan_hash": {ex.Hash()}, "phrase": {ex.ConfirmationPhrase}})
	}
	e.wait(t, id, executions.Failed)
	_, rp, err := srv.Executions.PlanRollback(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	e.decide(t, e.admin, id, "rollback", url.Values{"confirm": {"1"}, "phrase": {rp.Phrase}, "rollback_hash": {rp.Hash}})
	var q grants.Collaboration
	webtest.WaitFor(t, 30*time.Second, func() bool {
		list, err := srv.App.Grants.Collaborations(ctx, *e.get(t, id).RequestedBy, grants.StatusPending)
		if err != nil || len(list) != 1 {
			return false
		}
		q = list[0]
		return true
	}, "the undo step's question")

	doc := e.show(t, e.admin, id, http.StatusOK)
	form := doc.Find("[data-testid=approval] [data-perm='execution.approve'] form[action='/executions/" + id + "/cancel']")
	if xpStatus(doc) != "rolling_back" || form.Find("button[data-testid=cancel-rollback]").Length() != 1 ||
		!strings.Contains(form.AttrOr("data-confirm", ""), "no further undo step starts") {
		t.Fatalf("rolling back: status %s, cancel form %q (confirm %q)", xpStatus(doc), form.Text(), form.AttrOr("data-confirm", ""))
	}
	doc = e.decide(t, e.admin, id, "cancel", nil)
	if !strings.Contains(xpFlash(doc), "Rollback cancelled") || xpStatus(doc) != "rollback_failed" {
		t.Fatalf("after the cancel: flash %q, status %s", xpFlash(doc), xpStatus(doc))
	}
	if doc.Find("button[data-testid=cancel-rollback]").Length() != 0 ||
		!strings.Contains(doc.Find("[data-testid=approval] [data-testid=outcome]").Text(), "the rollback was cancelled by admin") {
		t.Errorf("the rollback_failed page: %q", strings.Join(strings.Fields(doc.Find("[data-testid=approval]").Text()), " "))
	}
	webtest.WaitFor(t, 15*time.Second, func() bool {
		sts, err := srv.Executions.Steps(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if st.Phase == executions.PhaseRollback {
				return st.Status == executions.StepInterrupted
			}
		}
		return false
	}, "the waiting undo step interrupted")
	// Withdrawn by the built-in server's call as it ends, which may come just after the
	// step is recorded interrupted (as for a cancelled run's question).
	webtest.WaitFor(t, 20*time.Second, func() bool {
		c, err := srv.App.Grants.GetCollaboration(ctx, q.ID)
		return err == nil && c.Status == grants.StatusCancelled
	}, "the undo step's question withdrawn")
}
