package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// Deleting a server whose tool undoes another server's tool removes that compensation
// (the cascade): the page says which tools lost their undo step, rather than leave it
// to be found at their next rollback, and its confirmation says so before.
func TestServerDeleteSaysLostUndo(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "aa", false, "write-note")
	srv.LiveServer(t, "bb", false, "echo")
	if _, err := srv.App.Pool.Exec(t.Context(), `INSERT INTO tool_compensations (tool_id, undo_tool_id, argument_map)
		VALUES ($1, $2, '{}')`, srv.ToolID(t, "aa__write-note"), srv.ToolID(t, "bb__echo")); err != nil {
		t.Fatal(err)
	}
	var bb string
	if err := srv.App.Pool.QueryRow(t.Context(), `SELECT id::text FROM mcp_servers WHERE name = 'bb'`).Scan(&bb); err != nil {
		t.Fatal(err)
	}
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	// Asked before: the delete button's confirmation says it, on the list and the page.
	for _, path := range []string{"/servers", "/servers/" + bb} {
		d := page(t, srv.Get(t, admin, path))
		q, _ := d.Find(`form[action="/servers/` + bb + `/delete"]`).First().Attr("data-confirm")
		if !strings.Contains(q, "Delete bb?") || !strings.Contains(q, "1 tool of another server loses the undo step") {
			t.Errorf("%s: the delete confirmation asks %q; want it to say a tool of another server loses its undo step", path, q)
		}
	}
	res := srv.PostForm(t, admin, "/servers/"+bb+"/delete", nil)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: HTTP %d, want 303", res.StatusCode)
	}
	res = srv.Get(t, admin, res.Header.Get("Location"))
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	flash := doc.Find("[data-testid=flash]").Text()
	if !strings.Contains(flash, "Server bb deleted.") || !strings.Contains(flash, "1 tool of another server lost the undo step it gave it (aa__write-note)") {
		t.Errorf("after the delete the page says %q; want it to name aa__write-note as having lost its undo step", flash)
	}
}
