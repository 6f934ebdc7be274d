package web_test

import (
	"net/http"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A row's buttons on /users and /tools/categories say which user or category they act
// on: a screen reader tabbing through the table hears "Disable bob", not "Disable" once
// per row.
func TestRowButtonsNameTheirRow(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12345")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	webtest.API{T: t, Srv: srv, C: admin}.JSON(http.MethodPost, "/api/v1/categories", map[string]any{"name": "files"}, http.StatusCreated, nil)

	users := page(t, srv.Get(t, admin, "/users")).Find(`[data-testid=user-row][data-username=bob]`)
	for _, label := range []string{"Change role of bob", "Disable bob", "Reset password of bob"} {
		if users.Find(`button[aria-label="`+label+`"]`).Length() != 1 {
			t.Errorf("/users: no button labelled %q in bob's row", label)
		}
	}
	cats := page(t, srv.Get(t, admin, "/tools/categories")).Find(`[data-testid=category-row][data-category=files]`)
	if cats.Find(`button[aria-label="Delete category files"]`).Length() != 1 {
		t.Errorf("/tools/categories: no button labelled \"Delete category files\" in the row of files")
	}
}
