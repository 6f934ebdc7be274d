package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

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
