package tools_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// configSchema has a parameter of every kind a form shows, and three secrets (by name,
// by format password and by writeOnly).
const configSchema = `{"type":"object","properties":{
	"path":{"type":"string","description":"Where to work."},
	"count":{"type":"integer","minimum":1,"maximum":10},
	"ratio":{"type":"number"},
	"verbose":{"type":"boolean"},
	"mode":{"type":"string","enum":["fast","slow"]},
	"label":{"type":"string","maxLength":10},
	"names":{"type":"array","items":{"type":"string"}},
	"options":{"type":"object","properties":{"depth":{"type":"integer"}}},
	"level":{"type":["integer","null"]},
	"anything":{},
	"api_key":{"type":"string"},
	"pin":{"type":"string","format":"password"},
	"hidden":{"type":"string","writeOnly":true}
},"required":["path"]}`

// configTool creates a server and a validated tool with configSchema.
func configTool(f *fixture, status string) string {
	f.t.Helper()
	srv := f.server(fmt.Sprintf("cfg-%d", f.count(`SELECT count(*) FROM mcp_servers`)), false)
	return f.tool(toolSpec{server: srv, name: "work", status: status, schema: configSchema})
}

func text(s string) tools.ParamInput      { return tools.ParamInput{Mode: tools.ModeDefault, Text: &s} }
func fixedText(s string) tools.ParamInput { return tools.ParamInput{Mode: tools.ModeFixed, Text: &s} }
func value(v string) tools.ParamInput {
	return tools.ParamInput{Mode: tools.ModeDefault, Value: json.RawMessage(v)}
}
func fixedValue(v string) tools.ParamInput {
	return tools.ParamInput{Mode: tools.ModeFixed, Value: json.RawMessage(v)}
}

func (f *fixture) config(id string) tools.Configuration {
	f.t.Helper()
	c, err := f.svc.Configuration(f.ctx, id)
	if err != nil {
		f.t.Fatalf("configuration: %v", err)
	}
	return c
}

func (f *fixture) update(id string, p tools.Patch) tools.Item {
	f.t.Helper()
	it, err := f.svc.Update(f.ctx, alice, id, p)
	if err != nil {
		f.t.Fatalf("update %+v: %v", p, err)
	}
	return it
}

func (f *fixture) version(id string) int {
	f.t.Helper()
	return f.count(`SELECT configuration_version FROM mcp_tools WHERE id = $1`, id)
}

func TestUpdateParamsFromText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	it := f.update(id, tools.Patch{Reason: "first settings", Params: map[string]tools.ParamInput{
		"path":     value(` "/srv" `),
		"count":    text("3"),
		"ratio":    text(" 2.50 "),
		"verbose":  fixedText("on"),
		"mode":     fixedText("fast"),
		"label":    text("hello"),
		"names":    text(`["a", "b"]`),
		"options":  text(`{"depth": 2}`),
		"level":    text("7"),
		"anything": text(`{"x": [1]}`),
	}})
	if it.ConfigVersion != 1 || it.Status != "configured" {
		t.Fatalf("after the first settings: version %d status %s, want 1 configured", it.ConfigVersion, it.Status)
	}
	c := f.config(id)
	want := map[string]struct{ mode, value string }{
		"path": {"default", `"/srv"`}, "count": {"default", `3`}, "ratio": {"default", `2.5`}, "verbose": {"fixed", `true`},
		"mode": {"fixed", `"fast"`}, "label": {"default", `"hello"`}, "names": {"default", `["a","b"]`},
		"options": {"default", `{"depth":2}`}, "level": {"default", `7`}, "anything": {"default", `{"x":[1]}`},
	}
	if len(c.Params) != len(want) {
		t.Errorf("configuration has %d params, want %d: %+v", len(c.Params), len(want), c.Params)
	}
	for name, w := range want {
		st := c.Params[name]
		if st.Mode != w.mode || compact(st.Value) != w.value || st.Secret != "" {
			t.Errorf("%s: got mode %q value %s secret %q, want %s %s", name, st.Mode, st.Value, st.Secret, w.mode, w.value)
		}
	}
	view := c.APIView(it.InputSchema)
	if len(view["fixed"]) != 2 || string(view["fixed"]["mode"]) != `"fast"` || string(view["defaults"]["count"]) != "3" {
		t.Errorf("api view: %+v", view)
	}
	// The form: every parameter in schema order, with its kind and its setting as text.
	params := tools.ConfigParams(it, c)
	var order []string
	kinds := map[string]string{}
	for _, p := range params {
		order = append(order, p.Name)
		kinds[p.Name] = p.Kind
	}
	// The order is that of the stored schema (jsonb keeps keys in its own order).
	var schemaOrder []string
	for _, p := range schema.Parameters(it.InputSchema) {
		schemaOrder = append(schemaOrder, p.Name)
	}
	if !slices.Equal(order, schemaOrder) || !slices.Equal(slices.Sorted(slices.Values(order)), []string{"anything", "api_key",
		"count", "hidden", "label", "level", "mode", "names", "options", "path", "pin", "ratio", "verbose"}) {
		t.Errorf("form order: %v, want every parameter in the order %v", order, schemaOrder)
	}
	wantKinds := map[string]string{"path": "text", "count": "integer", "ratio": "number", "verbose": "boolean", "mode": "enum",
		"label": "text", "names": "json", "options": "json", "level": "integer", "anything": "json", "api_key": "text"}
	for name, k := range wantKinds {
		if kinds[name] != k {
			t.Errorf("%s: kind %q, want %q", name, kinds[name], k)
		}
	}
	for _, p := range params {
		switch p.Name {
		case "label":
			if p.Mode != "default" || p.Text != "hello" || p.Value != `"hello"` || p.Secret {
				t.Errorf("label: %+v", p)
			}
		case "verbose":
			if p.Mode != "fixed" || p.Text != "true" {
				t.Errorf("verbose: %+v", p)
			}
		case "api_key", "pin", "hidden":
			if !p.Secret || p.Stored || p.Mode != "" {
				t.Errorf("%s: %+v, want an unset secret", p.Name, p)
			}
		case "path":
			if !p.Required || p.Text != "/srv" {
				t.Errorf("path: %+v", p)
			}
		}
	}
	// More spellings of the same types.
	for _, tc := range []struct{ name, text, want string }{
		{"verbose", "off", "false"}, {"verbose", "0", "false"}, {"verbose", "1", "true"}, {"verbose", " true ", "true"},
		{"ratio", "1e2", "100"}, {"ratio", "-0.125", "-0.125"}, {"count", " 10 ", "10"}, {"label", "  x ", `"  x "`},
		{"mode", "slow", `"slow"`}, {"anything", "plain words", `"plain words"`}, {"anything", "12", "12"},
	} {
		f.update(id, tools.Patch{Params: map[string]tools.ParamInput{tc.name: text(tc.text)}})
		if got := compact(f.config(id).Params[tc.name].Value); got != tc.want {
			t.Errorf("%s from %q: got %s, want %s", tc.name, tc.text, got, tc.want)
		}
	}
	// Only the first settings moved the tool.
	if h := f.history(id); !slices.Equal(h, []string{"validated→configured"}) {
		t.Errorf("history: %v, want one move to configured", h)
	}
	if actor := f.str(`SELECT actor FROM tool_state_history WHERE tool_id = $1`, id); actor != "alice" {
		t.Errorf("history actor %q", actor)
	}
}

// Numbers typed into the settings keep digits a float64 cannot hold: a whole number
// past 2^63 and a decimal with more precision are stored as typed, not rounded.
func TestUpdateParamsKeepNumbers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"path": value(`"/srv"`),
		"level": text("123456789012345678901"), "ratio": text("0.1000000000000000055511151231257827")}})
	c := f.config(id)
	if got := compact(c.Params["level"].Value); got != "123456789012345678901" {
		t.Errorf("level: got %s, want 123456789012345678901", got)
	}
	if got := compact(c.Params["ratio"].Value); got != "0.1000000000000000055511151231257827" {
		t.Errorf("ratio: got %s, want 0.1000000000000000055511151231257827", got)
	}
}

func TestUpdateParamErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"count": text("2"), "mode": fixedText("slow")}})
	before := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id)
	versions := f.count(`SELECT count(*) FROM tool_configurations WHERE tool_id = $1`, id)
	audits := f.count(`SELECT count(*) FROM audit_log`)

	cases := []struct {
		name   string
		params map[string]tools.ParamInput
		field  string
		msg    string // part of the message
	}{
		{"integer from words", map[string]tools.ParamInput{"count": text("abc")}, "params.count", "whole number"},
		{"integer from a fraction", map[string]tools.ParamInput{"count": text("2.5")}, "params.count", "whole number"},
		{"integer above the maximum", map[string]tools.ParamInput{"count": text("42")}, "params.count", ""},
		{"integer below the minimum", map[string]tools.ParamInput{"count": value("0")}, "params.count", ""},
		{"integer given a string value", map[string]tools.ParamInput{"count": value(`"5"`)}, "params.count", ""},
		{"number from words", map[string]tools.ParamInput{"ratio": text("fast")}, "params.ratio", "number"},
		{"boolean from words", map[string]tools.ParamInput{"verbose": text("maybe")}, "params.verbose", "true or false"},
		{"boolean is case sensitive", map[string]tools.ParamInput{"verbose": text("TRUE")}, "params.verbose", "true or false"},
		{"enum outside", map[string]tools.ParamInput{"mode": text("medium")}, "params.mode", "listed values"},
		{"enum value outside", map[string]tools.ParamInput{"mode": value(`"medium"`)}, "params.mode", ""},
		{"string too long", map[string]tools.ParamInput{"label": text("far too long a label")}, "params.label", ""},
		{"array not JSON", map[string]tools.ParamInput{"names": text("a, b")}, "params.names", "JSON"},
		{"JSON with a NUL", map[string]tools.ParamInput{"options": text(`{"depth": 2, "x": "\u0000"}`)}, "params.options", "at /x: contains a NUL"},
		{"untyped JSON with a key twice", map[string]tools.ParamInput{"anything": text(`{"a": 1, "a": 2}`)}, "params.anything", "/a is given twice"},
		{"number of 1,001 digits", map[string]tools.ParamInput{"ratio": text("1" + strings.Repeat("0", 1000))}, "params.ratio", "longer than 1000"},
		{"array of the wrong items", map[string]tools.ParamInput{"names": text("[1, 2]")}, "params.names", ""},
		{"object of the wrong type", map[string]tools.ParamInput{"options": text(`{"depth": "deep"}`)}, "params.options", ""},
		{"unknown parameter", map[string]tools.ParamInput{"nope": text("1")}, "params.nope", "no parameter"},
		{"bad mode", map[string]tools.ParamInput{"path": {Mode: "sometimes", Value: json.RawMessage(`"x"`)}}, "params.path", "mode"},
		{"no value", map[string]tools.ParamInput{"path": {Mode: tools.ModeFixed}}, "params.path", "enter a value"},
		{"value not JSON", map[string]tools.ParamInput{"path": value(`{`)}, "params.path", "enter a value"},
		{"null for a string", map[string]tools.ParamInput{"path": value(`null`)}, "params.path", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Params: tc.params})
			ve := wantFields(t, err, tc.field)
			if !strings.Contains(ve.For(tc.field), tc.msg) {
				t.Errorf("message %q does not say %q", ve.For(tc.field), tc.msg)
			}
		})
	}
	// Several bad fields at once: each is named, good ones beside them change nothing.
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Risk: ptr("extreme"), TimeoutMS: ptr(5), Params: map[string]tools.ParamInput{
		"count": text("x"), "mode": text("medium"), "nope": text("1"), "path": value(`"/ok"`), "api_key": value(`"********"`)}})
	wantFields(t, err, "risk", "timeout_ms", "params.count", "params.mode", "params.nope", "params.api_key")

	if after := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id); after != before {
		t.Errorf("configuration changed by failed updates: %s → %s", before, after)
	}
	if v := f.version(id); v != 1 {
		t.Errorf("version %d after failed updates, want 1", v)
	}
	if n := f.count(`SELECT count(*) FROM tool_configurations WHERE tool_id = $1`, id); n != versions {
		t.Errorf("failed updates wrote versions: %d → %d", versions, n)
	}
	if n := f.count(`SELECT count(*) FROM audit_log`); n != audits {
		t.Errorf("failed updates wrote audit rows: %d → %d", audits, n)
	}
	// A parameter's own problems are reported, other parameters' requirements are not:
	// the required path may stay unset in the configuration.
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"count": text("4")}})
	if v := f.version(id); v != 2 {
		t.Errorf("version %d, want 2", v)
	}
	// Mode none (either spelling) leaves the parameter unset.
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"count": {Mode: "none"}, "mode": {Mode: tools.ModeNone},
		"label": text("x")}})
	if c := f.config(id); len(c.Params) != 1 || string(c.Params["label"].Value) != `"x"` {
		t.Errorf("after unsetting: %+v", c.Params)
	}
}

func TestSecretParams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	const key, pin, hidden = "sk-live-Xy7Qq2Plain", "483921", "shh-hidden-value"
	f.update(id, tools.Patch{Reason: "secrets", Params: map[string]tools.ParamInput{
		"api_key": text(key), "pin": fixedValue(`"` + pin + `"`), "hidden": text(hidden), "label": text("visible")}})
	plain := []string{key, pin, hidden}
	noPlain := func(what, s string) {
		t.Helper()
		for _, p := range plain {
			if strings.Contains(s, p) {
				t.Errorf("%s contains the secret %q: %s", what, p, s)
			}
		}
	}
	raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id)
	noPlain("mcp_tools.configuration", raw)
	if !strings.Contains(raw, "visible") {
		t.Errorf("configuration lost the plain value: %s", raw)
	}
	noPlain("tool_configurations", strings.Join(f.strings(`SELECT configuration::text FROM tool_configurations WHERE tool_id = $1`, id), "\n"))
	audit := strings.Join(f.strings(`SELECT payload::text FROM audit_log WHERE action = 'tool.configure' AND target_id = $1`, id), "\n")
	noPlain("the audit payload", audit)
	if !strings.Contains(audit, tools.Mask) {
		t.Errorf("audit payload does not show the masked secret: %s", audit)
	}
	noPlain("events", strings.Join(f.strings(`SELECT payload::text FROM events`), "\n"))

	c := f.config(id)
	for _, name := range []string{"api_key", "pin", "hidden"} {
		st := c.Params[name]
		if st.Secret == "" || st.Value != nil {
			t.Errorf("%s stored as %+v, want a ciphertext only", name, st)
		}
		if strings.Contains(audit, st.Secret) {
			t.Errorf("the audit payload holds %s's ciphertext", name)
		}
	}
	it := f.get(id)
	for _, p := range tools.ConfigParams(it, c) {
		switch p.Name {
		case "api_key", "pin", "hidden":
			if !p.Secret || !p.Stored || p.Value != "" || p.Text != "" {
				t.Errorf("form shows %s as %+v", p.Name, p)
			}
		case "label":
			if p.Secret || p.Text != "visible" {
				t.Errorf("form shows label as %+v", p)
			}
		}
	}
	view, _ := json.Marshal(c.APIView(it.InputSchema))
	noPlain("the API view", string(view))
	if string(c.APIView(it.InputSchema)["fixed"]["pin"]) != `"`+tools.Mask+`"` || string(c.APIView(it.InputSchema)["defaults"]["api_key"]) != `"`+tools.Mask+`"` {
		t.Errorf("api view: %s", view)
	}
	vs, err := f.svc.ConfigVersions(f.ctx, id, 10)
	if err != nil || len(vs) != 1 {
		t.Fatalf("versions: %d, %v", len(vs), err)
	}
	noPlain("the version list", string(vs[0].Configuration))
	if !strings.Contains(string(vs[0].Configuration), tools.Mask) || strings.Contains(string(vs[0].Configuration), c.Params["api_key"].Secret) {
		t.Errorf("version shows %s, want secrets masked", vs[0].Configuration)
	}

	// Resolve decrypts for the call.
	r, err := f.svc.Resolve(id, c)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Defaults["api_key"]) != `"`+key+`"` || string(r.Fixed["pin"]) != `"`+pin+`"` ||
		string(r.Defaults["hidden"]) != `"`+hidden+`"` || string(r.Defaults["label"]) != `"visible"` {
		t.Errorf("resolved: defaults %s fixed %s", r.Defaults, r.Fixed)
	}
	// A ciphertext is bound to its tool and parameter.
	if _, err := f.svc.Resolve(uuid.NewString(), c); err == nil {
		t.Error("another tool's id decrypted the configuration")
	}
	swapped := tools.Configuration{Params: map[string]tools.Setting{"pin": c.Params["api_key"]}}
	if _, err := f.svc.Resolve(id, swapped); err == nil {
		t.Error("one parameter's ciphertext decrypted as another's")
	}

	// Sending the mask, nothing, or empty text keeps the stored values.
	empty := ""
	v := f.version(id)
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{
		"api_key": value(`"` + tools.Mask + `"`), "pin": {Mode: tools.ModeFixed}, "hidden": {Mode: tools.ModeDefault, Text: &empty},
		"label": text("visible")}})
	if f.version(id) != v {
		t.Errorf("keeping every value bumped the version")
	}
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{
		"api_key": fixedText(tools.Mask), "pin": fixedValue(` "` + tools.Mask + `" `), "hidden": text(""), "label": text("changed")}})
	c2 := f.config(id)
	for _, name := range []string{"pin", "hidden"} {
		if c2.Params[name].Secret != c.Params[name].Secret {
			t.Errorf("%s: ciphertext changed although the value was kept", name)
		}
	}
	if c2.Params["api_key"].Mode != tools.ModeFixed || c2.Params["api_key"].Secret != c.Params["api_key"].Secret {
		t.Errorf("api_key: %+v, want the same value now fixed", c2.Params["api_key"])
	}
	r, err = f.svc.Resolve(id, c2)
	if err != nil || string(r.Fixed["api_key"]) != `"`+key+`"` || string(r.Defaults["hidden"]) != `"`+hidden+`"` ||
		string(r.Defaults["label"]) != `"changed"` {
		t.Errorf("resolved after keeping: %s %s %v", r.Defaults, r.Fixed, err)
	}
	// A kept secret is still checked against the schema with the others.
	_, err = f.svc.Update(f.ctx, alice, id, tools.Patch{Params: map[string]tools.ParamInput{"api_key": value(`"` + tools.Mask + `"`),
		"count": text("99")}})
	wantFields(t, err, "params.count")

	// A new value replaces the old one.
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"api_key": text("sk-rotated"), "pin": fixedValue(`"` + tools.Mask + `"`)}})
	r, err = f.svc.Resolve(id, f.config(id))
	if err != nil || string(r.Defaults["api_key"]) != `"sk-rotated"` || string(r.Fixed["pin"]) != `"`+pin+`"` || len(r.Defaults)+len(r.Fixed) != 2 {
		t.Errorf("after rotating: %s %s %v", r.Defaults, r.Fixed, err)
	}

	// Without a stored value, keeping is an error naming the parameter.
	other := configTool(f, "validated")
	_, err = f.svc.Update(f.ctx, alice, other, tools.Patch{Params: map[string]tools.ParamInput{
		"api_key": value(`"` + tools.Mask + `"`), "pin": {Mode: tools.ModeFixed, Text: &empty}, "hidden": {Mode: tools.ModeDefault}}})
	ve := wantFields(t, err, "params.api_key", "params.pin", "params.hidden")
	if !strings.Contains(ve.For("params.api_key"), "none stored") {
		t.Errorf("message %q", ve.For("params.api_key"))
	}
	if f.version(other) != 0 || f.status(other) != "validated" {
		t.Errorf("failed update changed the tool")
	}
}

func TestIsSecretParam(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		prop map[string]any
		want bool
	}{
		{"api_key", map[string]any{"type": "string"}, true},
		{"password", nil, true},
		{"GITHUB_TOKEN", nil, true},
		{"pin", map[string]any{"format": "password"}, true},
		{"note", map[string]any{"writeOnly": true}, true},
		{"note", map[string]any{"writeOnly": false}, false},
		{"note", map[string]any{"writeOnly": "true"}, false},
		{"note", map[string]any{"format": "email"}, false},
		{"path", nil, false},
		{"max_tokens", nil, false},
		{"sort_key", nil, false},
		{"next_page_token", nil, false},
	}
	for _, c := range cases {
		if got := tools.IsSecretParam(c.name, c.prop); got != c.want {
			t.Errorf("IsSecretParam(%q, %v) = %v, want %v", c.name, c.prop, got, c.want)
		}
	}
}

func TestResolvedMerge(t *testing.T) {
	t.Parallel()
	r := tools.Resolved{
		Defaults: map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`"x"`)},
		Fixed:    map[string]json.RawMessage{"c": json.RawMessage(`true`), "d": json.RawMessage(`{"k":1,"j":[2,3]}`)},
	}
	show := func(m map[string]json.RawMessage) string { b, _ := json.Marshal(m); return string(b) }

	got, err := r.Merge(nil)
	if err != nil || show(got) != `{"a":1,"b":"x","c":true,"d":{"k":1,"j":[2,3]}}` {
		t.Errorf("defaults and fixed fill an empty call: %s %v", show(got), err)
	}
	args := map[string]json.RawMessage{"a": json.RawMessage(`2`), "e": json.RawMessage(`"own"`)}
	got, err = r.Merge(args)
	if err != nil || show(got) != `{"a":2,"b":"x","c":true,"d":{"k":1,"j":[2,3]},"e":"own"}` {
		t.Errorf("caller's values beat defaults: %s %v", show(got), err)
	}
	if len(args) != 2 {
		t.Errorf("Merge changed the caller's map: %s", show(args))
	}
	// The same value as the fixed one, however spelled, is allowed.
	got, err = r.Merge(map[string]json.RawMessage{"c": json.RawMessage(` true `), "d": json.RawMessage(`{ "j": [2, 3], "k": 1 }`)})
	if err != nil || string(got["d"]) != `{"k":1,"j":[2,3]}` {
		t.Errorf("equal fixed values: %s %v", show(got), err)
	}
	// A different one is an error naming the parameter as a JSON pointer.
	_, err = r.Merge(map[string]json.RawMessage{"c": json.RawMessage(`false`)})
	ve := wantFields(t, err, "/c")
	if !strings.Contains(ve.For("/c"), "fixed") {
		t.Errorf("message %q", ve.For("/c"))
	}
	_, err = r.Merge(map[string]json.RawMessage{"c": json.RawMessage(`"true"`), "d": json.RawMessage(`{"k":1}`), "a": json.RawMessage(`9`)})
	wantFields(t, err, "/c", "/d")
	// A secret fixed value is refused even when the caller guessed it right: the answer
	// must not tell a right guess from a wrong one.
	r.Secret = map[string]bool{"c": true}
	_, right := r.Merge(map[string]json.RawMessage{"c": json.RawMessage(`true`)})
	_, wrong := r.Merge(map[string]json.RawMessage{"c": json.RawMessage(`false`)})
	if right == nil || wrong == nil || right.Error() != wrong.Error() {
		t.Errorf("a secret fixed value: the right guess gets %v, a wrong one %v; want the same refusal", right, wrong)
	}

	var empty tools.Resolved
	got, err = empty.Merge(map[string]json.RawMessage{"x": json.RawMessage(`1`)})
	if err != nil || show(got) != `{"x":1}` {
		t.Errorf("nothing configured: %s %v", show(got), err)
	}
}

// A key that differs from a fixed parameter only in case is refused: both keys would
// reach the server, and one that binds with encoding/json (case-insensitive, last key
// wins, json.Marshal sorting "apikey" after "apiKey") would use the caller's value.
func TestResolvedMergeFoldedNames(t *testing.T) {
	t.Parallel()
	r := tools.Resolved{
		Fixed:  map[string]json.RawMessage{"apiKey": json.RawMessage(`"configured"`), "sort": json.RawMessage(`"asc"`)},
		Secret: map[string]bool{"apiKey": true},
	}
	for _, tc := range []struct{ key, fixed string }{
		{"apikey", "apiKey"},
		{"APIKEY", "apiKey"},
		{"api\u212aey", "apiKey"}, // KELVIN SIGN folds to k in encoding/json
		{"\u017fort", "sort"},     // LATIN SMALL LETTER LONG S folds to s
		{"SORT", "sort"},
	} {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(`{"`+tc.key+`":"mine"}`), &args); err != nil {
			t.Fatal(err)
		}
		var key string
		for k := range args {
			key = k
		}
		got, err := r.Merge(args)
		if err == nil {
			// What a Go server binding the call would read.
			body, _ := json.Marshal(got)
			var server struct {
				APIKey string `json:"apiKey"`
				Sort   string `json:"sort"`
			}
			_ = json.Unmarshal(body, &server)
			t.Errorf("%q is accepted; the server reads apiKey = %q, sort = %q", key, server.APIKey, server.Sort)
			continue
		}
		ve := wantFields(t, err, "/"+key)
		if msg := ve.For("/" + key); !strings.Contains(msg, `"`+tc.fixed+`"`) || !strings.Contains(msg, "tool's configuration") {
			t.Errorf("%q: message %q, want it to name %q and say the configuration sets it", key, msg, tc.fixed)
		}
	}
	// Other keys are the caller's to give.
	if _, err := r.Merge(map[string]json.RawMessage{"api_key": json.RawMessage(`"x"`), "sorted": json.RawMessage(`1`)}); err != nil {
		t.Errorf("keys that are not a fixed name: %v", err)
	}
}

func TestConfigVersionsAndReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "enabled")
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "ops"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		patch   tools.Patch
		changed []string
	}{
		{tools.Patch{Risk: ptr("high"), Reason: "risky"}, []string{"risk"}},
		{tools.Patch{TimeoutMS: ptr(5000)}, []string{"timeout_ms"}},
		{tools.Patch{Category: ptr("ops")}, []string{"category"}},
		{tools.Patch{Tags: []string{"b", "a"}, SetTags: true}, []string{"tags"}},
		{tools.Patch{Params: map[string]tools.ParamInput{"count": text("2"), "api_key": text("sk-secret-1")}}, []string{"params"}},
		{tools.Patch{MayLowerRisk: true, Risk: ptr("low"), TimeoutMS: ptr(0), Tags: []string{"c"}, SetTags: true, Reason: " several "},
			[]string{"risk", "timeout_ms", "tags"}},
	}
	for i, s := range steps {
		it, err := f.svc.Update(f.ctx, bob, id, s.patch)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		if it.ConfigVersion != i+1 {
			t.Fatalf("step %d: version %d", i+1, it.ConfigVersion)
		}
		p := f.auditPayloads("tool.configure", id)
		if len(p) != i+1 {
			t.Fatalf("step %d: %d audit rows", i+1, len(p))
		}
		last := p[i]
		var changed []string
		for _, c := range last["changed"].([]any) {
			changed = append(changed, c.(string))
		}
		if last["version"] != float64(i+1) || !slices.Equal(changed, s.changed) || last["reason"] != strings.TrimSpace(s.patch.Reason) {
			t.Errorf("step %d: audit payload %v", i+1, last)
		}
	}
	if actor := f.str(`SELECT actor_name FROM audit_log WHERE action = 'tool.configure' ORDER BY id DESC LIMIT 1`); actor != "bob" {
		t.Errorf("audit actor %q", actor)
	}
	it := f.get(id)
	if deref(it.RiskOverride) != "low" || it.TimeoutMS != nil || deref(it.Category) != "ops" || !slices.Equal(it.Tags, []string{"c"}) {
		t.Errorf("after the steps: %+v", it)
	}
	if it.Status != "enabled" || len(f.history(id)) != 0 {
		t.Errorf("settings moved an enabled tool: %s %v", it.Status, f.history(id))
	}
	// No-op updates record nothing.
	for _, p := range []tools.Patch{
		{MayLowerRisk: true, Risk: ptr("LOW")}, {TimeoutMS: nil}, {Category: ptr(" OPS ")}, {Tags: []string{"C", "c"}, SetTags: true},
		{Params: map[string]tools.ParamInput{"count": value(` 2 `), "api_key": value(`"` + tools.Mask + `"`)}}, {},
	} {
		it := f.update(id, p)
		if it.ConfigVersion != len(steps) {
			t.Errorf("no-op %+v bumped the version to %d", p, it.ConfigVersion)
		}
	}
	if n := f.count(`SELECT count(*) FROM tool_configurations WHERE tool_id = $1`, id); n != len(steps) {
		t.Errorf("%d versions, want %d", n, len(steps))
	}
	if n := len(f.auditPayloads("tool.configure", id)); n != len(steps) {
		t.Errorf("%d audit rows, want %d", n, len(steps))
	}

	// The versions, newest first, each with what was set then.
	vs, err := f.svc.ConfigVersions(f.ctx, id, 100)
	if err != nil || len(vs) != len(steps) {
		t.Fatalf("versions: %d %v", len(vs), err)
	}
	for i, v := range vs {
		if v.Version != len(steps)-i || v.Actor != "bob" {
			t.Errorf("version %d: %+v", i, v)
		}
	}
	if vs[0].Reason != "several" || vs[len(vs)-1].Reason != "risky" {
		t.Errorf("reasons: %q %q", vs[0].Reason, vs[len(vs)-1].Reason)
	}
	var v3 map[string]any
	_ = json.Unmarshal(vs[len(vs)-3].Configuration, &v3)
	if v3["risk"] != "high" || v3["timeout_ms"] != float64(5000) || v3["category"] != "ops" {
		t.Errorf("version 3: %s", vs[len(vs)-3].Configuration)
	}
	if two, err := f.svc.ConfigVersions(f.ctx, id, 2); err != nil || len(two) != 2 || two[0].Version != len(steps) {
		t.Errorf("limited versions: %+v %v", two, err)
	}

	// Reset: parameters, risk and timeout go; category and tags stay; versioned and audited.
	f.update(id, tools.Patch{TimeoutMS: ptr(700)})
	it, err = f.svc.Reset(f.ctx, alice, id)
	if err != nil {
		t.Fatal(err)
	}
	if it.RiskOverride != nil || it.TimeoutMS != nil || deref(it.Category) != "ops" || !slices.Equal(it.Tags, []string{"c"}) ||
		it.ConfigVersion != len(steps)+2 {
		t.Errorf("after reset: %+v", it)
	}
	if c := f.config(id); len(c.Params) != 0 {
		t.Errorf("params after reset: %+v", c.Params)
	}
	resets := f.auditPayloads("tool.configure.reset", id)
	if len(resets) != 1 || resets[0]["reason"] != "reset to defaults" || resets[0]["version"] != float64(len(steps)+2) {
		t.Errorf("reset audit: %v", resets)
	}
	if r := f.str(`SELECT reason FROM tool_configurations WHERE tool_id = $1 ORDER BY version DESC LIMIT 1`, id); r != "reset to defaults" {
		t.Errorf("reset version reason %q", r)
	}
	// Resetting a tool at its defaults records nothing.
	if it, err := f.svc.Reset(f.ctx, alice, id); err != nil || it.ConfigVersion != len(steps)+2 {
		t.Errorf("second reset: version %d, %v", it.ConfigVersion, err)
	}
	if _, err := f.svc.Reset(f.ctx, alice, uuid.NewString()); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("reset unknown: %v", err)
	}
	// Every version has its audit row and its event.
	all := f.count(`SELECT count(*) FROM audit_log WHERE target_id = $1 AND action LIKE 'tool.configure%'`, id)
	if n := f.count(`SELECT count(*) FROM tool_configurations WHERE tool_id = $1`, id); n != all {
		t.Errorf("%d versions but %d audit rows", n, all)
	}
	if n := f.count(`SELECT count(*) FROM events WHERE kind = 'tool.changed' AND payload->>'id' = $1`, id); n != all {
		t.Errorf("%d tool.changed events, want %d", n, all)
	}
}

func TestUpdateSettingsValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "ops"}); err != nil {
		t.Fatal(err)
	}
	manyTags := make([]string, tools.MaxTags+1)
	for i := range manyTags {
		manyTags[i] = fmt.Sprintf("t%d", i)
	}
	bad := []struct {
		name  string
		patch tools.Patch
		field []string
	}{
		{"risk", tools.Patch{Risk: ptr("extreme")}, []string{"risk"}},
		{"timeout too short", tools.Patch{TimeoutMS: ptr(tools.MinTimeoutMS - 1)}, []string{"timeout_ms"}},
		{"timeout too long", tools.Patch{TimeoutMS: ptr(tools.MaxTimeoutMS + 1)}, []string{"timeout_ms"}},
		{"negative timeout", tools.Patch{TimeoutMS: ptr(-1)}, []string{"timeout_ms"}},
		{"unknown category", tools.Patch{Category: ptr("ghost")}, []string{"category"}},
		{"bad tag", tools.Patch{Tags: []string{"ok", "Bad Tag!"}, SetTags: true}, []string{"tags"}},
		{"tag with underscore", tools.Patch{Tags: []string{"a_b"}, SetTags: true}, []string{"tags"}},
		{"too many tags", tools.Patch{Tags: manyTags, SetTags: true}, []string{"tags"}},
		{"all at once", tools.Patch{Risk: ptr("x"), TimeoutMS: ptr(1), Category: ptr("ghost"), Tags: []string{"-x"}, SetTags: true,
			Params: map[string]tools.ParamInput{"nope": text("1")}}, []string{"risk", "timeout_ms", "category", "tags", "params.nope"}},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			_, err := f.svc.Update(f.ctx, alice, id, b.patch)
			wantFields(t, err, b.field...)
		})
	}
	if f.version(id) != 0 || f.count(`SELECT count(*) FROM audit_log`) != 1 { // the category's
		t.Fatalf("failed updates changed something: version %d", f.version(id))
	}
	// Good values, at the edges.
	it := f.update(id, tools.Patch{MayLowerRisk: true, Risk: ptr(" HIGH "), TimeoutMS: ptr(tools.MinTimeoutMS), Category: ptr(" Ops "),
		Tags: []string{" Beta", "alpha", "beta", "", strings.Repeat("z", 32)}, SetTags: true})
	if deref(it.RiskOverride) != "high" || *it.TimeoutMS != tools.MinTimeoutMS || deref(it.Category) != "ops" ||
		!slices.Equal(it.Tags, []string{"alpha", "beta", strings.Repeat("z", 32)}) {
		t.Errorf("after good update: %+v", it)
	}
	if it.Risk().Level != "high" || it.Risk().Source != "override" {
		t.Errorf("risk: %+v", it.Risk())
	}
	if it.Status != "validated" {
		t.Errorf("settings other than parameters moved the tool to %s", it.Status)
	}
	it = f.update(id, tools.Patch{TimeoutMS: ptr(tools.MaxTimeoutMS)})
	if *it.TimeoutMS != tools.MaxTimeoutMS {
		t.Errorf("timeout %d", *it.TimeoutMS)
	}
	it = f.update(id, tools.Patch{Risk: ptr(""), TimeoutMS: ptr(0), Category: ptr(""), Tags: nil, SetTags: true})
	if it.RiskOverride != nil || it.TimeoutMS != nil || it.Category != nil || len(it.Tags) != 0 {
		t.Errorf("after clearing: %+v", it)
	}
	if n := f.count(`SELECT count(*) FROM tool_tags WHERE tool_id = $1`, id); n != 0 {
		t.Errorf("%d tag rows left", n)
	}
	if _, err := f.svc.Update(f.ctx, alice, uuid.NewString(), tools.Patch{MayLowerRisk: true, Risk: ptr("low")}); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("update unknown: %v", err)
	}
	if _, err := f.svc.Update(f.ctx, alice, "nope", tools.Patch{}); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("update bad id: %v", err)
	}
	if _, err := f.svc.Configuration(f.ctx, uuid.NewString()); !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("configuration of unknown: %v", err)
	}
}

// TestFirstParamsConfigure: a validated tool's first parameter settings move it to
// configured, in the same transaction as the version.
func TestFirstParamsConfigure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	// Settings without parameters, and an empty parameter set, leave it validated.
	f.update(id, tools.Patch{MayLowerRisk: true, Risk: ptr("low")})
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{}})
	if f.status(id) != "validated" {
		t.Fatalf("status %s", f.status(id))
	}
	it := f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"path": value(`"/tmp"`)}, Reason: "point it somewhere"})
	if it.Status != "configured" || f.status(id) != "configured" {
		t.Fatalf("status %s", it.Status)
	}
	h := f.strings(`SELECT from_status || '→' || to_status || ' ' || actor || ': ' || reason FROM tool_state_history WHERE tool_id = $1`, id)
	if !slices.Equal(h, []string{"validated→configured alice: configuration saved"}) {
		t.Errorf("history %v", h)
	}
	// Removing all parameters does not move it back.
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{}})
	if f.status(id) != "configured" || len(f.history(id)) != 1 {
		t.Errorf("status %s history %v", f.status(id), f.history(id))
	}
	// Other states keep theirs.
	for _, st := range []string{"invalid", "verified", "disabled", "discovered"} {
		other := configTool(f, st)
		f.update(other, tools.Patch{Params: map[string]tools.ParamInput{"path": value(`"/tmp"`)}})
		if f.status(other) != st || len(f.history(other)) != 0 {
			t.Errorf("%s tool: now %s, history %v", st, f.status(other), f.history(other))
		}
	}
}

func TestParamInputs(t *testing.T) {
	t.Parallel()
	in, merge, err := tools.ParamInputs(json.RawMessage(`{"defaults":{"a":1,"b":"x"},"fixed":{"c":[true]}}`))
	if err != nil || merge {
		t.Fatal(err)
	}
	if len(in) != 3 || in["a"].Mode != tools.ModeDefault || string(in["a"].Value) != "1" || in["b"].Mode != tools.ModeDefault ||
		in["c"].Mode != tools.ModeFixed || string(in["c"].Value) != "[true]" || in["a"].Text != nil {
		t.Errorf("inputs: %+v", in)
	}
	for _, raw := range []string{`{}`, `{"defaults":{}}`, `{"fixed":null}`} {
		if in, merge, err := tools.ParamInputs(json.RawMessage(raw)); err != nil || len(in) != 0 || in == nil || merge {
			t.Errorf("%s: %+v %v, want an empty (not nil) set: it clears the configuration", raw, in, err)
		}
	}
	_, _, err = tools.ParamInputs(json.RawMessage(`{"defaults":{"a":1,"b":2},"fixed":{"a":1,"c":3}}`))
	ve := wantFields(t, err, "params.a")
	if !strings.Contains(ve.For("params.a"), "both") {
		t.Errorf("message %q", ve.For("params.a"))
	}
	// A flat map is a set of defaults to merge (seed 004's updateToolConfiguration(id, {units: "metric"})).
	in, merge, err = tools.ParamInputs(json.RawMessage(`{"units":"metric","default":{"a":1}}`))
	if err != nil || !merge || len(in) != 2 || in["units"].Mode != tools.ModeDefault || string(in["units"].Value) != `"metric"` ||
		in["default"].Mode != tools.ModeDefault || string(in["default"].Value) != `{"a":1}` {
		t.Errorf("flat map: %+v %v", in, err)
	}
	for _, raw := range []string{`not json`, `[]`, `null`, `"x"`, `{"defaults":[1]}`, `{"defaults":{"a":1},"other":1}`, `{"fixed":{},"units":"metric"}`} {
		_, _, err := tools.ParamInputs(json.RawMessage(raw))
		t.Run(raw, func(t *testing.T) { wantFields(t, err, "configuration") })
	}
}

// A flat configuration (MergeParams) sets its defaults and keeps every other setting, a
// stored secret included; it does not loosen a fixed parameter into a default.
func TestMergeParams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"count": text("3"), "mode": fixedText("fast"),
		"api_key": fixedText("sk-merge-secret")}})
	before := f.config(id)
	in, merge, err := tools.ParamInputs(json.RawMessage(`{"names":["y"],"count":4}`))
	if err != nil || !merge {
		t.Fatal(merge, err)
	}
	f.update(id, tools.Patch{Params: in, MergeParams: merge})
	after := f.config(id)
	if len(after.Params) != 4 || string(after.Params["count"].Value) != "4" || compact(after.Params["names"].Value) != `["y"]` ||
		after.Params["mode"].Mode != tools.ModeFixed || string(after.Params["mode"].Value) != `"fast"` ||
		after.Params["api_key"].Mode != tools.ModeFixed || after.Params["api_key"].Secret != before.Params["api_key"].Secret {
		t.Errorf("after a flat update: %+v", after.Params)
	}
	in, merge, _ = tools.ParamInputs(json.RawMessage(`{"mode":"slow"}`))
	_, err = f.svc.Update(f.ctx, alice, id, tools.Patch{Params: in, MergeParams: merge})
	if ve := wantFields(t, err, "params.mode"); !strings.Contains(ve.For("params.mode"), "is fixed") {
		t.Errorf("loosening a fixed parameter: %q", ve.For("params.mode"))
	}
	if got := f.config(id); string(got.Params["mode"].Value) != `"fast"` || got.Params["mode"].Mode != tools.ModeFixed {
		t.Errorf("the refused update changed mode: %+v", got.Params["mode"])
	}
}

// TestParamInputsRoundTrip: the API view of a configuration, read back by ParamInputs,
// saves as the same configuration (secrets kept by their mask).
func TestParamInputsRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"count": text("3"), "mode": fixedText("fast"),
		"api_key": fixedText("sk-roundtrip"), "names": text(`["x"]`)}})
	before := f.config(id)
	raw, _ := json.Marshal(before.APIView(f.get(id).InputSchema))
	in, _, err := tools.ParamInputs(raw)
	if err != nil {
		t.Fatal(err)
	}
	v := f.version(id)
	f.update(id, tools.Patch{Params: in})
	if f.version(id) != v {
		t.Errorf("saving the API view back bumped the version")
	}
	after := f.config(id)
	if after.Params["api_key"].Secret != before.Params["api_key"].Secret {
		t.Errorf("secret changed on a round trip")
	}
}

// compact is a JSON value without insignificant spaces (jsonb prints some).
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return "invalid JSON: " + string(v)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestUpdateIsOneTransaction: when writing the version fails, the settings, the state move
// and the audit row are not written either.
func TestUpdateIsOneTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := configTool(f, "validated")
	// A stray row where the next version goes makes the version insert fail.
	f.exec(`INSERT INTO tool_configurations (tool_id, version, configuration, actor) VALUES ($1, 1, '{}', 'stray')`, id)
	audits, events := f.count(`SELECT count(*) FROM audit_log`), f.count(`SELECT count(*) FROM events`)
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{MayLowerRisk: true, Risk: ptr("low"), Tags: []string{"t"}, SetTags: true,
		Params: map[string]tools.ParamInput{"api_key": text("sk-should-not-stay"), "count": text("3")}})
	if err == nil {
		t.Fatal("update succeeded over a conflicting version row")
	}
	var ve *verr.Error
	if errors.As(err, &ve) {
		t.Fatalf("a database failure reported as input error: %v", err)
	}
	it := f.get(id)
	if it.RiskOverride != nil || it.ConfigVersion != 0 || len(it.Tags) != 0 || it.Status != "validated" {
		t.Errorf("tool changed by a failed update: %+v", it)
	}
	if raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id); raw != "{}" {
		t.Errorf("configuration %s", raw)
	}
	if len(f.history(id)) != 0 || f.count(`SELECT count(*) FROM audit_log`) != audits || f.count(`SELECT count(*) FROM events`) != events {
		t.Errorf("a failed update left history, audit or events")
	}
	// Once the stray row is gone the same update goes through, all of it.
	f.exec(`DELETE FROM tool_configurations WHERE tool_id = $1`, id)
	it = f.update(id, tools.Patch{MayLowerRisk: true, Risk: ptr("low"), Params: map[string]tools.ParamInput{"count": text("3")}})
	if it.ConfigVersion != 1 || it.Status != "configured" || len(f.auditPayloads("tool.configure", id)) != 1 {
		t.Errorf("after: %+v", it)
	}
}

// TestParamNamesWithPointerCharacters: a parameter whose name holds "/" or "~" (escaped
// in JSON pointers) is still checked against its schema.
func TestParamNamesWithPointerCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("odd", false)
	id := f.tool(toolSpec{server: srv, name: "odd", schema: `{"type":"object","properties":{
		"a/b":{"type":"integer"},"c~d":{"type":"integer"},"e~1f":{"type":"integer"}}}`})
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Params: map[string]tools.ParamInput{
		"a/b": value(`"x"`), "c~d": value(`"y"`), "e~1f": value(`"z"`)}})
	wantFields(t, err, "params.a/b", "params.c~d", "params.e~1f")
	if f.version(id) != 0 {
		t.Errorf("invalid values saved")
	}
	it := f.update(id, tools.Patch{Params: map[string]tools.ParamInput{"a/b": text("1"), "c~d": value("2"), "e~1f": value("3")}})
	if c := f.config(id); len(c.Params) != 3 || it.ConfigVersion != 1 {
		t.Errorf("valid values: %+v", c.Params)
	}
}

// A configured value the schema refuses is named in the error, unless it is a secret's:
// that is never shown again (stored encrypted, typed blind).
func TestConfigErrorsShowNoSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("cfg-enum", false)
	id := f.tool(toolSpec{server: srv, name: "work", status: "validated", schema: `{"type":"object","properties":{
		"tier":{"type":"string","enum":["gold","silver"],"writeOnly":true},
		"mode":{"type":"string","enum":["fast","slow"]}}}`})
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Reason: "enum", Params: map[string]tools.ParamInput{
		"tier": value(`"bronze-plan"`), "mode": value(`"medium"`)}})
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("update: %v, want field errors", err)
	}
	if got := ve.For("params.mode"); !strings.Contains(got, `one of 'fast', 'slow'; got "medium"`) {
		t.Errorf("params.mode: %q, want the allowed values and the value given", got)
	}
	if got := ve.For("params.tier"); !strings.Contains(got, "one of 'gold', 'silver'") || strings.Contains(got, "bronze") {
		t.Errorf("params.tier: %q, want the allowed values and not the secret given", got)
	}
	// A value secret by its setting alone (an import's secret: reference), which the
	// schema does not mark: a pattern's or a bound's problem quotes it no more.
	id = f.tool(toolSpec{server: srv, name: "tenant", status: "validated", schema: `{"type":"object","properties":{
		"tenant":{"type":"string","pattern":"^[a-z]+$"},"seats":{"type":"integer","maximum":9999}}}`})
	_, err = f.svc.Update(f.ctx, alice, id, tools.Patch{Reason: "secret", Params: map[string]tools.ParamInput{
		"tenant": {Mode: tools.ModeFixed, Value: json.RawMessage(`"Acme-Prod-Secret-42"`), Secret: true},
		"seats":  {Mode: tools.ModeFixed, Value: json.RawMessage(`123456`), Secret: true}}})
	if !errors.As(err, &ve) {
		t.Fatalf("update: %v, want field errors", err)
	}
	if got := ve.For("params.tenant") + ve.For("params.seats"); got == "" || strings.Contains(got, "Acme") || strings.Contains(got, "123") {
		t.Errorf("secret settings' problems: %q, want them named without their values", got)
	}
}

// Parameters that a generator composes through allOf, or defines through $ref, are
// configured as the form lists them: typed by their resolved schema, secret by it.
func TestComposedParams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("cfg-composed", false)
	id := f.tool(toolSpec{server: srv, name: "work", status: "validated", schema: `{"type":"object",
		"$defs":{"Count":{"type":"integer","minimum":1},"Pin":{"type":"string","format":"password"}},
		"properties":{"path":{"type":"string"},"count":{"$ref":"#/$defs/Count"},"pin":{"$ref":"#/$defs/Pin"}},
		"allOf":[{"properties":{"depth":{"type":"integer"},"mode":{"type":"string","enum":["fast","slow"]}}}]}`})
	byName := map[string]tools.ConfigParam{}
	for _, p := range tools.ConfigParams(f.get(id), f.config(id)) {
		byName[p.Name] = p
	}
	if byName["depth"].Kind != "integer" || byName["mode"].Kind != "enum" || byName["count"].Kind != "integer" || !byName["pin"].Secret {
		t.Errorf("form kinds: %+v", byName)
	}
	_, err := f.svc.Update(f.ctx, alice, id, tools.Patch{Params: map[string]tools.ParamInput{
		"depth": text("deep"), "count": text("0")}})
	wantFields(t, err, "params.depth", "params.count")
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{
		"depth": text("3"), "mode": fixedText("slow"), "count": text("2"), "pin": text("1234")}})
	c := f.config(id)
	if string(c.Params["depth"].Value) != "3" || string(c.Params["mode"].Value) != `"slow"` || string(c.Params["count"].Value) != "2" {
		t.Errorf("saved: %+v", c.Params)
	}
	if c.Params["pin"].Secret == "" || c.Params["pin"].Value != nil {
		t.Errorf("a $ref password parameter is stored in plain: %+v", c.Params["pin"])
	}
}
