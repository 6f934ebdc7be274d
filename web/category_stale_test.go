package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A category's edit form opened before someone else changed the category does not undo
// that change when saved: it comes back (409) with what was typed and a notice to reload,
// and stays refused until reloaded. The API's PATCH takes the same precondition as
// expect_updated_at.
func TestCategoryEditFormStale(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	var cat tools.Category
	api.JSON(http.MethodPost, "/api/v1/categories", map[string]any{"name": "filesystem", "description": "files"}, http.StatusCreated, &cat)
	const sel = `[data-testid=category-row][data-category=filesystem] + tr [data-testid=category-form]`
	editForm := func(doc *goquery.Document) (string, url.Values) {
		t.Helper()
		f := doc.Find(sel)
		if f.Length() != 1 {
			t.Fatalf("no edit form for filesystem")
		}
		return f.AttrOr("action", ""), submitted(doc, sel)
	}
	get := func() tools.Category {
		t.Helper()
		var out struct{ Categories []tools.Category }
		api.JSON(http.MethodGet, "/api/v1/categories", nil, http.StatusOK, &out)
		for _, c := range out.Categories {
			if c.ID == cat.ID {
				return c
			}
		}
		t.Fatalf("category %s is gone", cat.ID)
		return tools.Category{}
	}

	// Admin A opens the page; admin B turns auto-enable on.
	action, form := editForm(page(t, srv.Get(t, admin, "/tools/categories")))
	api.JSON(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"name": "filesystem", "description": "files", "auto_enable": true}, http.StatusOK, nil)

	// A fixes the description and saves.
	form.Set("description", "files and folders")
	res := srv.PostForm(t, admin, action, form)
	doc := page(t, res)
	got := get()
	if !got.AutoEnable || got.Description != "files" {
		t.Fatalf("saving a form opened before the change: got %d, auto_enable %v, description %q; want B's auto-enable kept and nothing stored",
			res.StatusCode, got.AutoEnable, got.Description)
	}
	notice := doc.Find(sel + ` [data-testid=error-updated_at]`)
	if res.StatusCode != http.StatusConflict || !strings.Contains(notice.Text(), "Someone else changed this category") ||
		notice.Find(`a[href="/tools/categories"]`).Length() != 1 {
		t.Fatalf("the stale form: got %d, notice %q; want 409 with a notice to reload", res.StatusCode, notice.Text())
	}
	if _, open := doc.Find(`[data-testid=category-row][data-category=filesystem] details.category-edit-toggle`).Attr("open"); !open {
		t.Error("the refused edit is not open")
	}
	_, back := editForm(doc)
	if back.Get("description") != "files and folders" {
		t.Errorf("the stale form shows description %q, want what was typed", back.Get("description"))
	}
	// Saved again as it came back, it is still refused: the reload is what shows the change.
	res = srv.PostForm(t, admin, action, back)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict {
		t.Errorf("the stale form saved again: got %d, want 409", res.StatusCode)
	}

	// Reloaded, the same edit saves and keeps B's change.
	action, form = editForm(page(t, srv.Get(t, admin, "/tools/categories")))
	form.Set("description", "files and folders")
	res = srv.PostForm(t, admin, action, form)
	res.Body.Close()
	if got = get(); res.StatusCode != http.StatusSeeOther || got.Description != "files and folders" || !got.AutoEnable {
		t.Fatalf("the reloaded form: got %d, %+v", res.StatusCode, got)
	}

	// The API: a stale expect_updated_at is refused, the current one accepted.
	stale := got.UpdatedAt.Add(-time.Microsecond).Format(time.RFC3339Nano)
	api.Error(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"name": "filesystem", "expect_updated_at": stale},
		http.StatusConflict, tools.CodeStaleCategory)
	if got2 := get(); !got2.AutoEnable || got2.Description != "files and folders" {
		t.Errorf("a refused PATCH changed the category: %+v", got2)
	}
	api.JSON(http.MethodPatch, "/api/v1/categories/"+cat.ID, map[string]any{"auto_enable": false, "expect_updated_at": got.UpdatedAt.Format(time.RFC3339Nano)},
		http.StatusOK, nil)
	if got = get(); got.AutoEnable || got.Description != "files and folders" {
		t.Errorf("PATCH with the current expect_updated_at did not apply (or changed what it left out): %+v", got)
	}
}
