package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Enter in the bulk Tags box adds the tags: the form's first submit button, the one a
// browser's implicit submission clicks, is Add tags, not Enable.
func TestToolsBulkDefaultButtonTags(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	doc := page(t, srv.Get(t, c, "/tools"))
	first := doc.Find(`form#bulk button[type=submit], form#bulk input[type=submit]`).First()
	if first.AttrOr("name", "") != "action" || first.AttrOr("value", "") != "tag" {
		t.Errorf("the bulk form's default button posts action=%q; Enter in the Tags box must add the tags", first.AttrOr("value", ""))
	}
	// The visible buttons are still all there, in their order.
	var shown []string
	doc.Find(`form#bulk button[type=submit]:not([hidden])`).Each(func(_ int, s *goquery.Selection) { shown = append(shown, s.AttrOr("value", "")) })
	if strings.Join(shown, ",") != "enable,disable,tag,untag" {
		t.Errorf("the visible bulk buttons are %v", shown)
	}
}

// The test cases table scrolls inside .table-wrap on a narrow screen; Delete asks
// first, naming the case; Run all says it is running (data-busy, app.js).
func TestTestPanelCasesMarkup(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	id := srv.App.Enable(t, "builtin__file_operations").ID
	if _, err := srv.Tools.SaveTestCase(context.Background(), audit.System, id, tools.TestCase{Name: "read a.txt",
		Arguments: json.RawMessage(`{"operation":"read_file","filePath":"a.txt"}`), Expect: "success"}); err != nil {
		t.Fatal(err)
	}
	c := srv.Login(t, "admin", webtest.AdminPassword)
	doc := page(t, srv.Get(t, c, "/tools/"+id+"/test"))
	if doc.Find(`[data-testid="test-cases"] .table-wrap > table`).Length() != 1 {
		t.Error("the test cases table is not inside .table-wrap: it runs off a narrow screen")
	}
	del := doc.Find(`[data-testid="case-delete"]`).Closest("form")
	if got := del.AttrOr("data-confirm", ""); !strings.Contains(got, "read a.txt") {
		t.Errorf("Delete case asks %q, want a confirmation naming the case", got)
	}
	all := doc.Find(`[data-testid="run-all-form"]`)
	if all.Length() != 1 || !strings.Contains(all.AttrOr("data-busy", ""), "Running") {
		t.Errorf("Run all (%d forms) has data-busy=%q, want it to say it is running", all.Length(), all.AttrOr("data-busy", ""))
	}
}

// A category's Edit form is not a floating menu inside the scrolling table (which
// clipped it): it is a row of its own below the category, shown while Edit is open, and
// open again after a refused save.
func TestCategoryEditRow(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.PostForm(t, c, "/tools/categories", url.Values{"name": {"filesystem"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", res.StatusCode)
	}
	doc := page(t, srv.Get(t, c, "/tools/categories"))
	row := doc.Find(`[data-testid=category-row][data-category=filesystem]`)
	edit := row.Next()
	if edit.AttrOr("data-testid", "") != "category-edit" || edit.Find(`td[colspan] [data-testid=category-form]`).Length() != 1 {
		t.Fatalf("no edit row below the category: %q", edit.AttrOr("data-testid", ""))
	}
	if doc.Find(`.menu-items [data-testid=category-form]`).Length() != 0 {
		t.Error("the edit form is still in a floating menu")
	}
	toggle := row.Find(`details.category-edit-toggle > summary`)
	if toggle.Length() != 1 || toggle.AttrOr("aria-controls", "") != edit.AttrOr("id", "-") {
		t.Errorf("the Edit toggle (%d) controls %q, want the edit row %q", toggle.Length(), toggle.AttrOr("aria-controls", ""), edit.AttrOr("id", ""))
	}
	if _, open := row.Find(`details.category-edit-toggle`).Attr("open"); open {
		t.Error("Edit is open on a fresh page")
	}
	action := edit.Find(`[data-testid=category-form]`).AttrOr("action", "")
	res = srv.PostForm(t, c, action, url.Values{"name": {"Bad Name!"}})
	doc = page(t, res)
	row = doc.Find(`[data-testid=category-row][data-category=filesystem]`)
	if _, open := row.Find(`details.category-edit-toggle`).Attr("open"); res.StatusCode != http.StatusUnprocessableEntity || !open ||
		row.Next().Find(`.error`).Length() == 0 {
		t.Errorf("a refused edit: %d, Edit open %v, errors in its row %d", res.StatusCode, open, row.Next().Find(`.error`).Length())
	}
}
