package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/tools"
)

// nestedSecretConfigSchema marks secrets where the top-level property itself does not:
// through a $ref, inside an object or an array, and in anyOf/oneOf/allOf branches.
const nestedSecretConfigSchema = `{"type":"object",
	"$defs":{"Hidden":{"type":"string","writeOnly":true}},
	"properties":{
	"ref":{"$ref":"#/$defs/Hidden"},
	"dial":{"type":"object","properties":{"host":{"type":"string"},"digits":{"type":"string","format":"password"}}},
	"rows":{"type":"array","items":{"type":"object","properties":{"cell":{"type":"string","writeOnly":true}}}},
	"extra":{"anyOf":[{"type":"string","writeOnly":true},{"type":"null"}]},
	"memo":{"oneOf":[{"type":"string","format":"password"},{"type":"integer"}]},
	"seal":{"allOf":[{"type":"string"},{"writeOnly":true}]},
	"note":{"type":"string"}}}`

// A configuration value for a parameter whose schema marks a secret below or beside the
// top-level property is stored encrypted and never shown back, as a top-level password's is.
func TestNestedSecretConfigParams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("cfg-nested-secret", false)
	id := f.tool(toolSpec{server: srv, name: "work", status: "validated", schema: nestedSecretConfigSchema})
	// Plain words: nothing here looks like a credential by itself.
	plain := map[string]string{"ref": "blue-42", "dial": "7788", "rows": "c-one", "extra": "green-7", "memo": "red-9", "seal": "gold-3"}
	f.update(id, tools.Patch{Reason: "nested secrets", Params: map[string]tools.ParamInput{
		"ref":   fixedValue(`"blue-42"`),
		"dial":  fixedValue(`{"host":"db.local","digits":"7788"}`),
		"rows":  fixedValue(`[{"cell":"c-one"}]`),
		"extra": fixedValue(`"green-7"`),
		"memo":  fixedValue(`"red-9"`),
		"seal":  fixedValue(`"gold-3"`),
		"note":  fixedValue(`"visible"`),
	}})
	raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id)
	for name, p := range plain {
		if strings.Contains(raw, p) {
			t.Errorf("mcp_tools.configuration holds %s's secret %q: %s", name, p, raw)
		}
	}
	if !strings.Contains(raw, "visible") {
		t.Errorf("configuration lost the plain value: %s", raw)
	}
	c := f.config(id)
	for name := range plain {
		if st := c.Params[name]; st.Secret == "" || st.Value != nil {
			t.Errorf("%s stored as %+v, want a ciphertext only", name, st)
		}
	}
	view, _ := json.Marshal(c.APIView(f.get(id).InputSchema))
	for name, p := range plain {
		if strings.Contains(string(view), p) {
			t.Errorf("the API view shows %s's secret: %s", name, view)
		}
	}
	for _, p := range tools.ConfigParams(f.get(id), c) {
		if _, secret := plain[p.Name]; secret {
			if !p.Secret || !p.Stored || p.Value != "" || p.Text != "" {
				t.Errorf("form shows %s as %+v", p.Name, p)
			}
		} else if p.Secret || p.Text != "visible" {
			t.Errorf("form shows %s as %+v", p.Name, p)
		}
	}
	// Before any value is saved, the form already marks them secret.
	other := f.tool(toolSpec{server: srv, name: "work2", status: "validated", schema: nestedSecretConfigSchema})
	for _, p := range tools.ConfigParams(f.get(other), f.config(other)) {
		if _, secret := plain[p.Name]; p.Secret != secret {
			t.Errorf("a new tool's form: %s secret %v, want %v", p.Name, p.Secret, secret)
		}
	}
	// The call still gets the values.
	r, err := f.svc.Resolve(id, c)
	if err != nil {
		t.Fatal(err)
	}
	if compact(r.Fixed["dial"]) != `{"host":"db.local","digits":"7788"}` || string(r.Fixed["ref"]) != `"blue-42"` {
		t.Errorf("resolved: %s", r.Fixed)
	}
}

// SecretParams matches a deeper secret to its top-level parameter by the escaped name: a
// name holding "/" or "~" is found, and a name that only prefixes another is not.
func TestSecretParamsEscapedNames(t *testing.T) {
	t.Parallel()
	is := tools.SecretParams(json.RawMessage(`{"type":"object","properties":{
		"a/b":{"type":"object","properties":{"x":{"type":"string","writeOnly":true}}},
		"~c":{"type":"array","items":{"type":"string","format":"password"}},
		"a":{"type":"object","properties":{"b":{"type":"string"}}},
		"d":{"type":"string"},
		"de":{"type":"object","properties":{"f":{"type":"string","writeOnly":true}}}}}`))
	for name, want := range map[string]bool{"a/b": true, "~c": true, "a": false, "d": false, "de": true} {
		if got := is(name, nil); got != want {
			t.Errorf("%q: secret %v, want %v", name, got, want)
		}
	}
}

// A value saved in clear before its parameter was known to be secret (a secret marked
// deeper in its schema) is hidden by the form; saving the form with it left blank keeps
// the value, now encrypted, rather than refusing the save.
func TestClearValueOfNowSecretParamEncryptedOnSave(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("cfg-nested-clear", false)
	id := f.tool(toolSpec{server: srv, name: "work", status: "validated", schema: nestedSecretConfigSchema})
	f.exec(`UPDATE mcp_tools SET configuration = '{"params":{"dial":{"mode":"fixed","value":{"host":"db.local","digits":"7788"}}}}' WHERE id = $1`, id)
	f.update(id, tools.Patch{Reason: "another setting", Params: map[string]tools.ParamInput{
		"dial": fixedText(""),
		"note": fixedValue(`"visible"`),
	}})
	if raw := f.str(`SELECT configuration::text FROM mcp_tools WHERE id = $1`, id); strings.Contains(raw, "7788") {
		t.Errorf("the clear value stayed in clear: %s", raw)
	}
	c := f.config(id)
	r, err := f.svc.Resolve(id, c)
	if err != nil {
		t.Fatal(err)
	}
	if compact(r.Fixed["dial"]) != `{"host":"db.local","digits":"7788"}` {
		t.Errorf("resolved: %s", r.Fixed)
	}
}

// A secret marked under additionalProperties or patternProperties does not make every
// setting secret: additionalProperties never covers a declared property, and a
// patternProperties key covers only the names it matches.
func TestSecretParamsOfMaps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		schema string
		want   map[string]bool
	}{
		{`{"type":"object","properties":{"region":{"type":"string"},"url":{"type":"string"}},
			"additionalProperties":{"type":"string","writeOnly":true}}`, map[string]bool{"region": false, "url": false}},
		{`{"type":"object","properties":{"region":{"type":"string"},"secret_code":{"type":"string"}},
			"patternProperties":{"^secret_":{"type":"string","writeOnly":true}}}`, map[string]bool{"region": false, "secret_code": true}},
		// Where the secret map is cannot be told at the root (a $ref), or its pattern is
		// one Go cannot read: every setting is secret, as before.
		{`{"$ref":"#/$defs/M","$defs":{"M":{"type":"object","properties":{"dsn":{"type":"string"}},
			"patternProperties":{"^dsn$":{"writeOnly":true}}}}}`, map[string]bool{"dsn": true}},
		{`{"type":"object","properties":{"region":{"type":"string"}},
			"patternProperties":{"^(?!pub).*":{"type":"string","writeOnly":true}}}`, map[string]bool{"region": true}},
	} {
		is := tools.SecretParams(json.RawMessage(c.schema))
		for name, want := range c.want {
			if got := is(name, nil); got != want {
				t.Errorf("%s in %s: secret %v, want %v", name, c.schema, got, want)
			}
		}
	}
}
