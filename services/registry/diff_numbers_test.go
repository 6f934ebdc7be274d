package registry_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/template"
)

// numbersTool is a tool whose definition writes its numbers as Python's json.dumps does
// (1e-05) or with an upper-case exponent (1E+2), everywhere Diff looks at numbers: the
// input schema's bounds, enum and const, the output schema, the annotations and a
// template tool's spec. PostgreSQL's jsonb writes them back as 0.00001 and 100.
func numbersTool(description string) registry.ToolDef {
	in := `{"type":"object","properties":{` +
		`"rate":{"type":"number","minimum":1e-05,"maximum":1E+2,"multipleOf":2.50E-6},` +
		`"level":{"type":"integer","enum":[1e0,2E1,-0],"default":5e-1},` +
		`"mode":{"const":1.5e+300},` +
		`"box":{"type":"object","properties":{"size":{"type":"number","exclusiveMaximum":1e+20}}}},` +
		`"required":["rate"]}`
	out := `{"type":"object","properties":{"score":{"type":"number","minimum":-1E-3,"maximum":10e-1}}}`
	ann := `{"readOnlyHint":true,"x-weight":2.50E0}`
	raw := `{"name":"tune","description":` + mustQuote(description) + `,"inputSchema":` + in + `,"outputSchema":` + out +
		`,"annotations":` + ann + `,"_meta":{"` + template.SpecMeta + `":{"timeout_seconds":3E+1,"retries":2e0}}}`
	return registry.ToolDef{Name: "tune", Description: description, InputSchema: json.RawMessage(in),
		OutputSchema: json.RawMessage(out), Annotations: json.RawMessage(ann), Raw: json.RawMessage(raw)}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonbForm is numbersTool's definition with its numbers as jsonb writes them back.
func jsonbForm(d registry.ToolDef) registry.ToolDef {
	r := strings.NewReplacer("1e-05", "0.00001", "1E+2", "100", "2.50E-6", "0.00000250", "1e0", "1", "2E1", "20",
		"-0]", "0]", "5e-1", "0.5", "1.5e+300", "15"+strings.Repeat("0", 299), "1e+20", "100000000000000000000",
		"-1E-3", "-0.001", "10e-1", "1.0", "2.50E0", "2.50", "3E+1", "30", "2e0", "2")
	d.InputSchema = json.RawMessage(r.Replace(string(d.InputSchema)))
	d.OutputSchema = json.RawMessage(r.Replace(string(d.OutputSchema)))
	d.Annotations = json.RawMessage(r.Replace(string(d.Annotations)))
	d.Raw = json.RawMessage(r.Replace(string(d.Raw)))
	return d
}

// Numbers are compared by value: the same number in another notation is no change.
// Discovery diffs the definition read back from jsonb, which rewrites 1e-05 as 0.00001,
// against the listing as received; compared as text, every later change of such a tool
// (its description, say) also "changed" its bounds, breaking, and bumped the major version.
func TestDiffNumbersByValue(t *testing.T) {
	t.Parallel()
	listed := numbersTool("Tunes the rate")
	stored := jsonbForm(listed)
	if string(stored.InputSchema) == string(listed.InputSchema) || !strings.Contains(string(stored.InputSchema), "0.00001") {
		t.Fatalf("jsonbForm did not rewrite the numbers: %s", stored.InputSchema)
	}
	for _, pair := range [][2]registry.ToolDef{{stored, listed}, {listed, stored}} {
		if got := registry.Diff(pair[0], pair[1]); len(got) != 0 {
			t.Fatalf("the same definition with its numbers written otherwise: got changes %+v, want none", got)
		}
	}
	changed := numbersTool("Tunes the rate of flow")
	if got := registry.Diff(stored, changed); len(got) != 1 || got[0].Kind != "description" || got[0].Breaking {
		t.Fatalf("description changed: got %+v, want only a description change, not breaking", got)
	}

	// A number that really changed is still one, in any notation.
	type change struct {
		Kind     string
		Path     string
		Breaking bool
	}
	obj := func(prop string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"x":` + prop + `}}`)
	}
	cases := []struct {
		old, new string
		want     []change
	}{
		{`{"type":"number","minimum":1e-05}`, `{"type":"number","minimum":0.00001}`, nil},
		{`{"type":"number","minimum":1e-05}`, `{"type":"number","minimum":0.0001}`, []change{{"parameter_changed", "/x", true}}},
		{`{"type":"number","minimum":1e-05}`, `{"type":"number","minimum":1e-5}`, nil},
		{`{"type":"number","minimum":1e-05}`, `{"type":"number","minimum":-1e-05}`, []change{{"parameter_changed", "/x", true}}},
		{`{"type":"number","maximum":1E+2}`, `{"type":"number","maximum":100.000}`, nil},
		{`{"type":"number","maximum":1E+2}`, `{"type":"number","maximum":1000}`, []change{{"parameter_changed", "/x", true}}},
		{`{"type":"number","maximum":0.1e1}`, `{"type":"number","maximum":10e-1}`, nil},
		{`{"type":"number","maximum":0}`, `{"type":"number","maximum":-0.0e7}`, nil},
		{`{"type":"number","maximum":0}`, `{"type":"number","maximum":1e-400}`, []change{{"parameter_changed", "/x", true}}},
		{`{"enum":[1,2]}`, `{"enum":[1.0,2E0]}`, nil},
		{`{"enum":[1,2]}`, `{"enum":[2,1]}`, []change{{"parameter_changed", "/x", true}}},
		{`{"enum":[1,"1"]}`, `{"enum":["1",1]}`, []change{{"parameter_changed", "/x", true}}},
		{`{"const":{"a":[1e2]}}`, `{"const":{"a":[100]}}`, nil},
		{`{"const":"1e2"}`, `{"const":"100"}`, []change{{"parameter_changed", "/x", true}}},
		{`{"const":1e2}`, `{"const":"100"}`, []change{{"parameter_changed", "/x", true}}},
		// Exponents no float64 holds are compared exactly too, and quickly.
		{`{"const":1e999999999999999999999999}`, `{"const":10e999999999999999999999998}`, nil},
		{`{"const":1e999999999999999999999999}`, `{"const":1e999999999999999999999998}`, []change{{"parameter_changed", "/x", true}}},
		{`{"const":1e-999999999999999999999999}`, `{"const":0.1e-999999999999999999999998}`, nil},
		{`{"const":123456789012345678901234567890}`, `{"const":1.23456789012345678901234567890e29}`, nil},
		{`{"const":123456789012345678901234567890}`, `{"const":1.23456789012345678901234567891e29}`, []change{{"parameter_changed", "/x", true}}},
		// A describing keyword changed in value is a change, not a breaking one.
		{`{"type":"number","default":5e-1}`, `{"type":"number","default":0.5}`, nil},
		{`{"type":"number","default":5e-1}`, `{"type":"number","default":0.6}`, []change{{"parameter_changed", "/x", false}}},
	}
	for _, tc := range cases {
		t.Run(tc.old+" to "+tc.new, func(t *testing.T) {
			t.Parallel()
			var got []change
			for _, c := range registry.Diff(def("d", string(obj(tc.old))), def("d", string(obj(tc.new)))) {
				got = append(got, change{c.Kind, c.Path, c.Breaking})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Output schema, annotations and a template tool's spec likewise.
	base := registry.ToolDef{Name: "t", InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{"maximum":1e1}`),
		Annotations: json.RawMessage(`{"x":1e1}`), Raw: json.RawMessage(`{"_meta":{"` + template.SpecMeta + `":{"n":1e1}}}`)}
	other := base
	other.OutputSchema, other.Annotations = json.RawMessage(`{"maximum":10}`), json.RawMessage(`{"x":10.0}`)
	other.Raw = json.RawMessage(`{"_meta":{"` + template.SpecMeta + `":{"n":100e-1}}}`)
	if got := registry.Diff(base, other); len(got) != 0 {
		t.Fatalf("output schema, annotations and spec with their numbers written otherwise: got %+v, want no change", got)
	}
	other.OutputSchema, other.Annotations = json.RawMessage(`{"maximum":11}`), json.RawMessage(`{"x":11}`)
	other.Raw = json.RawMessage(`{"_meta":{"` + template.SpecMeta + `":{"n":11}}}`)
	var kinds []string
	for _, c := range registry.Diff(base, other) {
		kinds = append(kinds, c.Kind)
	}
	if fmt.Sprint(kinds) != "[behaviour output_schema annotations]" {
		t.Fatalf("output schema, annotations and spec changed: got %v, want [behaviour output_schema annotations]", kinds)
	}
}

// The same through the database: discovery reads the stored definition back from its
// jsonb columns, where 1e-05 is 0.00001, and diffs it against the new listing. A
// description changed is a minor version with that one change, never a breaking one.
func TestDiscoveryNumbersRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("numbers"))
	first := numbersTool("Tunes the rate")
	wantResult(t, "first", f.discover(sv.ID, discovery("connect", first)), 1, 0, 0, 0)
	tl := f.toolsByName(sv.ID)["tune"]
	// The premise: what is read back is not the text that was listed.
	if s := string(tl.InputSchema); strings.Contains(s, "1e-05") || !strings.Contains(s, "0.00001") {
		t.Fatalf("stored input schema %s: want jsonb's rewriting of 1e-05 as 0.00001", s)
	}
	wantResult(t, "same listing", f.discover(sv.ID, discovery("connect", first)), 0, 0, 1, 0)

	for i, description := range []string{"Tunes the rate of flow", "Tunes the flow rate"} {
		wantResult(t, description, f.discover(sv.ID, discovery("connect", numbersTool(description))), 0, 1, 0, 0)
		tl = f.toolsByName(sv.ID)["tune"]
		if want := fmt.Sprintf("1.%d", i+1); tl.Version() != want {
			t.Fatalf("after %q: got version %s, want %s (only the description changed)", description, tl.Version(), want)
		}
		vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v := vs[0]; v.Breaking || len(v.Changes) != 1 || v.Changes[0].Kind != "description" || v.Changes[0].Breaking {
			t.Fatalf("after %q: got version %+v, want one change, the description, not breaking", description, v)
		}
	}
	// A bound that really changed still breaks.
	tighter := numbersTool("Tunes the flow rate")
	tighter.InputSchema = json.RawMessage(strings.Replace(string(tighter.InputSchema), "1e-05", "1e-04", 1))
	tighter.Raw = json.RawMessage(strings.Replace(string(tighter.Raw), "1e-05", "1e-04", 1))
	wantResult(t, "tighter", f.discover(sv.ID, discovery("connect", tighter)), 0, 1, 0, 0)
	if tl = f.toolsByName(sv.ID)["tune"]; tl.Version() != "2.0" {
		t.Fatalf("minimum raised: got version %s, want 2.0", tl.Version())
	}
}

// A server that changes only how it writes a number changes its tool's pin (a hash of
// the text): the new version says what changed, not nothing.
func TestNotationOnlyChangeIsListed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("notes"))
	first := numbersTool("Tunes the rate")
	f.discover(sv.ID, discovery("connect", first))
	f.discover(sv.ID, discovery("connect", jsonbForm(first)))
	tl := f.toolsByName(sv.ID)["tune"]
	vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].VersionMajor != 1 || vs[0].VersionMinor != 1 || vs[0].Breaking {
		t.Fatalf("versions after a notation-only change: %+v, want a non-breaking 1.1 first", vs)
	}
	if len(vs[0].Changes) != 1 || vs[0].Changes[0].Kind != "notation" || !strings.Contains(vs[0].Changes[0].Message, "notation") {
		t.Errorf("the 1.1 version's changes: %+v, want one saying only a notation changed", vs[0].Changes)
	}
}
