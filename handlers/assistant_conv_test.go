package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A person's page does not open their API token's conversation by its stored id
// (?c=~<token id>~<id>): ids holding "~" are a token's alone, and a page asked for one
// answers not found, as for any id no conversation can have.
func TestAssistantPageRefusesTokenConversationID(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := webtest.API{T: t, Srv: srv, C: srv.Login(t, "admin", webtest.AdminPassword)}
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	const tokenSaid = "show me the servers, token here"
	var r struct {
		ConversationID string `json:"conversation_id"`
	}
	tok.JSON(http.MethodPost, "/api/v1/assistant/messages", map[string]any{"conversation_id": "k1", "message": tokenSaid}, http.StatusOK, &r)
	var stored string
	if err := srv.Pool.QueryRow(t.Context(), `SELECT id FROM assistant_conversations WHERE id LIKE '~%'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/assistant?c=", "/assistant/panel?c="} {
		status, body := admin.Do(http.MethodGet, path+url.QueryEscape(stored), nil)
		if status != http.StatusNotFound || strings.Contains(string(body), tokenSaid) {
			t.Errorf("the person's GET %s%s: %d, shows the token's conversation: %v; want 404", path, stored, status, strings.Contains(string(body), tokenSaid))
		}
	}
	// An id a conversation can have still opens (empty when it has none).
	if status, body := admin.Do(http.MethodGet, "/assistant?c=c-1.ok", nil); status != http.StatusOK {
		t.Errorf("GET /assistant?c=c-1.ok: %d %.200s", status, body)
	}
}
