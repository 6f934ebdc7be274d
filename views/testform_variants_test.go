package views

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/views/form"
)

// The editors of issue #22 as HTML: the variant picker, the null box and map rows
// are labelled controls, what a browser sends of them (every variant, as without
// script) decodes to the arguments they show, and a submission with bad rows
// renders again as it was typed, the error under the map.
func TestTestFormVariantsMarkup(t *testing.T) {
	t.Parallel()
	s := formCorpusTool(t, "mcptest-shapes").InputSchema
	args := json.RawMessage(`{"shape": {"kind": "rect", "width": 2, "height": 3.5}, "label": null, "color": "red",
		"size": "large", "tags": {"b": "2", "a": "1"}, "limits": {"max": 3}}`)
	doc := renderTestForm(t, form.Build(s, args), nil)
	checkFormMarkup(t, doc)
	one := func(sel string) *goquery.Selection {
		t.Helper()
		got := doc.Find(sel)
		if got.Length() != 1 {
			t.Fatalf("got %d elements for %s, want 1", got.Length(), sel)
		}
		return got
	}

	// The picker: a labelled select of the variants, the value's one selected, each
	// variant's panel named by it; the unchosen variant's inputs are not required.
	pick := one(`select[name="arg/shape/~v"]`)
	var opts []string
	pick.Find("option").Each(func(_ int, o *goquery.Selection) {
		_, sel := o.Attr("selected")
		opts = append(opts, o.AttrOr("value", "")+"="+o.Text()+map[bool]string{true: "*"}[sel])
	})
	if want := []string{"0=Circle", "1=kind: rect*"}; !slices.Equal(opts, want) {
		t.Errorf("got options %q, want %q", opts, want)
	}
	for _, id := range strings.Fields(pick.AttrOr("aria-controls", "")) {
		if doc.Find("#"+id+"[data-variant-of]").Length() != 1 {
			t.Errorf("the picker controls %q, which is no variant panel", id)
		}
	}
	if one(`[data-testid="variant-/shape/~v1"]`).AttrOr("aria-label", "") != "kind: rect" {
		t.Error("the rect panel is not labelled by its variant")
	}
	if one(`input[name="arg/shape/~v1/width"]`).AttrOr("value", "") != "2" || one(`input[name="arg/shape/~v0/radius"]`).AttrOr("value", "") != "" {
		t.Error("the chosen variant does not hold the value, or the other one is not empty")
	}
	// A variant's constant is chosen already: there is nothing else to pick.
	if got := one(`select[name="arg/shape/~v0/kind"]`).Find("option"); got.Length() != 1 || got.AttrOr("value", "") != "circle" || got.AttrOr("selected", "x") != "" {
		t.Errorf("the circle's kind offers %d options, want circle alone, selected", got.Length())
	}
	if _, req := one(`input[name="arg/shape/~v0/radius"]`).Attr("required"); req {
		t.Error("a variant's input is required: without script the browser would refuse the form for the variant not chosen")
	}

	// Null boxes: checked for null, the field's input then not required; labelled.
	box := one(`input[type=checkbox][name="arg/label/~null"]`)
	if _, checked := box.Attr("checked"); !checked {
		t.Error("the label's null box is not checked for null")
	}
	if got := strings.Join(strings.Fields(doc.Find(`label[for="`+box.AttrOr("id", "")+`"]`).Text()), " "); got != "null (label)" {
		t.Errorf("the null box is labelled %q, want \"null (label)\"", got)
	}
	if _, checked := one(`input[name="arg/color/~null"]`).Attr("checked"); checked || one(`input[name="arg/color"]`).AttrOr("value", "") != "red" {
		t.Error("color: want its text and an unchecked null box")
	}
	if one(`[data-testid="field-/label"]`).AttrOr("data-nullable", "x") != "" {
		t.Error("the nullable field is not marked for app.js")
	}

	// Map rows: key and value labelled per row, in the value's order, with buttons.
	var rows []string
	doc.Find(`[data-testid="field-/tags"] li.form-row`).Each(func(i int, r *goquery.Selection) {
		key := r.Find(`input[name$="/~key"]`)
		label := strings.TrimSpace(doc.Find(`label[for="` + key.AttrOr("id", "") + `"]`).Text())
		rows = append(rows, label+" "+key.AttrOr("value", "")+"="+r.Find(`input[name="arg/tags/`+string(rune('0'+i))+`"]`).AttrOr("value", ""))
	})
	if want := []string{"Key 1 b=2", "Key 2 a=1"}; !slices.Equal(rows, want) {
		t.Errorf("got rows %q, want %q", rows, want)
	}
	if one(`[data-testid="map-remove-/tags/1"]`).AttrOr("value", "") != "removerow:/tags/1" || one(`[data-testid="map-add-/tags"]`).AttrOr("value", "") != "addrow:/tags" {
		t.Error("the row buttons do not name their rows")
	}
	if one(`input[name="arg/limits/0/~key"]`).AttrOr("pattern", "") != "^[a-z]+$" {
		t.Error("the limits key input does not carry the key pattern")
	}

	// What the browser sends (without script: every variant) reads back the same.
	got, errs := form.Decode(s, browserSubmit(doc))
	if errs != nil || !sameFormArgs(t, got, args) {
		t.Errorf("got %s (%v), want %s", got, errs, args)
	}

	// Bad rows: refused with an error under the map, and shown again as typed.
	sub := browserSubmit(doc)
	sub.Set("arg/tags/1/~key", "b")
	sub.Set("arg/tags/1", "second b")
	values, errs := form.Decode(s, sub)
	bad := renderTestForm(t, form.BuildFrom(s, values, sub), errs)
	checkFormMarkup(t, bad)
	if got := bad.Find(`[data-testid="error-/tags"]`).Text(); got != `row 2: the key "b" is already used in row 1` {
		t.Errorf("got map error %q, want the repeated key named", got)
	}
	if bad.Find(`input[name="arg/tags/1/~key"]`).AttrOr("value", "") != "b" || bad.Find(`input[name="arg/tags/1"]`).AttrOr("value", "") != "second b" {
		t.Error("the refused row is not shown as typed")
	}
	if !strings.Contains(bad.Find(`[data-testid="field-/tags"]`).AttrOr("aria-describedby", ""), "-error") {
		t.Error("the map is not described by its error")
	}
	again, _ := form.Decode(s, browserSubmit(bad))
	if !sameFormArgs(t, again, values) {
		t.Errorf("submitting the kept form again: got %s, want %s", again, values)
	}
}

// Nested editors as HTML: choices in array items, nullable map values, rows of
// arrays, and rows for an object's further properties, through a browser's
// submission and back.
func TestTestFormVariantsNested(t *testing.T) {
	t.Parallel()
	s := formCorpusTool(t, "variants").InputSchema
	args := json.RawMessage(`{"steps": [{"op": "wait", "ms": 5}, {"op": "call", "tool": "echo", "args": {"message": "hi"}}],
		"env": {"HOME": null, "USER": "ann"}, "matrix": {"r": [1, 2.5], "s": []}, "owner": null, "when": 3,
		"limits": {"default": 1, "cpu": 2}, "nested": {"choice": "auto"}}`)
	doc := renderTestForm(t, form.Build(s, args), nil)
	checkFormMarkup(t, doc)
	if doc.Find(`[data-testid="form-unsupported"]`).Length() != 0 {
		t.Error("got parts edited as JSON, want none")
	}
	for _, sel := range []string{
		`select[name="arg/steps/1/~v"] option[value="1"][selected]`,
		`input[name="arg/steps/1/~v1/args/0/~key"][value="message"]`,
		`input[type=checkbox][name="arg/env/0/~null"][checked]`,
		`input[type=hidden][name="arg/matrix/1"][value="0"]`,
		`input[name="arg/limits/~more/0/~key"][value="cpu"]`,
		`[data-testid="map-add-/limits/~more"]`,
	} {
		if doc.Find(sel).Length() != 1 {
			t.Errorf("got no %s", sel)
		}
	}
	got, errs := form.Decode(s, browserSubmit(doc))
	if errs != nil || !sameFormArgs(t, got, args) {
		t.Errorf("got %s (%v), want %s", got, errs, args)
	}
}
