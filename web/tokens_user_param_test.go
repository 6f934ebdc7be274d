package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// GET /api/v1/tokens?user= with no value is not a user id: 400 invalid_input naming
// user, as docs/api.md says, not everyone's tokens (the service reads "" as everyone).
// Whoever may not list others' tokens still gets 403 first.
func TestTokensEmptyUserIsInvalid(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	srv.CreateUser(t, "tina", auth.RoleToolUser, "tina-password-123")
	tina := srv.Login(t, "tina", "tina-password-123")
	tinaUser, err := srv.Auth.GetUserByName(t.Context(), "tina")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Auth.CreateToken(t.Context(), audit.System, tinaUser.ID, auth.NewToken{Name: "tinas"}); err != nil {
		t.Fatal(err)
	}
	api := webtest.API{T: t, Srv: srv, C: admin}
	for _, path := range []string{"/api/v1/tokens?user=", "/api/v1/tokens?user=&all=1", "/api/v1/tokens?all=0&user="} {
		e := api.Error(http.MethodGet, path, nil, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(string(e.Error.Details), "user") {
			t.Errorf("GET %s: details %s do not name user", path, e.Error.Details)
		}
	}
	// A user id still narrows the list to theirs.
	var got struct {
		Tokens []struct{ Owner string } `json:"tokens"`
	}
	api.JSON(http.MethodGet, "/api/v1/tokens?user="+tinaUser.ID, nil, http.StatusOK, &got)
	if len(got.Tokens) != 1 || got.Tokens[0].Owner != "tina" {
		t.Errorf("?user=<tina's id>: %+v, want tina's one token", got.Tokens)
	}
	(webtest.API{T: t, Srv: srv, C: tina}).Error(http.MethodGet, "/api/v1/tokens?user=", nil, http.StatusForbidden, "forbidden")
}
