package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// An API token's GET /assistant and /assistant/panel show the token's own conversation,
// never the person's: not their latest, and not one named by its id (docs/assistant.md,
// "a token's conversations are its own, never the one a person's page opens").
func TestAssistantPagesKeepATokenToItsOwn(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	const personSaid, tokenSaid = "how do I add a server?", "list servers"
	pc := ""
	asstSay(t, admin, &pc, personSaid, "guide you through adding a server")

	get := func(api webtest.API, path string) string {
		t.Helper()
		status, body := api.Do(http.MethodGet, path, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		return string(body)
	}
	paths := []string{"/assistant", "/assistant/panel", "/assistant?c=" + url.QueryEscape(pc), "/assistant/panel?c=" + url.QueryEscape(pc)}
	for _, p := range paths {
		if body := get(tok, p); strings.Contains(body, personSaid) {
			t.Errorf("the token's GET %s shows the person's conversation", p)
		}
	}

	// The token's own conversation is what its pages show; the person's page keeps theirs.
	tc := ""
	asstSay(t, tok, &tc, tokenSaid, "There are no MCP servers")
	for _, p := range paths[:2] {
		if body := get(tok, p); !strings.Contains(body, tokenSaid) || strings.Contains(body, personSaid) {
			t.Errorf("the token's GET %s does not show its own conversation alone", p)
		}
	}
	if body := get(admin, "/assistant"); !strings.Contains(body, personSaid) || strings.Contains(body, tokenSaid) {
		t.Errorf("the person's page does not show their own conversation alone")
	}
}
