package handlers

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// TokensHandler serves each user's own API tokens (pages and API).
type TokensHandler struct {
	*Shell
	Auth *auth.Service
	// Proxies are the trusted proxies (Origin: the URL agents connect to).
	Proxies []netip.Prefix
}

func (h TokensHandler) page(c echo.Context, status int, form views.NewTokenForm, revealed *views.Secret) error {
	toks, err := h.Auth.ListTokens(c.Request().Context(), PrincipalOf(c).User.ID)
	if err != nil {
		return err
	}
	token := ""
	if revealed != nil {
		token = revealed.Value
	}
	p := views.TokensPage{Layout: h.layout(c, "API tokens"), Form: form, Revealed: revealed,
		Connect: views.Connect(Origin(c.Request(), h.Proxies), token), DefaultTTL: "no expiry"}
	if ttl := h.Auth.TokenDefaultTTL(); ttl > 0 {
		p.DefaultTTL = ttlWords(ttl)
	}
	for _, t := range toks {
		p.Tokens = append(p.Tokens, tokenRow(t))
	}
	others, err := h.others(c)
	if err != nil {
		return err
	}
	return render(c, status, views.Tokens(p, others))
}

func tokenRow(t auth.Token) views.TokenRow {
	return views.TokenRow{ID: t.ID, Name: t.Name, Prefix: t.Prefix, Status: t.Status(),
		CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt, ExpiresAt: t.ExpiresAt, ExpiresSoon: t.ExpiresSoon}
}

// others is the section of other people's live tokens, for a person who manages users
// (nil for anyone else, and for an API token: tokens never manage tokens). ?user=<id>
// narrows it to one person.
func (h TokensHandler) others(c echo.Context) (*views.OthersTokens, error) {
	p := PrincipalOf(c)
	if p.Kind != audit.ActorUser || !p.Can(auth.PermUsers) {
		return nil, nil
	}
	user := c.QueryParam("user")
	if !uuidtext.Canonical(user) {
		user = "" // none, or a mangled link: everyone's
	}
	toks, total, err := h.Auth.ListOthersTokens(c.Request().Context(), p, user)
	if err != nil {
		return nil, err
	}
	o := &views.OthersTokens{More: total - len(toks), Listed: auth.OthersTokensListed, User: user}
	for _, t := range toks {
		o.Rows = append(o.Rows, views.OwnedTokenRow{TokenRow: tokenRow(t.Token), Owner: t.Owner, OwnerID: t.UserID})
	}
	return o, nil
}

// List renders the tokens page.
func (h TokensHandler) List(c echo.Context) error {
	return h.page(c, http.StatusOK, views.NewTokenForm{}, nil)
}

// Create issues a token from the form and shows it once.
func (h TokensHandler) Create(c echo.Context) error {
	name, days := c.FormValue("name"), strings.TrimSpace(c.FormValue("expires_in_days"))
	in := auth.NewToken{Name: name}
	var err error
	if days != "" {
		var n int
		if n, err = strconv.Atoi(days); err != nil {
			err = verr.New("expires_in_days", "must be a whole number of days")
		}
		in.ExpiresInDays = &n
	}
	var plain string
	var tok auth.Token
	if err == nil {
		plain, tok, err = h.Auth.CreateToken(c.Request().Context(), ActorOf(c), PrincipalOf(c).User.ID, in)
	}
	if fe, ok := formErrors(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, views.NewTokenForm{Name: name, ExpiresInDays: days, Errors: fe}, nil)
	}
	if err != nil {
		return err
	}
	return h.page(c, http.StatusCreated, views.NewTokenForm{}, &views.Secret{Title: "Token " + tok.Name + " created",
		Value: plain, Note: "Copy it now: it is shown only this once. Use it as Authorization: Bearer <token>."})
}

// Revoke revokes one of the user's tokens, or anyone's for an administrator (as
// APIRevoke), whose page lists other people's tokens; the service refuses an API token
// anyone else's, even an administrator's.
func (h TokensHandler) Revoke(c echo.Context) error {
	tok, err := h.Auth.RevokeToken(c.Request().Context(), ActorOf(c), c.Param("id"), revokeOwner(PrincipalOf(c)))
	back := "/tokens"
	if u := c.FormValue("back_user"); u != "" && uuidtext.Canonical(u) {
		back += "?user=" + u
	}
	return h.redirectWithOutcome(c, err, func() string { return "Token " + tok.Name + " revoked." }, back)
}

// revokeOwner limits a revocation to the caller's own tokens, unless they manage users.
func revokeOwner(p *auth.Principal) string {
	if p.Can(auth.PermUsers) {
		return ""
	}
	return p.User.ID
}

// APIList returns the caller's tokens; with ?all=1 (or ?user=<id>), other people's live
// tokens with their owner, for a person who manages users.
func (h TokensHandler) APIList(c echo.Context) error {
	q := c.QueryParams()
	if q.Has("all") || q.Has("user") {
		all, err := strconv.ParseBool(q.Get("all"))
		if q.Has("all") && err != nil {
			return verr.New("all", "must be 1 or 0")
		}
		if all || q.Has("user") {
			user := q.Get("user")
			if q.Has("user") && user == "" {
				// The service reads "" as everyone's; an empty user= is not a user id, so
				// it is refused as any other (after the refusal of whoever may not list).
				user = "(empty)"
			}
			toks, total, err := h.Auth.ListOthersTokens(c.Request().Context(), PrincipalOf(c), user)
			if err != nil {
				return err
			}
			if toks == nil {
				toks = []auth.OwnedToken{}
			}
			return c.JSON(http.StatusOK, map[string]any{"tokens": toks, "total": total})
		}
	}
	toks, err := h.Auth.ListTokens(c.Request().Context(), PrincipalOf(c).User.ID)
	if err != nil {
		return err
	}
	if toks == nil {
		toks = []auth.Token{}
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": toks})
}

// APICreate issues a token for the caller: {"name": "...", "expires_in_days": N}. The
// response's "token" is shown once.
func (h TokensHandler) APICreate(c echo.Context) error {
	var in auth.NewToken
	if err := bindJSONCreate(c, &in); err != nil {
		return err
	}
	plain, tok, err := h.Auth.CreateToken(c.Request().Context(), ActorOf(c), PrincipalOf(c).User.ID, in)
	if err != nil {
		return err
	}
	return secretJSON(c, http.StatusCreated, map[string]any{"token": plain, "info": tok})
}

// secretJSON answers with v, which carries a secret shown once (a token, a password):
// no cache may keep it, as render keeps no page.
func secretJSON(c echo.Context, status int, v any) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(status, v)
}

// APIRevoke revokes a token: the caller's own, or anyone's for an administrator signed in
// (never for an API token: auth.ErrTokenManagesTokens).
func (h TokensHandler) APIRevoke(c echo.Context) error {
	tok, err := h.Auth.RevokeToken(c.Request().Context(), ActorOf(c), c.Param("id"), revokeOwner(PrincipalOf(c)))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tok)
}

// ttlWords says a token lifetime in whole days when it is some, else in hours (36 hours,
// not 1 day), else as Go writes it.
func ttlWords(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0 && d >= 48*time.Hour:
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	case d%time.Hour == 0:
		if d == time.Hour {
			return "1 hour"
		}
		return strconv.Itoa(int(d/time.Hour)) + " hours"
	}
	return d.String()
}
