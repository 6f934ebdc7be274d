package fault_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/fault"
)

func TestKindsAndCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *fault.Error
		kind fault.Kind
		code string
		msg  string
	}{
		{fault.NotFound("tool"), fault.KindNotFound, "not_found", "tool not found"},
		{fault.Conflict("", "taken"), fault.KindConflict, "conflict", "taken"},
		{fault.Conflict("illegal_transition", "no"), fault.KindConflict, "illegal_transition", "no"},
		{fault.Stale("stale_plan", "changed"), fault.KindStale, "stale_plan", "changed"},
		{fault.Forbidden("not you"), fault.KindForbidden, "forbidden", "not you"},
		{fault.Invalid("", "bad", nil), fault.KindInvalid, "invalid_input", "bad"},
		{fault.Unprocessable("wrong_phrase", "type it"), fault.KindUnprocessable, "wrong_phrase", "type it"},
		{fault.RateLimited("slow down", 0), fault.KindRateLimited, "rate_limited", "slow down"},
		{fault.Unauthenticated("sign in"), fault.KindUnauthenticated, "unauthenticated", "sign in"},
		{fault.Unavailable("", "later"), fault.KindUnavailable, "unavailable", "later"},
		{fault.Upstream("", "it broke"), fault.KindUpstream, "upstream_error", "it broke"},
	} {
		if tc.err.Kind != tc.kind || tc.err.Code != tc.code || tc.err.Error() != tc.msg {
			t.Errorf("got %s %s %q, want %s %s %q", tc.err.Kind, tc.err.Code, tc.err.Error(), tc.kind, tc.code, tc.msg)
		}
	}
}

func TestWrapping(t *testing.T) {
	t.Parallel()
	sentinel := fault.Conflict("not_connected", "server is not connected").About("server")
	more := sentinel.Withf("%s: it is disabled", sentinel.Message)
	wrapped := fmt.Errorf("discover: %w", more)
	if !errors.Is(wrapped, sentinel) {
		t.Error("errors.Is does not find the sentinel under Withf")
	}
	f, ok := fault.As(wrapped)
	if !ok || f != more || f.Message != "server is not connected: it is disabled" || f.Code != "not_connected" || f.Subject != "server" {
		t.Errorf("As: got %+v, want the outermost fault with the longer message", f)
	}
	if sentinel.Message != "server is not connected" {
		t.Errorf("Withf changed the sentinel: %q", sentinel.Message)
	}
	if got := fault.KindOf(errors.New("plain")); got != fault.KindInternal {
		t.Errorf("KindOf(plain) = %s, want internal", got)
	}
	cause := errors.New("model down")
	up := fault.Wrap(cause, fault.KindUpstream, "planner_unavailable", "try again")
	if !errors.Is(up, cause) || up.Error() != "try again" || !fault.Is(up, fault.KindUpstream) {
		t.Errorf("Wrap: got %v (cause found %v)", up, errors.Is(up, cause))
	}
	if a := fault.Forbidden("no").MarkAudited(); !a.Audited() {
		t.Error("MarkAudited did not mark")
	}
}
