package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
)

// A Reconnect whose audit record cannot be written is not done, by the API or by the
// server page's button: the session stays as it was, and the answer says why.
func TestReconnectRefusedWithoutItsAuditRecord(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "ra", true, "echo")
	var id string
	if err := srv.Pool.QueryRow(t.Context(), `SELECT id::text FROM mcp_servers WHERE name = 'ra'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	before, err := srv.MCP.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Exec(t, srv.Owner, `
		CREATE FUNCTION refuse_reconnect() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.action = 'server.reconnect' THEN RAISE EXCEPTION 'audit log full'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_reconnect BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_reconnect();`)
	const why = "not reconnected because its audit record could not be written"

	admin := srv.Login(t, "admin", webtest.AdminPassword)
	code, body := webtest.API{T: t, Srv: srv, C: admin}.Do(http.MethodPost, "/api/v1/servers/"+id+"/reconnect", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), why) {
		t.Errorf("API reconnect without its audit record: got %d %s; want 503 saying why", code, body)
	}
	res := srv.PostForm(t, admin, "/servers/"+id+"/reconnect", url.Values{})
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(page), why) {
		t.Errorf("the Reconnect button without its audit record: got %d; want 503 saying why", res.StatusCode)
	}
	if cs, err := srv.MCP.Session(id); err != nil || cs != before {
		t.Errorf("after the refused reconnects: session %p (%v), want the one before, %p", cs, err, before)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM events WHERE kind = 'server.reconnect'`); n != 0 {
		t.Errorf("the refused reconnects were announced to the other replicas: %d events", n)
	}
}
