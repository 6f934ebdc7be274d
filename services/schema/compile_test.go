package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/verr"
)

func TestCompileSchemaRefusesOutsideReferences(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, schema string }{
		{"https", `{"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}`},
		{"http fragment", `{"type": "object", "properties": {"a": {"$ref": "http://example.com/a.json#/$defs/A"}}}`},
		{"relative file", `{"type": "object", "properties": {"a": {"$ref": "other.json"}}}`},
		{"absolute path", `{"type": "object", "properties": {"a": {"$ref": "/etc/passwd"}}}`},
		{"file URL", `{"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}`},
		{"unknown meta-schema", `{"$schema": "https://example.com/meta", "type": "object"}`},
		{"relative to an $id", `{"$id": "https://example.com/tool.json", "type": "object", "properties": {"a": {"$ref": "other.json"}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := CompileSchema(json.RawMessage(tc.schema))
			if err == nil {
				t.Fatalf("got a schema %v, want an error", s)
			}
			if !errors.Is(err, ErrRemoteRef) {
				t.Errorf("got %v, want an error wrapping ErrRemoteRef", err)
			}
			if !strings.Contains(err.Error(), "#/$defs/") {
				t.Errorf("error %q does not say how to refer locally", err)
			}
		})
	}
}

func TestCompileSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		schema  string
		valid   string // arguments that must pass
		invalid string // arguments that must fail
	}{
		{"local $defs ref", `{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}}`, `{"a": "x"}`, `{"a": 1}`},
		{"draft-07 definitions", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}, "definitions": {"A": {"type": "integer"}}}`, `{"a": 1}`, `{"a": "x"}`},
		{"ref through own $id", `{"$id": "https://example.com/t.json", "type": "object", "properties": {"a": {"$ref": "https://example.com/t.json#/$defs/A"}}, "$defs": {"A": {"type": "boolean"}}}`, `{"a": true}`, `{"a": "x"}`},
		{"recursive ref", `{"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}`, `{"name": "a", "children": [{"name": "b"}]}`, `{"children": [{"name": 1}]}`},
		{"2020-12 by default", `{"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}], "items": false}}}`, `{"t": ["x"]}`, `{"t": ["x", "y"]}`},
		{"unsupported pattern is lenient", `{"type": "object", "properties": {"e": {"type": "string", "pattern": "^(?!\\.)[a-z.]+$"}}}`, `{"e": ".anything"}`, `{"e": 1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := CompileSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("got %v, want the schema to compile", err)
			}
			if err := ValidateArguments(s, json.RawMessage(tc.valid)); err != nil {
				t.Errorf("%s: got %v, want valid", tc.valid, err)
			}
			if err := ValidateArguments(s, json.RawMessage(tc.invalid)); err == nil {
				t.Errorf("%s: got valid, want an error", tc.invalid)
			}
		})
	}
}

func TestCompileSchemaErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, schema, want string }{
		{"empty", ``, "no schema"},
		{"null", `null`, "no schema"},
		{"not JSON", `{"type": `, "not valid JSON"},
		{"trailing data", `{"type": "object"} {}`, "not valid JSON"},
		{"bad keyword value", `{"type": "object", "minProperties": -1}`, `"/minProperties"`},
		{"dangling ref", `{"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}`, "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileSchema(json.RawMessage(tc.schema))
			if err == nil {
				t.Fatal("got nil, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "schema: ") {
				t.Errorf("got %q, want a \"schema: \" error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("got a multi-line error %q", err)
			}
		})
	}
}

func TestValidateArguments(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"message": {"type": "string"},
			"api_key": {"enum": ["k1", "k2"]},
			"count": {"type": "integer", "minimum": 1},
			"opts": {"type": "object", "properties": {"mode": {"enum": ["a", "b"]}}, "required": ["mode"]}
		},
		"required": ["message"],
		"additionalProperties": false
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args any
		want map[string]string // path → part of the message; nil for valid
	}{
		{"valid raw", json.RawMessage(`{"message": "hi", "count": 2}`), nil},
		{"valid decoded", map[string]any{"message": "hi", "count": 2}, nil},
		{"missing", json.RawMessage(`{}`), map[string]string{"/message": "is required"}},
		{"nil arguments", nil, map[string]string{"/message": "is required"}},
		{"wrong type", json.RawMessage(`{"message": 5}`), map[string]string{"/message": "want string"}},
		{"below minimum", json.RawMessage(`{"message": "hi", "count": 0}`), map[string]string{"/count": "minimum"}},
		{"nested", json.RawMessage(`{"message": "hi", "opts": {"mode": "c"}}`), map[string]string{"/opts/mode": `value must be one of 'a', 'b'; got "c"`}},
		{"enum long value", json.RawMessage(`{"message": "hi", "opts": {"mode": "` + strings.Repeat("x", 100) + `"}}`),
			// Left out, not cut: the router could not mask a configured secret cut in two.
			map[string]string{"/opts/mode": `value must be one of 'a', 'b'`}},
		{"enum object", json.RawMessage(`{"message": "hi", "opts": {"mode": {"a": 1}}}`), map[string]string{"/opts/mode": `value must be one of 'a', 'b'`}},
		// What may be a credential is not repeated: the message reaches the audit log.
		{"enum secret name", json.RawMessage(`{"message": "hi", "api_key": "k3"}`), map[string]string{"/api_key": `value must be one of 'k1', 'k2'`}},
		{"enum secret value", json.RawMessage(`{"message": "hi", "opts": {"mode": "Bearer abcdefghijklmnopqrstuvwx"}}`),
			map[string]string{"/opts/mode": `value must be one of 'a', 'b'`}},
		{"nested missing", json.RawMessage(`{"message": "hi", "opts": {}}`), map[string]string{"/opts/mode": "is required"}},
		{"unknown", json.RawMessage(`{"message": "hi", "extra": 1}`), map[string]string{"": "extra"}},
		{"not JSON", json.RawMessage(`{"message": `), map[string]string{"": "not valid JSON"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateArguments(s, tc.args)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var ve *verr.Error
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a *verr.Error", err)
			}
			for path, msg := range tc.want {
				if got := ve.For(path); !strings.Contains(got, msg) {
					t.Errorf("at %q: got %q, want a message containing %q (all: %v)", path, got, msg, ve.Fields)
				}
				if got := ve.For(path); strings.HasPrefix(tc.name, "enum ") && !strings.Contains(msg, gotSep) && strings.Contains(got, gotSep) {
					t.Errorf("at %q: %q shows the value given", path, got)
				}
			}
		})
	}
}

// A call that breaks the schema in every one of 200,000 places (a body of a few
// megabytes) is answered with MaxFieldErrors problems and a count of the rest, and the
// answer costs time in proportion to the problems, not their square.
func TestValidateArgumentsManyErrors(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"tags":[0` + strings.Repeat(",0", 199_999) + `]}`
	within(t, func() {
		err := ValidateArguments(s, json.RawMessage(body))
		var ve *verr.Error
		if !errors.As(err, &ve) {
			t.Errorf("got %v, want a *verr.Error", err)
			return
		}
		if len(ve.Fields) > MaxFieldErrors+1 {
			t.Errorf("got %d fields, want at most %d", len(ve.Fields), MaxFieldErrors+1)
			return
		}
		if got := ve.Fields[0]; got.Field != "/tags/0" || got.Kind != verr.KindType {
			t.Errorf("first field: got %+v, want a wrong_type at /tags/0", got)
		}
		if last := ve.Fields[len(ve.Fields)-1]; last.Field != "" || !strings.Contains(last.Message, "199900 more") {
			t.Errorf("last field: got %+v, want one counting the 199,900 problems left out", last)
		}
	})
	// The same problem at one place, repeated by the branches of an anyOf, is said once.
	s, err = CompileSchema(json.RawMessage(`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"string","minLength":1}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var ve *verr.Error
	if err := ValidateArguments(s, json.RawMessage(`{"a":1}`)); !errors.As(err, &ve) || len(ve.Fields) != 1 {
		t.Errorf("got %v, want one field", err)
	}
}

// A value that fails a pattern or a format is quoted at most maxLeafMessage characters
// long, and not at all when it may be a credential: the message reaches the audit log.
func TestPatternMessagesBounded(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{
		"code":{"type":"string","pattern":"^[a-z]+$"},
		"api_key":{"type":"string","pattern":"^sk-"},
		"mail":{"type":"string","format":"email"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("X", 100_000)
	err = ValidateArguments(s, json.RawMessage(`{"code":"`+long+`","api_key":"AKIAIOSFODNN7EXAMPLE-hunter2","mail":"`+long+`"}`))
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want field errors", err)
	}
	for _, f := range ve.Fields {
		if n := len([]rune(f.Message)); n > maxLeafMessage+1 {
			t.Errorf("%s: a message of %d characters", f.Field, n)
		}
		if strings.Contains(f.Message, "hunter2") {
			t.Errorf("%s: the credential is quoted: %q", f.Field, f.Message)
		}
	}
	if got := ve.For("/api_key"); !strings.Contains(got, "does not match pattern") {
		t.Errorf("/api_key: %q, want it to say what it does not match", got)
	}
}

// What validation says of a value the schema marks secret below the top level (an
// optional secret's anyOf with null, a nested object's property, one behind a $ref)
// quotes none of it.
func TestNestedSecretValuesNotQuoted(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","$defs":{"Pin":{"type":"string","writeOnly":true,"pattern":"^[0-9]+$"}},
		"properties":{
		"pin":{"anyOf":[{"type":"string","format":"password","pattern":"^[0-9]+$"},{"type":"null"}]},
		"conn":{"type":"object","properties":{"code":{"type":"string","writeOnly":true,"pattern":"^[0-9]+$"}}},
		"card":{"$ref":"#/$defs/Pin"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = ValidateArguments(s, json.RawMessage(`{"pin":"hunter2a","conn":{"code":"hunter2b"},"card":"hunter2c"}`))
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) < 3 {
		t.Fatalf("got %v, want a problem for each value", err)
	}
	for _, f := range ve.Fields {
		if strings.Contains(f.Message, "hunter2") {
			t.Errorf("%s: the secret is quoted: %q", f.Field, f.Message)
		}
	}
}

// A schema whose properties are reached through its root's $ref (or allOf) marks them
// secret there: no value of its arguments is quoted.
func TestRootRefSecretValuesNotQuoted(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(json.RawMessage(`{"type":"object","$ref":"#/$defs/A",
		"$defs":{"A":{"properties":{"pin":{"type":"string","writeOnly":true,"pattern":"^[0-9]+$"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = ValidateArguments(s, json.RawMessage(`{"pin":"hunter2"}`))
	mixed, err2 := CompileSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","writeOnly":true},"b":{}},
		"allOf":[{"properties":{"b":{"type":"string","format":"password","pattern":"^[0-9]+$"}}}]}`))
	if err2 != nil {
		t.Fatal(err2)
	}
	var mve *verr.Error
	if err := ValidateArguments(mixed, json.RawMessage(`{"a":"x","b":"hunter2"}`)); !errors.As(err, &mve) {
		t.Fatalf("got %v, want a problem", err)
	}
	for _, f := range mve.Fields {
		if strings.Contains(f.Message, "hunter2") {
			t.Errorf("%s (marked secret by the root's allOf, beside a marked property): %q", f.Field, f.Message)
		}
	}
	var ve *verr.Error
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		t.Fatalf("got %v, want a problem", err)
	}
	for _, f := range ve.Fields {
		if strings.Contains(f.Message, "hunter2") {
			t.Errorf("%s: the secret is quoted: %q", f.Field, f.Message)
		}
	}
}

// A property that refers to a secret one ($ref into properties, the root, or through a
// chain of definitions) is as secret: its value is quoted by no problem. One referring
// to a definition that marks nothing is still quoted.
func TestSecretThroughRefNotQuoted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, schema string }{
		{"ref to a property", `{"type":"object","properties":{"pw":{"type":"string","writeOnly":true,"pattern":"^[0-9]{6}$"},
			"other":{"$ref":"#/properties/pw"},"plain":{"$ref":"#/$defs/Word"}},"$defs":{"Word":{"type":"string","pattern":"^[a-z]+$"}}}`},
		{"chain of definitions", `{"type":"object","properties":{"pw":{"type":"string","format":"password"},
			"other":{"$ref":"#/$defs/A"},"plain":{"$ref":"#/$defs/Word"}},
			"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"allOf":[{"$ref":"#/properties/pw"}],"pattern":"^[0-9]{6}$"},"Word":{"type":"string","pattern":"^[a-z]+$"}}}`},
		{"escaped pointer", `{"type":"object","properties":{"p w":{"type":"string","writeOnly":true},
			"other":{"allOf":[{"$ref":"#/properties/p%20w"}],"pattern":"^[0-9]{6}$"},"plain":{"type":"string","pattern":"^[a-z]+$"}}}`},
		{"anchor", `{"type":"object","properties":{"pw":{"$anchor":"pw","type":"string","writeOnly":true},
			"other":{"$ref":"#pw","pattern":"^[0-9]{6}$"},"plain":{"type":"string","pattern":"^[a-z]+$"}}}`},
	} {
		s, err := CompileSchema(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = ValidateArguments(s, json.RawMessage(`{"other":"tiger-lily-77","plain":"PLAIN-9"}`))
		var ve *verr.Error
		if !errors.As(err, &ve) {
			t.Fatalf("%s: got %v, want problems", tc.name, err)
		}
		if got := ve.For("/other"); got == "" || strings.Contains(got, "tiger-lily") {
			t.Errorf("%s: /other: %q, want a problem that does not quote the value", tc.name, got)
		}
		if got := ve.For("/plain"); !strings.Contains(got, "PLAIN-9") {
			t.Errorf("%s: /plain: %q, want the value quoted (nothing marks it secret)", tc.name, got)
		}
	}
}
