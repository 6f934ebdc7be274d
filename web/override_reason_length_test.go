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
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The override form's reason is bounded in characters, as its textarea's maxlength
// counts them: 700 characters of a script that takes three bytes each (2,100 bytes)
// enable the tool; 2,001 characters bring the page back (422) with the reason as typed
// in the textarea and the problem at it, not a flash that loses it; an override the
// tool refuses (its definition changed) keeps the reason too.
func TestOverrideReasonCountsCharacters(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "ovr"})
	up.Server().SetTool(mcptest.ToolSpec{Name: "broken", Description: "Has a broken schema.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"strin"}}}`)})
	srv.RegisterServer(t, registry.Spec{Name: "ovr", Type: registry.TypeStreamableHTTP, URL: up.URL(), Enabled: true, Trusted: true})
	if tg := srv.App.Settled(t, "ovr__broken"); tg.Status != "invalid" {
		t.Fatalf("the broken tool is %s, want invalid", tg.Status)
	}
	id := srv.ToolID(t, "ovr__broken")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	// The form as the page sends it, with the definition the page shows.
	doc := page(t, srv.Get(t, admin, "/tools/"+id))
	hash := doc.Find(`input[name=definition_hash][form="tool-override-form-`+id+`"]`).AttrOr("value", "")
	if hash == "" || doc.Find("[data-testid=override-form]").Length() != 1 {
		t.Fatal("the invalid tool's page has no override form with its definition")
	}
	override := func(reason, seen string, want int) *goquery.Document {
		res := srv.PostForm(t, admin, "/tools/"+id+"/enable", url.Values{"override": {"1"}, "reason": {reason},
			"back": {"/tools/" + id}, "definition_hash": {seen}})
		html := bodyString(t, res)
		if res.StatusCode != want {
			t.Fatalf("a reason of %d characters: %d, want %d: %.300s", len([]rune(reason)), res.StatusCode, want, html)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}

	long := strings.Repeat("审", 2000) + "查" // 2,001 characters
	doc = override(long, hash, http.StatusUnprocessableEntity)
	form := doc.Find("#tool-head-" + id + " [data-testid=override-form]")
	area := form.Find("textarea[name=reason]")
	if got := area.Text(); got != long {
		t.Errorf("the textarea holds %d characters, want the 2,001 typed", len([]rune(got)))
	}
	msg := form.Find("[data-testid=override-reason-error]")
	if !strings.Contains(msg.Text(), "at most 2000 characters") {
		t.Errorf("the error at the reason: %q, want it too long", msg.Text())
	}
	if area.AttrOr("aria-invalid", "") != "true" || area.AttrOr("aria-describedby", "") != msg.AttrOr("id", "-") {
		t.Errorf("the textarea: aria-invalid %q, aria-describedby %q; want it invalid and described by the error %q",
			area.AttrOr("aria-invalid", ""), area.AttrOr("aria-describedby", ""), msg.AttrOr("id", ""))
	}
	if got := doc.Find(`input[name=definition_hash][form="tool-override-form-`+id+`"]`).AttrOr("value", ""); got != hash {
		t.Errorf("the page sends definition %q again, want %q (the one it was opened at)", got, hash)
	}
	if it, err := srv.Tools.Get(context.Background(), id); err != nil || it.Status != "invalid" {
		t.Fatalf("the refused override left the tool %s (%v), want invalid", it.Status, err)
	}

	// Refused by the tool rather than for the reason (a definition other than the one
	// shown): the page again with the refusal at the top (409), the reason still typed.
	reason := strings.Repeat("理", 700) // 2,100 bytes
	doc = override(reason, strings.Repeat("0", 64), http.StatusConflict)
	if flash := doc.Find("[data-testid=flash]"); !flash.HasClass("error") || !strings.Contains(flash.Text(), "changed since you opened it") {
		t.Errorf("flash %q, want an error saying the definition changed", flash.Text())
	}
	if got := doc.Find("#tool-head-" + id + " textarea[name=reason]").Text(); got != reason {
		t.Errorf("after a stale override the textarea holds %d characters, want the 700 typed", len([]rune(got)))
	}
	if doc.Find("[data-testid=override-reason-error]").Length() != 0 {
		t.Error("a stale definition is said at the reason, which is not at fault")
	}

	res := srv.PostForm(t, admin, "/tools/"+id+"/enable", url.Values{"override": {"1"}, "reason": {reason},
		"back": {"/tools/" + id}, "definition_hash": {hash}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a 700-character reason: %d, want 303", res.StatusCode)
	}
	it, err := srv.Tools.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != "enabled" || it.EnableOverride == nil || *it.EnableOverride != reason {
		t.Fatalf("after a 700-character reason: %s, override kept %v; want enabled with the reason", it.Status, it.EnableOverride != nil)
	}
}
