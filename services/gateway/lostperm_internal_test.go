package gateway

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
)

// A request under way ends on a role change only when the new role loses what a call
// through /mcp needs (using tools, asking for approval), not any permission of the old
// one: an administrator made a tool user keeps their calls.
func TestLostPermissionOnlyWhatCallsNeed(t *testing.T) {
	for _, tc := range []struct {
		was, now auth.Role
		want     bool
	}{
		{auth.RoleAdmin, auth.RoleToolUser, false},
		{auth.RoleAdmin, auth.RoleToolManager, false},
		{auth.RoleToolUser, auth.RoleAuditor, true},
		{auth.RoleToolUser, auth.RoleGuest, true},
		{auth.RoleAuditor, auth.RoleGuest, false},
		{auth.RoleToolUser, auth.RoleAdmin, false},
	} {
		if got := lostPermission(tc.was, tc.now); got != tc.want {
			t.Errorf("%s → %s: lost %v, want %v", tc.was, tc.now, got, tc.want)
		}
	}
}
