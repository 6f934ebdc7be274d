package form

import (
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The editors beyond one input per value (issue #22): a choice's variant
// picker, the null checkbox of a nullable value and a map's key/value rows.
// shapes is internal/mcptest's tool shapes; variants nests them.

func shapesSchema(t testing.TB) json.RawMessage { return formTool(t, "mcptest-shapes").InputSchema }

func variantsSchema(t testing.TB) json.RawMessage { return formTool(t, "variants").InputSchema }

// decodeErrs decodes and returns the errors as pointer → message.
func decodeErrs(t *testing.T, s json.RawMessage, form url.Values) (json.RawMessage, map[string]string) {
	t.Helper()
	got, errs := Decode(s, form)
	out := map[string]string{}
	if errs != nil {
		for _, f := range errs.Fields {
			if out[f.Field] != "" {
				out[f.Field] += "; "
			}
			out[f.Field] += f.Message
		}
	}
	return got, out
}

func TestChoiceBuild(t *testing.T) {
	t.Parallel()
	s := shapesSchema(t)
	tests := []struct {
		name, values, ptr string
		chosen            int
		labels            []string
		value             map[string]string // path → Value
	}{
		{"unset picks the first", `{}`, "/shape", 0, []string{"Circle", "kind: rect"}, nil},
		{"the value's variant", `{"shape": {"kind": "rect", "width": 2, "height": 3.5}}`, "/shape", 1, nil,
			map[string]string{"/shape/~v1/width": "2", "/shape/~v1/height": "3.5", "/shape/~v1/kind": "rect", "/shape/~v0/radius": ""}},
		{"by the constant", `{"shape": {"kind": "circle", "radius": 1}}`, "/shape", 0, nil, map[string]string{"/shape/~v0/radius": "1"}},
		{"a string choice", `{"size": "large"}`, "/size", 1, []string{"integer", "one of small, large"}, map[string]string{"/size/~v1": "large"}},
		{"a number choice", `{"size": 4}`, "/size", 0, nil, map[string]string{"/size/~v0": "4", "/size/~v1": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := Build(s, json.RawMessage(tt.values))
			f := fieldAt(t, m, tt.ptr)
			if f.Kind != "choice" || f.Chosen != tt.chosen || f.Path != tt.ptr {
				t.Fatalf("got kind %q chosen %d path %q, want choice %d %q", f.Kind, f.Chosen, f.Path, tt.chosen, tt.ptr)
			}
			if tt.labels != nil {
				var labels []string
				for _, v := range f.Variants {
					labels = append(labels, v.Label)
				}
				if !slices.Equal(labels, tt.labels) {
					t.Errorf("got labels %q, want %q", labels, tt.labels)
				}
			}
			for path, want := range tt.value {
				var got *Field
				walkFields(m.Root, func(c Field) {
					if c.Path == path {
						got = &c
					}
				})
				if got == nil || got.Value != want {
					t.Errorf("%s: got %+v, want value %q", path, got, want)
				}
			}
			if len(m.Unsupported) != 0 {
				t.Errorf("got JSON sub-editors %q, want none", m.Unsupported)
			}
		})
	}

	// A value no variant fits is shown as JSON, so nothing is lost.
	m := Build(s, json.RawMessage(`{"size": true}`))
	if f := fieldAt(t, m, "/size"); f.Kind != "json" || f.Value != "true" || !strings.Contains(f.Hint, "fits none of the variants") {
		t.Errorf("got %+v, want a JSON sub-editor holding true", f)
	}
	// Variants without a title are told apart, and never share a label.
	m = Build(oneProp(`{"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}, {"type": "string", "format": "date"},
		{"type": "object", "properties": {"w": {"type": "number"}, "h": {"type": "number"}}, "required": ["w", "h"]}, {"const": 7},
		{"type": "array", "items": {"type": "integer"}}]}`), nil)
	var labels []string
	for _, v := range fieldAt(t, m, "/p").Variants {
		labels = append(labels, v.Label)
	}
	if want := []string{"string", "string (2)", "string (date)", "object: w, h", "7", "list of integer"}; !slices.Equal(labels, want) {
		t.Errorf("got labels %q, want %q", labels, want)
	}
}

func TestChoiceDecode(t *testing.T) {
	t.Parallel()
	s := shapesSchema(t)
	tests := []struct {
		name string
		form url.Values
		want string
		errs map[string]string
	}{
		{"only the chosen variant is read, its constant filled in", url.Values{
			"arg/shape/~v": {"1"}, "arg/shape/~v0/radius": {"9"}, "arg/shape/~v1/width": {"2"}, "arg/shape/~v1/height": {"3"},
		}, `{"shape": {"kind": "rect", "width": 2, "height": 3}}`, nil},
		{"without a picker, the first", url.Values{"arg/shape/~v0/radius": {"9"}}, `{"shape": {"kind": "circle", "radius": 9}}`, nil},
		{"a required choice left empty", url.Values{"arg/shape/~v": {"1"}}, `{"shape": {"kind": "rect"}}`, nil},
		{"a scalar variant", url.Values{"arg/size/~v": {"1"}, "arg/size/~v1": {"small"}, "arg/size/~v0": {"3"}}, `{"shape": {"kind": "circle"}, "size": "small"}`, nil},
		{"an optional choice left empty", url.Values{"arg/size/~v": {"0"}, "arg/size/~v0": {""}}, `{"shape": {"kind": "circle"}}`, nil},
		{"bad input in the chosen variant", url.Values{"arg/size/~v": {"0"}, "arg/size/~v0": {"abc"}}, `{"shape": {"kind": "circle"}}`,
			map[string]string{"/size": "is not a number"}},
		{"bad input in another variant is not read", url.Values{"arg/size/~v": {"1"}, "arg/size/~v0": {"abc"}, "arg/size/~v1": {"large"}}, `{"shape": {"kind": "circle"}, "size": "large"}`, nil},
		{"a variant the schema lacks", url.Values{"arg/size/~v": {"7"}}, `{"shape": {"kind": "circle"}}`,
			map[string]string{"/size": "names a variant the schema does not have"}},
		{"not an index", url.Values{"arg/size/~v": {"x"}}, `{"shape": {"kind": "circle"}}`,
			map[string]string{"/size": "names a variant the schema does not have"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := decodeErrs(t, s, tt.form)
			if !sameFormArgs(t, got, []byte(tt.want)) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if tt.errs == nil {
				tt.errs = map[string]string{}
			}
			if !reflect.DeepEqual(errs, tt.errs) {
				t.Errorf("got errors %v, want %v", errs, tt.errs)
			}
		})
	}
	// The constant comes first, as the schema lists it.
	got, _ := Decode(s, url.Values{"arg/shape/~v": {"1"}, "arg/shape/~v1/width": {"2"}, "arg/shape/~v1/height": {"3"}})
	if want := `{"shape":{"kind":"rect","width":2,"height":3}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestNullable(t *testing.T) {
	t.Parallel()
	s, vs := shapesSchema(t), variantsSchema(t)
	for _, tt := range []struct {
		schema   json.RawMessage
		values   string
		ptr      string
		kind     string
		null     bool
		nullable bool
	}{
		{s, `{"label": null}`, "/label", "string", true, true},
		{s, `{"label": "x"}`, "/label", "string", false, true},
		{s, `{"color": null}`, "/color", "string", true, true},
		{s, `{}`, "/color", "string", false, true},
		{vs, `{"owner": null}`, "/owner", "object", true, true},
		{vs, `{"when": null}`, "/when", "choice", true, true},
		{vs, `{"when": 3}`, "/when", "choice", false, true},
		{s, `{}`, "/tags", "map", false, false},
	} {
		f := fieldAt(t, Build(tt.schema, json.RawMessage(tt.values)), tt.ptr)
		if f.Kind != tt.kind || f.Null != tt.null || f.Nullable != tt.nullable || tt.null && !f.Set {
			t.Errorf("%s in %s: got kind %q null %v nullable %v set %v, want %q %v %v", tt.ptr, tt.values, f.Kind, f.Null, f.Nullable, f.Set, tt.kind, tt.null, tt.nullable)
		}
	}
	// A null for a field that is not nullable still goes to JSON.
	if f := fieldAt(t, Build(s, json.RawMessage(`{"tags": null}`)), "/tags"); f.Kind != "json" || f.Value != "null" {
		t.Errorf("got %+v, want a JSON sub-editor holding null", f)
	}

	tests := []struct {
		name   string
		schema json.RawMessage
		form   url.Values
		want   string
	}{
		{"checked: null, the text not read", s, url.Values{"arg/label/~null": {"1"}, "arg/label": {"typed"}}, `{"shape": {"kind": "circle"}, "label": null}`},
		{"unchecked: the text", s, url.Values{"arg/label": {"typed"}}, `{"shape": {"kind": "circle"}, "label": "typed"}`},
		{"unchecked and empty: left out", s, url.Values{"arg/color": {""}}, `{"shape": {"kind": "circle"}}`},
		{"type list", s, url.Values{"arg/color/~null": {"1"}}, `{"shape": {"kind": "circle"}, "color": null}`},
		{"an object", vs, url.Values{"arg/owner/~null": {"1"}, "arg/owner/name": {"ann"}}, `{"owner": null}`},
		{"a choice", vs, url.Values{"arg/when/~null": {"1"}, "arg/when/~v": {"1"}, "arg/when/~v1": {"x"}}, `{"when": null}`},
		{"a map's values", vs, url.Values{"arg/env": {"2"}, "arg/env/0/~key": {"A"}, "arg/env/0/~null": {"1"}, "arg/env/1/~key": {"B"}, "arg/env/1": {"b"}}, `{"env": {"A": null, "B": "b"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := decodeErrs(t, tt.schema, tt.form)
			if len(errs) != 0 || !sameFormArgs(t, got, []byte(tt.want)) {
				t.Errorf("got %s %v, want %s", got, errs, tt.want)
			}
		})
	}
}

func TestMapBuild(t *testing.T) {
	t.Parallel()
	s := shapesSchema(t)
	m := Build(s, json.RawMessage(`{"tags": {"b": "2", "a": "1"}, "limits": {}}`))
	tags := fieldAt(t, m, "/tags")
	if tags.Kind != "map" || !tags.Set || len(tags.Fields) != 2 || tags.Item == nil || tags.Item.Kind != "string" {
		t.Fatalf("got %+v, want a set map of two string rows", tags)
	}
	for i, want := range []struct{ key, ptr, path, value string }{{"b", "/tags/b", "/tags/0", "2"}, {"a", "/tags/a", "/tags/1", "1"}} {
		r := tags.Fields[i]
		if r.Key != want.key || r.Pointer != want.ptr || r.Path != want.path || r.Value != want.value || r.Label != "Value "+string(rune('1'+i)) {
			t.Errorf("row %d: got key %q pointer %q path %q value %q label %q, want %+v", i, r.Key, r.Pointer, r.Path, r.Value, r.Label, want)
		}
	}
	if l := fieldAt(t, m, "/limits"); !l.Set || len(l.Fields) != 0 || l.KeyPattern != "^[a-z]+$" {
		t.Errorf("got %+v, want an empty set map with the key pattern", l)
	}
	// A value of the wrong type in a row shows the whole map as JSON.
	if f := fieldAt(t, Build(s, json.RawMessage(`{"tags": {"a": 1}}`)), "/tags"); f.Kind != "map" || f.Fields[0].Kind != "json" {
		t.Errorf("got %+v, want the row's value as JSON", f)
	}
	if f := fieldAt(t, Build(s, json.RawMessage(`{"tags": []}`)), "/tags"); f.Kind != "json" {
		t.Errorf("got %+v, want JSON for an array", f)
	}
}

func TestMapDecode(t *testing.T) {
	t.Parallel()
	s := shapesSchema(t)
	row := func(vals url.Values, m string, i int, key, value string) url.Values {
		p := "arg/" + m + "/" + string(rune('0'+i))
		vals.Set(p+"/~key", key)
		vals.Set(p, value)
		return vals
	}
	tests := []struct {
		name string
		form url.Values
		want string
		errs map[string]string
	}{
		{"rows in order", row(row(url.Values{"arg/tags": {"2"}}, "tags", 0, "b", "x"), "tags", 1, "a", ""), `{"tags": {"b": "x", "a": ""}}`, nil},
		{"a count alone is {}", url.Values{"arg/tags": {"0"}}, `{"tags": {}}`, nil},
		{"no count and no rows: left out", url.Values{}, `{}`, nil},
		{"rows without a count", row(url.Values{}, "tags", 0, "k", "v"), `{"tags": {"k": "v"}}`, nil},
		{"a blank row is skipped", row(url.Values{"arg/tags": {"1"}}, "tags", 0, "", ""), `{"tags": {}}`, nil},
		{"an empty key with a value", row(url.Values{}, "tags", 0, "", "v"), `{"tags": {}}`, map[string]string{"/tags": "row 1: the key is empty"}},
		{"a key used twice", row(row(url.Values{}, "tags", 0, "a", "1"), "tags", 1, "a", "2"), `{"tags": {"a": "1"}}`,
			map[string]string{"/tags": `row 2: the key "a" is already used in row 1`}},
		{"keys and spaces are kept as typed", row(url.Values{}, "tags", 0, " a b ", "1"), `{"tags": {" a b ": "1"}}`, nil},
		{"a key the pattern refuses", row(row(url.Values{}, "limits", 0, "Max1", "1"), "limits", 1, "ok", "2"), `{"limits": {"ok": 2}}`,
			map[string]string{"/limits": `row 1: the key "Max1" does not match ^[a-z]+$`}},
		{"a value that is not a number", row(url.Values{}, "limits", 0, "max", "lots"), `{"limits": {}}`, map[string]string{"/limits/max": "is not a number"}},
		{"an empty number with a key", row(url.Values{}, "limits", 0, "max", ""), `{"limits": {}}`, map[string]string{"/limits/max": "is required"}},
		{"too many rows", url.Values{"arg/tags": {"10001"}}, `{}`, map[string]string{"/tags": "has too many entries (the form takes 10000 in all)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := decodeErrs(t, s, tt.form)
			want := `{"shape": {"kind": "circle"}}` // the required choice
			if tt.want != "{}" {
				want = `{"shape": {"kind": "circle"}, ` + strings.TrimPrefix(tt.want, "{")
			}
			if !sameFormArgs(t, got, []byte(want)) {
				t.Errorf("got %s, want %s", got, want)
			}
			if tt.errs == nil {
				tt.errs = map[string]string{}
			}
			if !reflect.DeepEqual(errs, tt.errs) {
				t.Errorf("got errors %v, want %v", errs, tt.errs)
			}
		})
	}
}

// After bad input the page renders BuildFrom(schema, Decode(form), form): the
// rows, texts and choices are as they were typed, and submitting that again
// gives the same arguments and the same errors.
func TestBuildFromKeepsInput(t *testing.T) {
	t.Parallel()
	s := shapesSchema(t)
	sub := url.Values{
		"arg/shape/~v": {"1"}, "arg/shape/~v1/width": {"wide"}, "arg/shape/~v0/radius": {"2"},
		"arg/label/~null": {"1"}, "arg/label": {"kept behind null"},
		"arg/tags": {"3"}, "arg/tags/0/~key": {"a"}, "arg/tags/0": {"1"}, "arg/tags/1/~key": {"a"}, "arg/tags/1": {"2"},
		"arg/tags/2/~key": {""}, "arg/tags/2": {"3"},
		"arg/limits/0/~key": {"Bad"}, "arg/limits/0": {"7"},
		"arg/size/~v": {"1"}, "arg/size/~v1": {"large"},
	}
	values, errs := Decode(s, sub)
	if errs == nil {
		t.Fatal("got no errors, want some")
	}
	m := BuildFrom(s, values, sub)
	shape := fieldAt(t, m, "/shape")
	if shape.Chosen != 1 {
		t.Errorf("got variant %d chosen, want 1 (as submitted)", shape.Chosen)
	}
	byPath := map[string]Field{}
	walkFields(m.Root, func(f Field) { byPath[f.Path] = f })
	for path, want := range map[string]string{
		"/shape/~v1/width": "wide", "/shape/~v0/radius": "2", "/label": "kept behind null",
		"/tags/0": "1", "/tags/1": "2", "/tags/2": "3", "/limits/0": "7", "/size/~v1": "large",
	} {
		if got := byPath[path].Value; got != want {
			t.Errorf("%s: got %q, want %q as typed", path, got, want)
		}
	}
	if !byPath["/label"].Null {
		t.Error("got /label not null, want the null box still checked")
	}
	var keys []string
	for _, r := range fieldAt(t, m, "/tags").Fields {
		keys = append(keys, r.Key)
	}
	if want := []string{"a", "a", ""}; !slices.Equal(keys, want) {
		t.Errorf("got keys %q, want %q", keys, want)
	}
	if r := fieldAt(t, m, "/limits").Fields; len(r) != 1 || r[0].Key != "Bad" {
		t.Errorf("got limits rows %+v, want the refused key Bad", r)
	}
	// Submitting the kept form again reads the same.
	again, errs2 := Decode(s, formSubmission(m))
	if !sameFormArgs(t, again, values) || errs2 == nil || len(errs2.Fields) != len(errs.Fields) {
		t.Errorf("again: got %s %v, want %s %v", again, errs2, values, errs)
	}
	// Build alone (no submission) infers the variant from the values.
	if got := fieldAt(t, Build(s, json.RawMessage(`{"shape": {}}`)), "/shape").Chosen; got != 0 {
		t.Errorf("got variant %d for {}, want the first", got)
	}
	if got := fieldAt(t, BuildFrom(s, json.RawMessage(`{"shape": {}}`), url.Values{"arg/shape/~v": {"1"}}), "/shape").Chosen; got != 1 {
		t.Errorf("got variant %d for {} with variant 1 submitted, want 1", got)
	}
}

func TestEditRows(t *testing.T) {
	t.Parallel()
	s := json.RawMessage(`{"type": "object", "properties": {
		"m": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}},
		"j": {"type": "object", "additionalProperties": {}, "maxProperties": 2}
	}}`)
	sub := url.Values{
		"arg/m":        {"3"},
		"arg/m/0/~key": {"a"}, "arg/m/0": {"1"}, "arg/m/0/0": {"1"},
		"arg/m/1/~key": {"b"}, "arg/m/1": {"2"}, "arg/m/1/0": {"2"}, "arg/m/1/1": {"3"},
		"arg/m/2/~key": {"c"}, "arg/m/2": {"0"},
		"arg/j/0/~key": {"x"}, "arg/j/0": {`{"k": 1}`}, "arg/j/1/~key": {"y"}, "arg/j/1": {`[`},
		JSONKey: {"/j/0", "/j/1"}, "_edit": {"removerow:/m/0"}, "mode": {"form"},
	}
	got, err := EditRows(s, sub, OpRemoveRow, "/m/0")
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{
		"arg/m":        {"2"},
		"arg/m/0/~key": {"b"}, "arg/m/0": {"2"}, "arg/m/0/0": {"2"}, "arg/m/0/1": {"3"},
		"arg/m/1/~key": {"c"}, "arg/m/1": {"0"},
		"arg/j/0/~key": {"x"}, "arg/j/0": {`{"k": 1}`}, "arg/j/1/~key": {"y"}, "arg/j/1": {`[`},
		JSONKey: {"/j/0", "/j/1"}, "mode": {"form"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("remove /m/0: got %v, want %v", got, want)
	}
	got, err = EditRows(s, sub, OpRemoveRow, "/j/0")
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("arg/j/0") != "[" || got.Get("arg/j/0/~key") != "y" || !slices.Equal(got[JSONKey], []string{"/j/0"}) || got.Get("arg/j") != "1" || got.Has("arg/j/1") {
		t.Errorf("remove /j/0: got %v, want row y moved up with its JSON marker", got)
	}
	got, err = EditRows(s, sub, OpAddRow, "/m")
	if err != nil || got.Get("arg/m") != "4" {
		t.Errorf("add to /m: got %v, %v, want 4 rows", got, err)
	}
	if m := BuildFrom(s, nil, got); len(fieldAt(t, m, "/m").Fields) != 4 || fieldAt(t, m, "/m").Fields[3].Key != "" {
		t.Errorf("after adding: got rows %+v, want a fourth, empty one", fieldAt(t, m, "/m").Fields)
	}
	for _, tt := range []struct{ op, path, err string }{
		{OpAddRow, "/nope", `form: edit rows: no map at "/nope"`},
		{OpRemoveRow, "/m/3", `form: edit rows: no map entry at "/m/3"`},
		{OpRemoveRow, "/m/x", `form: edit rows: no map entry at "/m/x"`},
		{OpRemoveRow, "/m/01", `form: edit rows: no map entry at "/m/01"`},
		{OpRemoveRow, "m", `form: edit rows: no map entry at "m"`},
		{OpAddRow, "/m/0", `form: edit rows: no map at "/m/0"`},
		{"move", "/m", `form: edit rows: unknown operation "move"`},
	} {
		if _, err := EditRows(s, sub, tt.op, tt.path); err == nil || err.Error() != tt.err {
			t.Errorf("%s %s: got %v, want %q", tt.op, tt.path, err, tt.err)
		}
	}
}

// Arrays inside a choice's variant and a map's rows are found by their
// pointers, as the page's "Add item" names them.
func TestEditArrayInsideVariants(t *testing.T) {
	t.Parallel()
	vs := variantsSchema(t)
	got, err := EditArray(vs, json.RawMessage(`{"steps": [{"op": "wait", "ms": 1}], "matrix": {"r": [1]}}`), "add", "/matrix/r")
	if err != nil || !sameFormArgs(t, got, []byte(`{"steps": [{"op": "wait", "ms": 1}], "matrix": {"r": [1, 0]}}`)) {
		t.Errorf("got %s, %v", got, err)
	}
	s := json.RawMessage(`{"type": "object", "properties": {"p": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}, "required": ["xs"]}]}}}`)
	got, err = EditArray(s, json.RawMessage(`{"p": {"xs": []}}`), "add", "/p/xs")
	if err != nil || !sameFormArgs(t, got, []byte(`{"p": {"xs": [""]}}`)) {
		t.Errorf("got %s, %v", got, err)
	}
}

// An object with properties of its own and an additionalProperties schema:
// the declared ones are fields, the others rows under them.
func TestObjectExtraRows(t *testing.T) {
	t.Parallel()
	vs := variantsSchema(t)
	m := Build(vs, json.RawMessage(`{"steps": [], "limits": {"default": 1, "cpu": 2, "mem": 3}}`))
	if len(m.Unsupported) != 0 {
		t.Fatalf("got JSON sub-editors %q, want none", m.Unsupported)
	}
	lim := fieldAt(t, m, "/limits")
	if lim.Kind != "object" || len(lim.Fields) != 1 || lim.Extra == nil || lim.Extra.Path != "/limits/~more" {
		t.Fatalf("got %+v, want the field default and rows for the rest", lim)
	}
	var rows []string
	for _, r := range lim.Extra.Fields {
		rows = append(rows, r.Key+"="+r.Value+"@"+r.Pointer+"@"+r.Path)
	}
	if want := []string{"cpu=2@/limits/cpu@/limits/~more/0", "mem=3@/limits/mem@/limits/~more/1"}; !slices.Equal(rows, want) {
		t.Errorf("got rows %q, want %q", rows, want)
	}
	got, errs := Decode(vs, formSubmission(m))
	if errs != nil || !sameFormArgs(t, got, []byte(`{"steps": [], "limits": {"default": 1, "cpu": 2, "mem": 3}}`)) {
		t.Errorf("round trip: got %s %v", got, errs)
	}

	// A row that names a declared property is refused; the form keeps it.
	sub := url.Values{"arg/limits/default": {"1"}, "arg/limits/~more/0/~key": {"default"}, "arg/limits/~more/0": {"5"},
		"arg/limits/~more/1/~key": {"io"}, "arg/limits/~more/1": {"7"}}
	got, errMap := decodeErrs(t, vs, sub)
	if !sameFormArgs(t, got, []byte(`{"limits": {"default": 1, "io": 7}}`)) ||
		!reflect.DeepEqual(errMap, map[string]string{"/limits": `the key "default" is a property of its own: use its field`}) {
		t.Errorf("got %s %v", got, errMap)
	}
	if r := fieldAt(t, BuildFrom(vs, got, sub), "/limits").Extra.Fields; len(r) != 2 || r[0].Key != "default" || r[0].Value != "5" {
		t.Errorf("got rows %+v, want the refused row kept", r)
	}
	// Rows are added by path.
	edited, err := EditRows(vs, url.Values{}, OpAddRow, "/limits/~more")
	if err != nil || edited.Get("arg/limits/~more") != "1" {
		t.Errorf("add a row: got %v, %v", edited, err)
	}
	// Without an additionalProperties schema, undeclared properties stay JSON.
	if f := fieldAt(t, Build(oneProp(`{"type": "object", "properties": {"a": {"type": "string"}}}`), json.RawMessage(`{"p": {"a": "x", "b": 1}}`)), "/p"); f.Kind != "json" {
		t.Errorf("got %+v, want JSON", f)
	}
}

// Arguments that are a map: rows at the top of the form, the arguments still an object.
func TestRootMap(t *testing.T) {
	t.Parallel()
	s := formTool(t, "root-map").InputSchema
	m := Build(s, json.RawMessage(`{"b": "2", "a": "1"}`))
	if m.JSONOnly || len(m.Root.Fields) != 0 || m.Root.Extra == nil || len(m.Root.Extra.Fields) != 2 || m.Root.Extra.Path != MoreSuffix {
		t.Fatalf("got %+v, want rows for the arguments", m.Root)
	}
	got, errs := Decode(s, formSubmission(m))
	if errs != nil || string(got) != `{"b":"2","a":"1"}` {
		t.Errorf("got %s %v, want the rows in order", got, errs)
	}
	if got, errs := Decode(s, url.Values{}); errs != nil || string(got) != `{}` {
		t.Errorf("nothing sent: got %s %v, want {}", got, errs)
	}
	got, errMap := decodeErrs(t, s, url.Values{"arg/~more/0/~key": {""}, "arg/~more/0": {"x"}})
	if string(got) != `{}` || !reflect.DeepEqual(errMap, map[string]string{"": "row 1: the key is empty"}) {
		t.Errorf("got %s %v, want the empty key reported for the arguments", got, errMap)
	}
	// A root that may be null is still an object.
	if m := Build(json.RawMessage(`{"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "null"}]}`), nil); m.JSONOnly || m.Root.Nullable {
		t.Errorf("got %+v, want an object form without a null box", m.Root)
	}
}

// A required constant is sent whatever else is (its select offers nothing
// else), but alone it does not make an optional object set.
func TestConstAloneLeavesOptionalOut(t *testing.T) {
	t.Parallel()
	s := json.RawMessage(`{"type": "object", "properties": {"opt": {"oneOf": [
		{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "string"}}, "required": ["kind"]},
		{"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}]}}}`)
	for _, tt := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"arg/opt/~v": {"0"}, "arg/opt/~v0/kind": {"a"}, "arg/opt/~v0/x": {""}}, `{}`},
		{url.Values{"arg/opt/~v": {"0"}, "arg/opt/~v0/kind": {"a"}, "arg/opt/~v0/x": {"y"}}, `{"opt":{"kind":"a","x":"y"}}`},
		{url.Values{"arg/opt/~v": {"1"}, "arg/opt/~v1/kind": {"b"}}, `{}`},
	} {
		if got, errs := Decode(s, tt.form); errs != nil || string(got) != tt.want {
			t.Errorf("%v: got %s %v, want %s", tt.form, got, errs, tt.want)
		}
	}
}
