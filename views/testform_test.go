package views

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views/form"
)

// renderTestForm renders TestForm inside a <form>, as the page does, and parses it.
func renderTestForm(t *testing.T, m form.Model, errs *verr.Error) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString(`<form method="post" data-testid="page-form">`)
	if err := TestForm(m, errs).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	buf.WriteString(`</form>`)
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// browserSubmit collects the form data set as a browser builds it when the
// page's own submit button is pressed: named, enabled inputs (checkboxes and
// radios only when checked, never buttons), each select's selected option (or
// its first), and textareas with their line breaks sent as CRLF.
func browserSubmit(doc *goquery.Document) url.Values {
	out := url.Values{}
	doc.Find("form [name]").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		if _, disabled := s.Attr("disabled"); disabled || name == "" {
			return
		}
		switch goquery.NodeName(s) {
		case "input":
			typ, _ := s.Attr("type")
			switch typ {
			case "submit", "button", "reset", "image", "file":
				return
			case "checkbox", "radio":
				if _, checked := s.Attr("checked"); !checked {
					return
				}
			}
			v, _ := s.Attr("value")
			if typ == "checkbox" && !s.Is("[value]") {
				v = "on"
			}
			out.Add(name, v)
		case "select":
			opt := s.Find("option[selected]").First()
			if opt.Length() == 0 {
				opt = s.Find("option").First()
			}
			if opt.Length() == 0 {
				return
			}
			v, ok := opt.Attr("value")
			if !ok {
				v = opt.Text()
			}
			out.Add(name, v)
		case "textarea":
			out.Add(name, strings.ReplaceAll(s.Text(), "\n", "\r\n"))
		}
	})
	return out
}

// formCorpus is the form's test formCorpus in services/schema: server-everything's
// tools and the hand-written schemas (with the internal/mcptest tools).
func formCorpus(t *testing.T) []schema.Tool {
	t.Helper()
	var all []schema.Tool
	for _, f := range []string{"everything_tools.json", "form_schemas.json"} {
		raw, err := os.ReadFile("../services/schema/testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		var tools []schema.Tool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatal(err)
		}
		all = append(all, tools...)
	}
	return all
}

func formCorpusTool(t *testing.T, name string) schema.Tool {
	t.Helper()
	for _, tl := range formCorpus(t) {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q in the formCorpus", name)
	return schema.Tool{}
}

// sameFormArgs compares JSON documents as values; numbers compare exactly.
func sameFormArgs(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(exactFormJSON(t, a), exactFormJSON(t, b))
}

func exactFormJSON(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	var norm func(any) any
	norm = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(string(x))
			if !ok {
				t.Fatalf("bad number %s", x)
			}
			return r.RatString()
		case map[string]any:
			for k, e := range x {
				x[k] = norm(e)
			}
		case []any:
			for i, e := range x {
				x[i] = norm(e)
			}
		}
		return v
	}
	return norm(v)
}

func formExample(t *testing.T, tl schema.Tool) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(schema.ExampleArguments(tl.InputSchema))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkFormMarkup holds every rendered form to the basics: unique ids, a label
// for every visible control, a test id on every control, no inline script.
func checkFormMarkup(t *testing.T, doc *goquery.Document) {
	t.Helper()
	ids := map[string]bool{}
	doc.Find("[id]").Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("id")
		if ids[id] {
			t.Errorf("got id %q twice, want unique ids", id)
		}
		ids[id] = true
	})
	doc.Find("input:not([type=hidden]), select, textarea").Each(func(_ int, s *goquery.Selection) {
		id, _ := s.Attr("id")
		if id == "" || doc.Find(`label[for="`+id+`"]`).Length() != 1 {
			t.Errorf("got control %q without exactly one label, want one", id)
		}
		if tid, _ := s.Attr("data-testid"); !strings.HasPrefix(tid, "input-") {
			t.Errorf("got control %q with test id %q, want input-<pointer>", id, tid)
		}
		for _, ref := range strings.Fields(s.AttrOr("aria-describedby", "")) {
			if !ids[ref] {
				t.Errorf("control %q is described by %q, which is not on the page", id, ref)
			}
		}
	})
	doc.Find("*").Each(func(_ int, s *goquery.Selection) {
		if goquery.NodeName(s) == "script" {
			t.Error("got a script element, want none (CSP)")
		}
		for _, a := range s.Nodes[0].Attr {
			if strings.HasPrefix(strings.ToLower(a.Key), "on") {
				t.Errorf("got inline handler %s on <%s>, want none (CSP)", a.Key, goquery.NodeName(s))
			}
		}
	})
	doc.Find(`button[name="_edit"]`).Each(func(_ int, s *goquery.Selection) {
		if _, ok := s.Attr("formnovalidate"); !ok || s.AttrOr("type", "") != "submit" {
			t.Errorf("got edit button %q without type=submit formnovalidate", s.AttrOr("value", ""))
		}
	})
}

// The round trip through HTML: the example call of every formCorpus schema is
// rendered, submitted the way a browser submits the form, decoded, and must
// come back unchanged.
func TestTestFormRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tl := range formCorpus(t) {
		t.Run(tl.Name, func(t *testing.T) {
			t.Parallel()
			example := formExample(t, tl)
			m := form.Build(tl.InputSchema, example)
			doc := renderTestForm(t, m, nil)
			checkFormMarkup(t, doc)
			if m.JSONOnly {
				// The page shows its raw JSON editor instead; the component only says why.
				if doc.Find(`[data-testid="form-json-only"]`).Length() != 1 || doc.Find("[name]").Length() != 0 {
					t.Errorf("got no JSON-only notice or some inputs, want the notice alone")
				}
				return
			}
			submitted := browserSubmit(doc)
			got, errs := form.Decode(tl.InputSchema, submitted)
			if errs != nil {
				t.Fatalf("got errors %v from %v", errs, submitted)
			}
			if !sameFormArgs(t, got, example) {
				t.Errorf("got %s, want %s (submitted %v)", got, example, submitted)
			}
		})
	}
}

// nestedForm is a schema with nested objects, arrays of objects, enums,
// booleans, numbers with bounds and parts only JSON can express.
const nestedForm = `{
	"type": "object",
	"properties": {
		"name": {"type": "string", "title": "Name", "description": "Who to greet.", "minLength": 2, "maxLength": 20, "pattern": "[a-z]"},
		"count": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
		"mode": {"enum": ["fast", "slow"], "default": "fast"},
		"level": {"enum": ["low", "high"]},
		"verbose": {"type": "boolean"},
		"when": {"type": "string", "format": "date"},
		"token": {"type": "string"},
		"options": {
			"type": "object",
			"properties": {"depth": {"type": "integer"}, "follow": {"type": "boolean"}},
			"required": ["depth"]
		},
		"filters": {
			"type": "array",
			"maxItems": 2,
			"items": {"type": "object", "properties": {"field": {"type": "string"}, "op": {"enum": ["eq", "lt"]}}, "required": ["field", "op"]}
		},
		"tags": {"type": "array", "items": {"type": "string"}},
		"retry": {"type": "object", "properties": {"times": {"type": "integer"}}, "required": ["times"]},
		"extra": {"type": ["string", "integer"]}
	},
	"required": ["name", "level", "verbose", "options"]
}`

func TestTestFormNested(t *testing.T) {
	t.Parallel()
	m := form.Build(json.RawMessage(nestedForm), json.RawMessage(`{
		"name": "ann", "level": "high", "filters": [{"field": "size", "op": "lt"}, {"field": "", "op": "eq"}], "extra": 7
	}`))
	doc := renderTestForm(t, m, nil)
	checkFormMarkup(t, doc)
	byTestID := func(id string) *goquery.Selection {
		t.Helper()
		s := doc.Find(`[data-testid="` + id + `"]`)
		if s.Length() != 1 {
			t.Fatalf("got %d elements with data-testid %q, want 1", s.Length(), id)
		}
		return s
	}
	attrs := func(id string, names ...string) map[string]string {
		s := byTestID(id)
		out := map[string]string{}
		for _, n := range names {
			if v, ok := s.Attr(n); ok {
				out[n] = v
			}
		}
		return out
	}

	// Top-level order: required first in "required" order, then alphabetical.
	var order []string
	doc.Find(`[data-testid="test-form"] > [data-testid^="field-"]`).Each(func(_ int, s *goquery.Selection) {
		order = append(order, strings.TrimPrefix(s.AttrOr("data-testid", ""), "field-"))
	})
	if got, want := strings.Join(order, " "), "/name /level /verbose /options /count /extra /filters /mode /retry /tags /token /when"; got != want {
		t.Errorf("got fields %s, want %s", got, want)
	}

	tests := []struct {
		testid string
		want   map[string]string
	}{
		{"input-/name", map[string]string{"type": "text", "name": "arg/name", "value": "ann", "minlength": "2", "maxlength": "20", "pattern": ".*(?:[a-z]).*", "required": "", "aria-describedby": "f-name-help"}},
		{"input-/count", map[string]string{"type": "number", "name": "arg/count", "value": "", "min": "1", "max": "5", "step": "1", "placeholder": "default: 2"}},
		{"input-/when", map[string]string{"type": "date", "name": "arg/when"}},
		{"input-/token", map[string]string{"type": "password", "autocomplete": "new-password"}},
		{"input-/options/depth", map[string]string{"type": "number", "name": "arg/options/depth", "required": ""}},
		{"input-/filters/1/field", map[string]string{"type": "text", "name": "arg/filters/1/field", "value": "", "required": ""}},
		{"input-/extra", map[string]string{"name": "arg/extra", "class": "mono", "aria-describedby": "f-extra-hint"}},
	}
	for _, tt := range tests {
		got := attrs(tt.testid, "type", "name", "value", "min", "max", "step", "minlength", "maxlength", "pattern", "required", "placeholder", "autocomplete", "aria-describedby", "class")
		for k, want := range tt.want {
			if got[k] != want {
				t.Errorf("%s: got %s=%q, want %q (all: %v)", tt.testid, k, got[k], want, got)
			}
		}
	}
	// No required attribute where it would not help: on optional fields, and
	// on required fields of an optional object (retry), which may be left out.
	for _, id := range []string{"input-/count", "input-/mode", "input-/options/follow", "input-/extra", "input-/retry/times"} {
		if _, ok := byTestID(id).Attr("required"); ok {
			t.Errorf("%s: got required, want it only on required fields", id)
		}
	}
	if got := byTestID("field-/name").Find(".required-mark").Length(); got != 1 {
		t.Errorf("got %d required marks on name, want 1", got)
	}
	if got := byTestID("field-/count").Find(".required-mark").Length(); got != 0 {
		t.Errorf("got %d required marks on count, want 0", got)
	}
	if got := byTestID("field-/name").Find("label").Text(); !strings.Contains(got, "Name") || !strings.Contains(got, "(required)") {
		t.Errorf("got label %q, want the title and a spoken (required)", got)
	}

	// Selects: optional ones offer "(not set)", required set ones do not,
	// required unset ones start on an empty "Choose…".
	options := func(id string) []string {
		var out []string
		byTestID(id).Find("option").Each(func(_ int, s *goquery.Selection) {
			o := s.AttrOr("value", "?") + "=" + s.Text()
			if _, ok := s.Attr("selected"); ok {
				o += "*"
			}
			out = append(out, o)
		})
		return out
	}
	selects := []struct {
		testid string
		want   []string
	}{
		{"input-/mode", []string{"=(not set: default fast)*", "fast=fast", "slow=slow"}},
		{"input-/level", []string{"low=low", "high=high*"}},
		{"input-/verbose", []string{"=Choose…*", "true=true", "false=false"}},
		{"input-/options/follow", []string{"=(not set)*", "true=true", "false=false"}},
		{"input-/filters/0/op", []string{"eq=eq", "lt=lt*"}},
	}
	for _, tt := range selects {
		if got := options(tt.testid); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got options %q, want %q", tt.testid, got, tt.want)
		}
	}

	// Objects are fieldsets with a legend; arrays list items with buttons.
	if got := byTestID("field-/options"); goquery.NodeName(got) != "fieldset" || strings.Join(strings.Fields(got.ChildrenFiltered("legend").Text()), " ") != "options* (required)" {
		t.Errorf("got <%s> with legend %q, want a fieldset with legend options", goquery.NodeName(got), got.ChildrenFiltered("legend").Text())
	}
	filters := byTestID("field-/filters")
	if got := filters.Find(`input[type=hidden][name="arg/filters"]`).AttrOr("value", ""); got != "2" {
		t.Errorf("got item count %q, want 2", got)
	}
	if got := filters.Find("li.form-item").Length(); got != 2 {
		t.Errorf("got %d items, want 2", got)
	}
	if got := byTestID("field-/filters/1").ChildrenFiltered("legend").Text(); got != "Item 2" {
		t.Errorf("got item legend %q, want Item 2", got)
	}
	buttons := map[string]string{
		"array-remove-/filters/0": "remove:/filters/0",
		"array-remove-/filters/1": "remove:/filters/1",
		"array-add-/filters":      "add:/filters",
		"array-add-/tags":         "add:/tags",
	}
	for id, want := range buttons {
		b := byTestID(id)
		if got := b.AttrOr("value", ""); got != want || b.AttrOr("name", "") != "_edit" {
			t.Errorf("%s: got %s=%q, want _edit=%q", id, b.AttrOr("name", ""), got, want)
		}
	}
	if _, disabled := byTestID("array-add-/filters").Attr("disabled"); !disabled {
		t.Error("got an enabled Add item at maxItems, want it disabled")
	}
	if _, disabled := byTestID("array-add-/tags").Attr("disabled"); disabled {
		t.Error("got a disabled Add item below maxItems, want it enabled")
	}
	if got := byTestID("field-/tags").Find(`input[type=hidden]`).Length(); got != 0 {
		t.Errorf("got %d hidden inputs for an unset array, want none (it stays unset)", got)
	}
	if got := strings.TrimSpace(byTestID("array-empty-/tags").Text()); got != "Not set." {
		t.Errorf("got %q for the unset array, want Not set.", got)
	}

	// JSON sub-editors: a textarea with the pretty JSON and a marker.
	if got := byTestID("input-/extra").Text(); got != "7" {
		t.Errorf("got JSON editor text %q, want 7", got)
	}
	if doc.Find(`input[type=hidden][name="_json"][value="/extra"]`).Length() != 1 {
		t.Error("got no JSON marker for /extra, want one")
	}
	if got := doc.Find("#f-extra-hint").Text(); !strings.Contains(got, "cannot express") || !strings.Contains(got, "several types") {
		t.Errorf("got JSON note %q, want it to say the form cannot express several types", got)
	}
	if doc.Find(`[data-testid="form-unsupported"]`).Length() != 1 {
		t.Error("got no notice of parts edited as JSON, want one")
	}

	// What the browser sends decodes to the arguments the form was built
	// from, except the empty string of a property: an empty input is "not
	// set", so the server reports the required field.
	got, errs := form.Decode(json.RawMessage(nestedForm), browserSubmit(doc))
	want := `{"name": "ann", "level": "high", "options": {}, "filters": [{"field": "size", "op": "lt"}, {"op": "eq"}], "extra": 7}`
	if errs != nil || !sameFormArgs(t, got, []byte(want)) {
		t.Errorf("got %s (%v), want %s", got, errs, want)
	}
}

// Pressing "Add item" and "Remove" posts the form; the page decodes it, edits
// the array and renders again. Walk that loop through the HTML.
func TestTestFormArrayEdits(t *testing.T) {
	t.Parallel()
	s := json.RawMessage(nestedForm)
	args := json.RawMessage(`{"name": "ann", "level": "low", "verbose": true, "options": {"depth": 1}}`)
	press := func(testid string) {
		t.Helper()
		doc := renderTestForm(t, form.Build(s, args), nil)
		b := doc.Find(`[data-testid="` + testid + `"]`)
		if b.Length() != 1 {
			t.Fatalf("got no button %s", testid)
		}
		op, ptr, _ := strings.Cut(b.AttrOr("value", ""), ":")
		decoded, errs := form.Decode(s, browserSubmit(doc))
		if errs != nil {
			t.Fatalf("got errors %v", errs)
		}
		edited, err := form.EditArray(s, decoded, op, ptr)
		if err != nil {
			t.Fatalf("%s: %v", testid, err)
		}
		args = edited
	}
	press("array-add-/tags")
	press("array-add-/tags")
	press("array-add-/filters")
	doc := renderTestForm(t, form.Build(s, args), nil)
	doc.Find(`[data-testid="input-/tags/0"]`).SetAttr("value", "first")
	doc.Find(`[data-testid="input-/tags/1"]`).SetAttr("value", "second")
	doc.Find(`[data-testid="input-/filters/0/field"]`).SetAttr("value", "size")
	decoded, errs := form.Decode(s, browserSubmit(doc))
	if errs != nil {
		t.Fatal(errs)
	}
	args = decoded
	press("array-remove-/tags/0")
	// The new filter's required op starts unset ("Choose…"): the user picks one.
	want := `{"name": "ann", "level": "low", "verbose": true, "options": {"depth": 1}, "tags": ["second"], "filters": [{"field": "size"}]}`
	if !sameFormArgs(t, args, []byte(want)) {
		t.Errorf("got %s, want %s", args, want)
	}
	press("array-remove-/tags/0")
	if want := `"tags":[]`; !strings.Contains(string(args), want) {
		t.Errorf("got %s, want it to hold %s (an emptied array stays set)", args, want)
	}
}

func TestTestFormErrors(t *testing.T) {
	t.Parallel()
	m := form.Build(json.RawMessage(nestedForm), json.RawMessage(`{"filters": [{"field": "a", "op": "eq"}]}`))
	errs := &verr.Error{Fields: []verr.Field{
		{Field: "/name", Message: "is required"},
		{Field: "/count", Message: "is not a number"},
		{Field: "/count", Message: "must be at most 5"},
		{Field: "/options/depth", Message: "is required"},
		{Field: "/filters", Message: "must have at most 2 items"},
		{Field: "/filters/0/op", Message: "is not one of the choices"},
		{Field: "", Message: "arguments are not valid JSON"},
		{Field: "/unknown", Message: "is not allowed"},
		{Field: "/extra/deep", Message: "is wrong inside JSON"},
	}}
	doc := renderTestForm(t, m, errs)
	checkFormMarkup(t, doc)
	tests := []struct {
		ptr, msg string
	}{
		{"/name", "is required"},
		{"/count", "is not a number; must be at most 5"},
		{"/options/depth", "is required"},
		{"/filters", "must have at most 2 items"},
		{"/filters/0/op", "is not one of the choices"},
	}
	for _, tt := range tests {
		field := doc.Find(`[data-testid="field-` + tt.ptr + `"]`)
		e := field.Find(`[data-testid="error-` + tt.ptr + `"]`)
		if got := e.Text(); got != tt.msg || e.AttrOr("role", "") != "alert" {
			t.Errorf("%s: got error %q (role %q), want %q with role alert", tt.ptr, got, e.AttrOr("role", ""), tt.msg)
		}
		if !field.HasClass("has-error") {
			t.Errorf("%s: got classes %q, want has-error", tt.ptr, field.AttrOr("class", ""))
		}
		errID := e.AttrOr("id", "")
		control := doc.Find(`[data-testid="input-` + tt.ptr + `"]`)
		if control.Length() == 0 {
			control = field // objects and arrays: the fieldset is described by the error
		} else if control.AttrOr("aria-invalid", "") != "true" {
			t.Errorf("%s: got aria-invalid %q, want true", tt.ptr, control.AttrOr("aria-invalid", ""))
		}
		if !slices.Contains(strings.Fields(control.AttrOr("aria-describedby", "")), errID) {
			t.Errorf("%s: got aria-describedby %q, want it to name %q", tt.ptr, control.AttrOr("aria-describedby", ""), errID)
		}
	}
	if got := doc.Find("[aria-invalid]").Length(); got != 4 {
		t.Errorf("got %d invalid controls, want 4 (name, count, depth, op)", got)
	}
	var stray []string
	doc.Find(`[data-testid="form-errors"] li`).Each(func(_ int, s *goquery.Selection) {
		stray = append(stray, strings.Join(strings.Fields(s.Text()), " "))
	})
	if want := []string{"Arguments: arguments are not valid JSON", "/unknown is not allowed", "/extra/deep is wrong inside JSON"}; !slices.Equal(stray, want) {
		t.Errorf("got errors at the top %q, want %q", stray, want)
	}
	if got := doc.Find(`[data-testid="form-errors"]`).AttrOr("role", ""); got != "alert" {
		t.Errorf("got role %q on the error list, want alert", got)
	}

	// Without errors nothing is marked.
	clean := renderTestForm(t, m, nil)
	if clean.Find(`[data-testid="form-errors"], .error, [aria-invalid], .has-error`).Length() != 0 {
		t.Error("got error markup without errors, want none")
	}
}

func TestTestFormNotices(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, values string
		want, notWant        []string // data-testids
	}{
		{"no arguments", `{"type": "object"}`, ``, []string{"form-empty"}, []string{"form-json-only", "form-unsupported"}},
		{"root oneOf", `{"oneOf": [{"type": "object"}, {"type": "object"}]}`, ``, []string{"form-json-only"}, []string{"form-empty", "form-unsupported"}},
		{"undeclared arguments", `{"type": "object", "properties": {"a": {"type": "string"}}}`, `{"b": 1}`, []string{"form-json-only"}, []string{"form-empty", "field-/a"}},
		{"plain form", `{"type": "object", "properties": {"a": {"type": "string"}}}`, ``, []string{"field-/a", "input-/a"}, []string{"form-json-only", "form-empty", "form-unsupported", "form-errors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := renderTestForm(t, form.Build(json.RawMessage(tt.schema), json.RawMessage(tt.values)), nil)
			for _, id := range tt.want {
				if doc.Find(`[data-testid="`+id+`"]`).Length() != 1 {
					t.Errorf("got no %s, want one", id)
				}
			}
			for _, id := range tt.notWant {
				if doc.Find(`[data-testid="`+id+`"]`).Length() != 0 {
					t.Errorf("got %s, want none", id)
				}
			}
		})
	}
	doc := renderTestForm(t, form.Build(json.RawMessage(`{"oneOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]}`), nil), nil)
	if got := doc.Find(`[data-testid="form-json-only"]`).Text(); !strings.Contains(got, "oneOf") {
		t.Errorf("got notice %q, want it to say why (oneOf)", got)
	}
}

// Values that would not survive an HTML control are rendered where they do:
// line breaks in a textarea (whose first line break the parser would eat),
// spaces in a text input.
func TestTestFormKeepsValues(t *testing.T) {
	t.Parallel()
	s := formCorpusTool(t, "scalars").InputSchema
	args := formExample(t, formCorpusTool(t, "scalars"))
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		t.Fatal(err)
	}
	m["multiline"] = "\nstarts with a line break\n\n"
	m["content"] = "<b>tags</b> & \"quotes\""
	m["spaced"] = "  x  "
	args, _ = json.Marshal(m)
	doc := renderTestForm(t, form.Build(s, args), nil)
	if got := goquery.NodeName(doc.Find(`[data-testid="input-/multiline"]`)); got != "textarea" {
		t.Errorf("got <%s> for a multi-line value, want textarea", got)
	}
	got, errs := form.Decode(s, browserSubmit(doc))
	if errs != nil || !sameFormArgs(t, got, args) {
		t.Errorf("got %s (%v), want %s", got, errs, args)
	}
}

func TestFormFieldID(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":       "f",
		"/a":     "f-a",
		"/a/0/b": "f-a-0-b",
		"/a-b":   "f-a_2db",
		"/a~1b":  "f-a_7e1b",
		"/a b":   "f-a_20b",
		"/é":     "f-_c3_a9",
	}
	seen := map[string]string{}
	for ptr, want := range tests {
		got := formFieldID(ptr)
		if got != want {
			t.Errorf("formFieldID(%q) = %q, want %q", ptr, got, want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("formFieldID(%q) = formFieldID(%q), want distinct ids", ptr, other)
		}
		seen[got] = ptr
	}
}
