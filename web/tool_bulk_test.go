package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
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

// A bulk tag refused for a very long tag still says why: the flash cookie stays well
// under the 4 KB a browser keeps, the tag clipped in the message.
func TestToolBulkTagLongTagFlash(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	seedTools(t, srv, "longtag", true, toolDef("deploy", "Deploys the build to the environment given.", `{"readOnlyHint":true}`))
	c := srv.Login(t, "admin", webtest.AdminPassword)
	long := "Ü" + strings.Repeat("é!", 3000)
	res := srv.PostForm(t, c, "/tools/bulk", url.Values{"id": {srv.ToolID(t, "longtag__deploy")}, "action": {"tag"}, "tags": {long}, "back": {"/tools"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("refused bulk tag: got %d", res.StatusCode)
	}
	flash := ""
	for _, sc := range res.Header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "tw_flash=") {
			flash = sc
		}
	}
	if flash == "" || len(flash) > 3500 {
		t.Fatalf("the flash cookie is %d bytes, want one well under 4096", len(flash))
	}
	res = srv.Get(t, c, res.Header.Get("Location"))
	if msg := page(t, res).Find("[data-testid=flash]").Text(); !strings.Contains(msg, "is not a tag") || len(msg) > 400 {
		t.Errorf("the refusal reads %q (%d bytes), want a short one saying the tag is not one", msg, len(msg))
	}
}
