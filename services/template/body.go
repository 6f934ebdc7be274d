package template

import (
	"bytes"
	"encoding/json"

	"go.yaml.in/yaml/v3"
)

// jsonValue is a JSON body with placeholders. A string that is exactly one placeholder
// becomes the argument's JSON value (a number stays a number, an object an object;
// absent and without a default, null); a placeholder inside a longer string adds the
// argument's text to that string. Either way the value is JSON-encoded, so no argument
// can end a string or add a key.
type jsonValue struct {
	object []jsonMember
	array  []*jsonValue
	str    *Text
	lit    any // a literal number, boolean or null
	kind   byte
}

type jsonMember struct {
	key   string
	value *jsonValue
}

const (
	jsonLit byte = iota
	jsonObject
	jsonArray
	jsonString
)

// jsonTemplate reads a YAML mapping or list as a JSON body.
func (r *reader) jsonTemplate(n *yaml.Node, depth int) *jsonValue {
	n = r.resolve(n)
	r.budget--
	if r.budget < 0 || depth > 64 {
		if r.budget == -1 || depth == 65 {
			r.fail(n.Line, "body is nested too deeply or repeats aliases too often")
		}
		return nil
	}
	if name, ok := bracedName(n); ok {
		// body: {city: {city}} would send {"city": {"city": null}} whatever the argument.
		r.fail(n.Line, "write \"{%s}\" in quotes: unquoted, {%s} is a YAML mapping, not a placeholder (for a key with no value write %s: null)", name, name, name)
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		v := &jsonValue{kind: jsonObject, object: []jsonMember{}}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := r.resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				r.fail(k.Line, "a key of the body must be a plain name")
				return nil
			}
			kt := parseText(k.Value, k.Line, false)
			if !kt.Literal() {
				r.fail(k.Line, "body keys cannot have placeholders: a call must not choose the body's keys")
				return nil
			}
			// A key is sent as its text reads, "{{" as "{", as string values are.
			key := kt.Filled("")
			if seen[key] {
				r.fail(k.Line, "body key %q appears twice", key)
				return nil
			}
			seen[key] = true
			m := r.jsonTemplate(n.Content[i+1], depth+1)
			if m == nil {
				return nil
			}
			v.object = append(v.object, jsonMember{key: key, value: m})
		}
		return v
	case yaml.SequenceNode:
		v := &jsonValue{kind: jsonArray, array: []*jsonValue{}}
		for _, c := range n.Content {
			m := r.jsonTemplate(c, depth+1)
			if m == nil {
				return nil
			}
			v.array = append(v.array, m)
		}
		return v
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			t := parseText(n.Value, n.Line, n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0)
			return &jsonValue{kind: jsonString, str: &t}
		}
		lit, ok := r.jsonScalar(n)
		if !ok {
			return nil
		}
		return &jsonValue{kind: jsonLit, lit: lit}
	}
	r.fail(n.Line, "the body is not a value JSON can hold")
	return nil
}

// texts lists the strings of v, for the placeholder check.
func (v *jsonValue) texts() []Text {
	switch v.kind {
	case jsonString:
		return []Text{*v.str}
	case jsonObject:
		var out []Text
		for _, m := range v.object {
			out = append(out, m.value.texts()...)
		}
		return out
	case jsonArray:
		var out []Text
		for _, m := range v.array {
			out = append(out, m.texts()...)
		}
		return out
	}
	return nil
}

// Field is a named text of a request or command: a JSON body's string with the key
// it is under (a list's items under their list's key), a form field, or a text body
// or standard input (Name "").
type Field struct {
	Name  string
	Value Text
}

// BodyFields are the texts h sends in its body, each with its name.
func (h *HTTP) BodyFields() []Field {
	var out []Field
	if h.JSON != nil {
		h.JSON.fields("", &out)
	}
	for _, f := range h.Form {
		out = append(out, Field{Name: f.Name, Value: f.Value})
	}
	if h.Body != nil {
		out = append(out, Field{Value: *h.Body})
	}
	return out
}

func (v *jsonValue) fields(key string, out *[]Field) {
	switch v.kind {
	case jsonString:
		*out = append(*out, Field{Name: key, Value: *v.str})
	case jsonObject:
		for _, m := range v.object {
			m.value.fields(m.key, out)
		}
	case jsonArray:
		for _, m := range v.array {
			m.fields(key, out)
		}
	}
}

// encode writes v as JSON with the arguments in place, keys in the order written.
func (v *jsonValue) encode(buf *bytes.Buffer, a args) error {
	switch v.kind {
	case jsonObject:
		buf.WriteByte('{')
		for i, m := range v.object {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, m.key); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := m.value.encode(buf, a); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case jsonArray:
		buf.WriteByte('[')
		for i, m := range v.array {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := m.encode(buf, a); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case jsonString:
		if param, ok := v.str.Whole(); ok {
			val, _ := a.value(param)
			if err := writeJSON(buf, val); err != nil {
				return refuse(param, "cannot be written as JSON: %v", err)
			}
			return nil
		}
		s, err := v.str.expand(a, nil)
		if err != nil {
			return err
		}
		return writeJSON(buf, s)
	}
	return writeJSON(buf, v.lit)
}

// writeJSON appends one value, encoded; HTML characters are left as they are.
func writeJSON(buf *bytes.Buffer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Write(bytes.TrimRight(b.Bytes(), "\n"))
	return nil
}
