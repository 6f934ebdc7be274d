package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/decide"
)

// A settings form opened before another admin saved does not undo their change: a field
// the person did not touch is left as it is now, and a field both changed is refused
// (409) with a notice naming it and saying what it is now, until the form is reloaded.
func TestExecutionSettingsFormStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	a := srv.Login(t, "admin", webtest.AdminPassword)
	b := srv.Login(t, "admin", webtest.AdminPassword)
	const path = "/settings/executions"
	const sel = "[data-testid=settings-form]"
	open := func(c *http.Client) url.Values {
		t.Helper()
		res := srv.Get(t, c, path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("settings form: got %d", res.StatusCode)
		}
		return submitted(page(t, res), sel)
	}
	save := func(c *http.Client, form url.Values) (*http.Response, *goquery.Document) {
		t.Helper()
		res := srv.PostForm(t, c, path, form)
		return res, page(t, res)
	}
	stored := func() (time.Duration, decide.Separation) {
		t.Helper()
		st, err := srv.Executions.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.ApprovalTTL, st.HighSeparation
	}

	// A opens the form (auto); B makes the separation stricter; A changes only the expiry.
	formA := open(a)
	if formA.Get("high_separation") != "auto" {
		t.Fatalf("fresh form: high_separation %q, want auto", formA.Get("high_separation"))
	}
	formB := open(b)
	formB.Set("high_separation", "always")
	if res, _ := save(b, formB); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("B's save: got %d", res.StatusCode)
	}
	formA.Set("approval_ttl_value", "2")
	formA.Set("approval_ttl_unit", "hours")
	res, _ := save(a, formA)
	if ttl, sep := stored(); res.StatusCode != http.StatusSeeOther || ttl != 2*time.Hour || sep != decide.SeparationAlways {
		t.Fatalf("A's stale form changing only the expiry: got %d, stored %v / %s; want 303, 2h and B's %q kept",
			res.StatusCode, ttl, sep, decide.SeparationAlways)
	}

	// The other way round: A opens the form, B changes the expiry, A changes only the separation.
	formA = open(a)
	formB = open(b)
	formB.Set("approval_ttl_value", "3")
	if res, _ := save(b, formB); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("B's save: got %d", res.StatusCode)
	}
	formA.Set("high_separation", "off")
	res, _ = save(a, formA)
	if ttl, sep := stored(); res.StatusCode != http.StatusSeeOther || ttl != 3*time.Hour || sep != decide.SeparationOff {
		t.Fatalf("A's stale form changing only the separation: got %d, stored %v / %s; want 303, B's 3h kept and off",
			res.StatusCode, ttl, sep)
	}

	// Both change the same field: A's save is refused, naming the field and its value now.
	formA = open(a)
	formB = open(b)
	formB.Set("high_separation", "always")
	if res, _ := save(b, formB); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("B's save: got %d", res.StatusCode)
	}
	formA.Set("high_separation", "auto")
	formA.Set("approval_ttl_value", "5")
	res, doc := save(a, formA)
	notice := doc.Find("[data-testid=settings-stale]")
	field := doc.Find("[data-testid=error-high_separation]")
	if ttl, sep := stored(); res.StatusCode != http.StatusConflict || ttl != 3*time.Hour || sep != decide.SeparationAlways {
		t.Fatalf("A's stale form changing the separation B changed: got %d, stored %v / %s; want 409 and nothing changed (3h, always)",
			res.StatusCode, ttl, sep)
	}
	if !strings.Contains(notice.Text(), "who approves a high-risk plan") || !strings.Contains(notice.Text(), "always someone other than its requester") ||
		notice.Find(`a[href="`+path+`"]`).Length() != 1 || !strings.Contains(field.Text(), "always someone other than its requester") {
		t.Errorf("the refusal: notice %q, at the field %q; want the field named, its value now, and a Reload link", notice.Text(), field.Text())
	}
	back := submitted(doc, sel)
	if back.Get("high_separation") != "auto" || back.Get("approval_ttl_value") != "5" {
		t.Errorf("the refused form shows %q / %q, want what was typed (auto, 5)", back.Get("high_separation"), back.Get("approval_ttl_value"))
	}
	// Saved again as it came back, it is still refused: the reload is what shows the change.
	if res, _ := save(a, back); res.StatusCode != http.StatusConflict {
		t.Errorf("the refused form saved again: got %d, want 409", res.StatusCode)
	}

	// The same for the expiry.
	formA = open(a)
	formB = open(b)
	formB.Set("approval_ttl_value", "4")
	if res, _ := save(b, formB); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("B's save: got %d", res.StatusCode)
	}
	formA.Set("approval_ttl_value", "6")
	res, doc = save(a, formA)
	notice = doc.Find("[data-testid=settings-stale]")
	if ttl, _ := stored(); res.StatusCode != http.StatusConflict || ttl != 4*time.Hour ||
		!strings.Contains(notice.Text(), "how long a plan waits for approval") || !strings.Contains(notice.Text(), "4 hours") {
		t.Fatalf("A's stale form changing the expiry B changed: got %d, stored %v, notice %q; want 409, 4h kept, the field and 4 hours named",
			res.StatusCode, ttl, notice.Text())
	}

	// Reloaded, the same change saves.
	formA = open(a)
	formA.Set("approval_ttl_value", "6")
	if res, _ := save(a, formA); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the reloaded form: got %d", res.StatusCode)
	}
	if ttl, sep := stored(); ttl != 6*time.Hour || sep != decide.SeparationAlways {
		t.Errorf("after the reloaded save: %v / %s, want 6h / always", ttl, sep)
	}

	// A form without what it showed (a page from before), refused for its input, comes
	// back with those fields empty: saved again corrected, it changes what it says, not
	// "someone else changed it".
	old := url.Values{"approval_ttl_value": {"-1"}, "approval_ttl_unit": {"hours"}, "high_separation": {"off"}}
	if res, _ := save(a, old); res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a form without _was fields and a bad expiry: got %d, want it refused for its input", res.StatusCode)
	} else {
		back := submitted(page(t, srv.PostForm(t, a, path, old)), sel)
		back.Set("approval_ttl_value", "6")
		if res, _ := save(a, back); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("the corrected form given back: got %d, want it saved", res.StatusCode)
		}
		if _, sep := stored(); sep != decide.SeparationOff {
			t.Errorf("after the corrected form: separation %s, want off", sep)
		}
	}
}
