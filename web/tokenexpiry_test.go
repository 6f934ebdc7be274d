package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/web"
)

// API tokens get the default lifetime when their creator names none (an explicit one,
// or 0 for never, still wins), and their owner is warned in the week before one ends
// (the last quarter of a shorter life):
// expires_soon in the API, a badge on /tokens, a banner on every page, and a header
// on every answer to the token.
func TestTokenDefaultExpiryAndWarning(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Auth: &auth.Options{TokenDefaultTTL: 30 * 24 * time.Hour}})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	type created struct {
		Token string     `json:"token"`
		Info  auth.Token `json:"info"`
	}
	var def, never, short, week created
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "default"}, http.StatusCreated, &def)
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "never", "expires_in_days": 0}, http.StatusCreated, &never)
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "short", "expires_in_days": 3}, http.StatusCreated, &short)
	// A token made for a week is not "expiring soon" from its first minute: the warning
	// comes in the last quarter of a life shorter than four weeks.
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "week", "expires_in_days": 7}, http.StatusCreated, &week)
	if week.Info.ExpiresSoon || short.Info.ExpiresSoon {
		t.Errorf("fresh 7- and 3-day tokens: soon %v %v, want neither", week.Info.ExpiresSoon, short.Info.ExpiresSoon)
	}
	// short was made ten days ago (thirteen days of life): its last three days are in the
	// warning window.
	if _, err := srv.App.Pool.Exec(t.Context(), `UPDATE api_tokens SET created_at = now() - interval '10 days' WHERE id::text = $1`, short.Info.ID); err != nil {
		t.Fatal(err)
	}
	if e := def.Info.ExpiresAt; e == nil || time.Until(*e) < 29*24*time.Hour || time.Until(*e) > 31*24*time.Hour || def.Info.ExpiresSoon {
		t.Errorf("default: expires %v soon %v, want in 30 days and not soon", e, def.Info.ExpiresSoon)
	}
	if never.Info.ExpiresAt != nil || never.Info.ExpiresSoon {
		t.Errorf("explicit 0: expires %v, want never", never.Info.ExpiresAt)
	}
	var list struct {
		Tokens []auth.Token `json:"tokens"`
	}
	api.JSON(http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &list)
	soon := map[string]bool{}
	for _, tk := range list.Tokens {
		soon[tk.Name] = tk.ExpiresSoon
	}
	if !soon["short"] || soon["default"] || soon["never"] || soon["week"] {
		t.Errorf("list: expires_soon %v", soon)
	}

	// The owner's pages warn; /tokens marks the token.
	doc := page(t, srv.Get(t, admin, "/tokens"))
	if doc.Find(`[data-token-name="short"] [data-testid="token-expires-soon"]`).Length() != 1 ||
		doc.Find(`[data-token-name="default"] [data-testid="token-expires-soon"]`).Length() != 0 {
		t.Error("/tokens does not mark exactly the token that expires soon")
	}
	doc = page(t, srv.Get(t, admin, "/tools"))
	if b := doc.Find(`[data-testid="token-expiring"]`); b.Length() != 1 || !strings.Contains(b.Text(), "short") {
		t.Errorf("banner on /tools: %q", b.Text())
	}
	// Another user sees no banner about admin's token.
	srv.CreateUser(t, "tess", auth.RoleToolUser, "tess-password-123")
	doc = page(t, srv.Get(t, srv.Login(t, "tess", "tess-password-123"), "/tools"))
	if doc.Find(`[data-testid="token-expiring"]`).Length() != 0 {
		t.Error("another user is warned about admin's token")
	}

	// An agent using the token hears it from every answer.
	for tok, want := range map[string]bool{short.Token: true, def.Token: false, never.Token: false, week.Token: false} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get(web.TokenExpiresHeader) != ""; got != want || res.StatusCode != 200 {
			t.Errorf("token %s…: %d, header %q, want header %v", tok[:8], res.StatusCode, res.Header.Get(web.TokenExpiresHeader), want)
		}
	}
}

// An expired token keeps its name until it is revoked, as creating another of that
// name says: /tokens offers its Revoke, and revoking it frees the name.
func TestExpiredTokenRevocable(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	var made struct {
		Info auth.Token `json:"info"`
	}
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "ci", "expires_in_days": 3}, http.StatusCreated, &made)
	if _, err := srv.App.Pool.Exec(t.Context(), `UPDATE api_tokens SET expires_at = now() - interval '1 hour' WHERE id::text = $1`, made.Info.ID); err != nil {
		t.Fatal(err)
	}
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "ci"}, http.StatusBadRequest, nil)
	doc := page(t, srv.Get(t, admin, "/tokens"))
	if doc.Find(`[data-token-name="ci"] [data-testid="revoke-token"]`).Length() != 1 {
		t.Fatal("/tokens offers no Revoke for the expired token whose name it holds")
	}
	api.JSON(http.MethodDelete, "/api/v1/tokens/"+made.Info.ID, nil, http.StatusOK, nil)
	api.JSON(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "ci"}, http.StatusCreated, nil)
	api.JSON(http.MethodDelete, "/api/v1/tokens/00000000-0000-4000-8000-000000000000", nil, http.StatusNotFound, nil)
}
