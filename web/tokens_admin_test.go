package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// tokensPage fetches /tokens with c and parses it, keeping the raw body too.
func tokensPage(t *testing.T, srv *webtest.Server, c *http.Client, path string) (*goquery.Document, string) {
	t.Helper()
	res := srv.Get(t, c, path)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return doc, string(body)
}

// An administrator answering a compromised account sees every other person's live
// tokens on /tokens and in GET /api/v1/tokens?all=1, revokes one through the page,
// and the revocation is audited naming its owner. Nobody else gets the section or
// the parameter, and no API token does, even an administrator's.
func TestAdminSeesAndRevokesOthersTokens(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	srv.CreateUser(t, "tina", auth.RoleToolUser, "tina-password-123")
	tina := srv.Login(t, "tina", "tina-password-123")
	ctx := t.Context()
	tinaUser, err := srv.Auth.GetUserByName(ctx, "tina")
	if err != nil {
		t.Fatal(err)
	}
	leaked, leakedTok, err := srv.Auth.CreateToken(ctx, audit.System, tinaUser.ID, auth.NewToken{Name: "attacker-made"})
	if err != nil {
		t.Fatal(err)
	}
	_, keptTok, err := srv.Auth.CreateToken(ctx, audit.System, tinaUser.ID, auth.NewToken{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	adminToken := srv.Token(t, "admin")
	leakedAPI := webtest.API{T: t, Srv: srv, Bearer: leaked}
	if st, body := leakedAPI.Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusOK {
		t.Fatalf("tina's token before revocation: %d %s", st, body)
	}

	// The administrator's page lists tina's tokens, with owner, and never the secret.
	doc, body := tokensPage(t, srv, admin, "/tokens")
	section := doc.Find("[data-testid=others-tokens]")
	if section.Length() != 1 {
		t.Fatal("the administrator's /tokens has no section of other people's tokens")
	}
	row := section.Find("[data-testid=others-token-row][data-token-name=attacker-made]")
	if row.Length() != 1 {
		t.Fatalf("tina's token attacker-made is not listed: %q", section.Text())
	}
	if got := strings.TrimSpace(row.Find("[data-testid=token-owner]").Text()); got != "tina" {
		t.Errorf("owner shown %q, want tina", got)
	}
	if strings.Contains(body, leaked) {
		t.Fatal("the page shows the token's secret")
	}
	if section.Find("[data-testid=others-token-row]").FilterFunction(func(_ int, s *goquery.Selection) bool {
		return strings.TrimSpace(s.Find("[data-testid=token-owner]").Text()) == "admin"
	}).Length() != 0 {
		t.Error("the administrator's own tokens are listed among other people's")
	}
	form := row.Find("form")
	action, _ := form.Attr("action")
	if form.AttrOr("method", "") != "post" || action == "" || form.AttrOr("data-confirm", "") == "" ||
		form.Find("button[type=submit]").Length() != 1 {
		t.Fatalf("the row's revoke is not a confirmed POST form with a button: %q", row.Text())
	}

	// The API: the same list, with the owner, for the administrator's session.
	adminAPI := webtest.API{T: t, Srv: srv, C: admin}
	var all struct {
		Tokens []map[string]any `json:"tokens"`
		Total  *int             `json:"total"`
	}
	adminAPI.JSON(http.MethodGet, "/api/v1/tokens?all=1", nil, http.StatusOK, &all)
	seen := map[string]map[string]any{}
	for _, tk := range all.Tokens {
		seen[tk["id"].(string)] = tk
		if _, ok := tk["token_hash"]; ok {
			t.Errorf("token %v carries its hash", tk["id"])
		}
	}
	if tk := seen[leakedTok.ID]; tk == nil || tk["owner"] != "tina" || tk["name"] != "attacker-made" || tk["user_id"] != tinaUser.ID {
		t.Errorf("?all=1 for the administrator: tina's token is %v, want it with owner tina", tk)
	}
	if seen[keptTok.ID] == nil {
		t.Errorf("?all=1 for the administrator: tina's token ci is missing")
	}
	if all.Total == nil || *all.Total != len(all.Tokens) {
		t.Errorf("?all=1: total %v for %d tokens listed", all.Total, len(all.Tokens))
	}
	// Without the parameter the route answers as before: the caller's own tokens.
	var own struct {
		Tokens []map[string]any `json:"tokens"`
	}
	adminAPI.JSON(http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &own)
	for _, tk := range own.Tokens {
		if tk["user_id"] == tinaUser.ID || tk["owner"] != nil {
			t.Errorf("GET /api/v1/tokens without ?all: %v", tk)
		}
	}

	// Revoking through the page's form ends the token; the audit row names its owner.
	res := srv.PostForm(t, admin, action, nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s: %d, want 303", action, res.StatusCode)
	}
	if st, _ := leakedAPI.Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusUnauthorized {
		t.Fatalf("tina's revoked token: %d, want 401", st)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'token.revoke' AND target_id = $1
		AND actor_name = 'admin' AND payload->>'user' = 'tina'`, leakedTok.ID); n != 1 {
		t.Fatalf("%d token.revoke rows by admin naming tina as the owner, want 1", n)
	}
	doc, _ = tokensPage(t, srv, admin, "/tokens")
	if doc.Find("[data-testid=others-token-row][data-token-name=attacker-made]").Length() != 0 {
		t.Error("the revoked token is still listed as live")
	}
	if doc.Find("[data-testid=others-token-row][data-token-name=ci]").Length() != 1 {
		t.Error("tina's other token is no longer listed")
	}

	// tina, a tool user: no section, 403 on the parameter, her own list as before, and
	// the page's revoke still reaches only her own tokens.
	doc, _ = tokensPage(t, srv, tina, "/tokens")
	if doc.Find("[data-testid=others-tokens]").Length() != 0 {
		t.Error("a tool user's /tokens has the section of other people's tokens")
	}
	tinaAPI := webtest.API{T: t, Srv: srv, C: tina}
	tinaAPI.Error(http.MethodGet, "/api/v1/tokens?all=1", nil, http.StatusForbidden, "forbidden")
	tinaAPI.Error(http.MethodGet, "/api/v1/tokens?user="+tinaUser.ID, nil, http.StatusForbidden, "forbidden")
	tinaAPI.JSON(http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &own)
	if len(own.Tokens) != 2 {
		t.Errorf("tina's own list: %d tokens, want 2 (one revoked)", len(own.Tokens))
	}
	adminToks, err := srv.Auth.ListTokens(ctx, adminID(t, srv))
	if err != nil || len(adminToks) != 1 {
		t.Fatalf("admin's tokens: %v %v", adminToks, err)
	}
	res = srv.PostForm(t, tina, "/tokens/"+adminToks[0].ID+"/revoke", nil)
	res.Body.Close()
	if st, _ := (webtest.API{T: t, Srv: srv, Bearer: adminToken}).Do(http.MethodGet, "/api/v1/tools", nil); st != http.StatusOK {
		t.Fatalf("a tool user revoked the administrator's token through the page: the token now answers %d", st)
	}

	// An API token never manages tokens, even an administrator's.
	byToken := webtest.API{T: t, Srv: srv, Bearer: adminToken}
	byToken.Error(http.MethodGet, "/api/v1/tokens?all=1", nil, http.StatusForbidden, "forbidden")
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err = srv.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK && strings.Contains(string(page), `data-testid="others-tokens"`) {
		t.Error("an administrator's API token gets the section of other people's tokens on /tokens")
	}
}
