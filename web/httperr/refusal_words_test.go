package httperr_test

import (
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// A refusal because of the current state, whatever its subject, is the person's to
// read on the page they were on, as one sentence; one without words, and refusals of
// other kinds (a 403 the error handler records as denied), still go to the error page.
func TestPageMessageSaysStateRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		msg  string
		mine bool
	}{
		{grants.ErrNotPending, "This question is no longer waiting for an answer.", true},
		{fault.Conflict("view_exists", `You already have a view named "x".`), `You already have a view named "x".`, true},
		{fmt.Errorf("wrapped: %w", fault.Conflict("grant_ended", "The grant ended; there is nothing to revoke.")), "The grant ended; there is nothing to revoke.", true},
		{fault.Stale("changed", "the plan changed since you read it"), "The plan changed since you read it.", true},
		{fault.Unprocessable("odd", "élan is not understood"), "Élan is not understood.", true},
		{fault.Conflict("", ""), "", false},
		{fault.Forbidden("only administrators may do this"), "", false},
		{fault.Unavailable("", "try again shortly"), "", false},
	} {
		if msg, mine := httperr.PageMessage(tc.err); msg != tc.msg || mine != tc.mine {
			t.Errorf("%v: got %q, %v; want %q, %v", tc.err, msg, mine, tc.msg, tc.mine)
		}
	}
}
