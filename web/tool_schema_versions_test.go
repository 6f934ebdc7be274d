package web_test

import (
	"context"
	"net/http"
	"testing"
)

// A tool whose server keeps changing its definition has thousands of stored versions:
// the Schema tab, open to guests, lists the newest ones, says older ones exist, and
// still compares the current definition with the one before it.
func TestToolSchemaManyVersions(t *testing.T) {
	t.Parallel()
	e := acStart(t)
	var current string
	if err := e.srv.Pool.QueryRow(context.Background(), `SELECT definition_hash FROM mcp_tools WHERE id = $1`, e.id).Scan(&current); err != nil {
		t.Fatal(err)
	}
	// Versions 0.1 … 0.5000, older than the discovered 1.0, each a distinct definition.
	if _, err := e.srv.Pool.Exec(context.Background(), `INSERT INTO tool_schemas (tool_id, version_major, version_minor, definition_hash, definition)
		SELECT $1, 0, g, md5(g::text), jsonb_build_object('name', 'echo', 'description', repeat('x', 2000) || g)
		FROM generate_series(1, 5000) g`, e.id); err != nil {
		t.Fatal(err)
	}
	doc := acGet(t, e, e.admin, "/tools/"+e.id+"?tab=schema", http.StatusOK)
	versions := doc.Find("[data-testid=version]")
	if n := versions.Length(); n == 0 || n > 100 {
		t.Fatalf("got %d versions listed, want 1 to 100", n)
	}
	if got := versions.First().AttrOr("data-hash", ""); got != current {
		t.Errorf("first version %s, want the current %s", got, current)
	}
	if doc.Find("[data-testid=older-versions]").Length() != 1 {
		t.Error("no note that older versions exist")
	}
	// The default comparison: the version before (0.5000) against the current one.
	if doc.Find("[data-testid=diff-error]").Length() != 0 || doc.Find("[data-testid=diff-line]").Length() == 0 {
		t.Errorf("default comparison: got error %q and %d diff lines, want a diff", doc.Find("[data-testid=diff-error]").Text(),
			doc.Find("[data-testid=diff-line]").Length())
	}
	// A version too old to be listed can still be compared (the History tab links to such
	// comparisons by hash).
	old := "c4ca4238a0b923820dcc509a6f75849b" // md5("1"): version 0.1
	doc = acGet(t, e, e.admin, "/tools/"+e.id+"?tab=schema&from="+old+"&to="+current, http.StatusOK)
	if doc.Find("[data-testid=diff-error]").Length() != 0 || doc.Find("[data-testid=diff-line]").Length() == 0 {
		t.Errorf("old version: got error %q and %d diff lines, want a diff", doc.Find("[data-testid=diff-error]").Text(),
			doc.Find("[data-testid=diff-line]").Length())
	}
	if got := doc.Find("#diff-from option[selected]").AttrOr("value", ""); got != old {
		t.Errorf("the from select shows %q, want the chosen old version", got)
	}
}
