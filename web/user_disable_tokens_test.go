package web_test

import (
	"net/http"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Disabling a person through the API revokes their API tokens: after they are enabled
// again, the token they had (or one a thief made with their stolen session) is still
// refused with 401. Before, re-enabling quietly brought every token back.
func TestReEnabledUsersOldTokenIsRefused(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	bob := srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-1234")
	tok := srv.Token(t, "bob")
	asBob := webtest.API{T: t, Srv: srv, Bearer: tok}
	if st, raw := asBob.Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusOK {
		t.Fatalf("bob's token before: got %d %s, want 200", st, raw)
	}
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	for _, disabled := range []bool{true, false} {
		admin.JSON(http.MethodPatch, "/api/v1/users/"+bob.ID, map[string]any{"disabled": disabled}, http.StatusOK, nil)
	}
	asBob.Error(http.MethodGet, "/api/v1/tools", nil, http.StatusUnauthorized, "unauthenticated")
	// Revoked by the disable's own transaction, audited as the administrator's act.
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log r JOIN audit_log d ON d.action = 'user.disable' AND d.target_id = $1
		WHERE r.action = 'token.revoke' AND r.payload->>'reason' = 'user disabled' AND r.payload->>'user' = 'bob'
		  AND r.actor_name = 'admin' AND r.xmin::text = d.xmin::text`, bob.ID); n != 1 {
		t.Errorf("token.revoke rows written by the disable: %d, want 1", n)
	}
	// Bob, enabled again, makes himself a new token, which works.
	fresh := srv.Token(t, "bob")
	if st, raw := (webtest.API{T: t, Srv: srv, Bearer: fresh}).Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusOK {
		t.Errorf("bob's new token: got %d %s, want 200", st, raw)
	}
}
