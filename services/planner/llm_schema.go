package planner

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// Bounds on a tool's input schema as the model reads it: the schema is the upstream
// server's, free text in it is room for instructions to the model, so only what says
// which arguments to give and of what shape is sent whole.
const (
	maxSchemaText   = 200  // a description or title, in bytes
	maxSchemaTexts  = 4096 // all of one tool's descriptions and titles, in bytes
	maxSchemaValue  = 200  // an enum value, const, default, pattern or format, encoded
	maxSchemaEnum   = 64   // values of one enum
	maxSchemaName   = 64   // a property name
	maxSchemaProps  = 128  // properties of one object
	maxSchemaDepth  = 8    // nested schemas; deeper ones are sent as {}
	maxSchemaOutput = 32 << 10
)

// Keywords kept: a subschema, a map or list of them, or a value bounded by maxSchemaValue.
// Any other ("examples", "$comment", "x-…") is dropped, and so is a value that holds a
// credential (secretValue).
var (
	schemaOne   = []string{"items", "additionalProperties", "not", "contains", "propertyNames", "additionalItems", "if", "then", "else"}
	schemaList  = []string{"anyOf", "oneOf", "allOf", "prefixItems", "items"}
	schemaMap   = []string{"properties", "patternProperties", "$defs", "definitions"}
	schemaValue = []string{"type", "enum", "const", "default", "format", "pattern", "$ref", "minimum", "maximum",
		"exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems",
		"uniqueItems", "minProperties", "maxProperties", "nullable", "readOnly", "writeOnly", "deprecated"}
)

// clipSchema is schema with its free text bounded (see the constants above); a schema
// within them is returned as is, and one that is not a JSON object too (parameters
// deals with it).
func clipSchema(schema json.RawMessage) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	var root map[string]any
	if d.Decode(&root) != nil || root == nil {
		return schema
	}
	c := &schemaClipper{}
	out := c.schema(root, "", 0).(map[string]any)
	c.budget(out)
	if !c.changed {
		return schema
	}
	data, err := json.Marshal(out)
	if err != nil || len(data) > maxSchemaOutput {
		data, _ = json.Marshal(bareSchema(out))
	}
	return data
}

type schemaClipper struct{ changed bool }

// schema is v, a subschema at depth of the property prop ("" for none), with only the
// kept keywords, each bounded.
func (c *schemaClipper) schema(v any, prop string, depth int) any {
	m, ok := v.(map[string]any)
	if !ok {
		if _, b := v.(bool); !b {
			c.changed = true
			return map[string]any{}
		}
		return v
	}
	if depth >= maxSchemaDepth {
		c.changed = true
		return map[string]any{}
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		switch {
		case k == "description" || k == "title":
			s, ok := val.(string)
			if !ok {
				c.changed = true
				continue
			}
			if out[k] = textcheck.Clip(s, maxSchemaText, "…"); len(s) > maxSchemaText {
				c.changed = true
			}
		case k == "required":
			out[k] = c.required(val)
		case slices.Contains(schemaMap, k):
			sub, ok := val.(map[string]any)
			if !ok {
				c.changed = true
				continue
			}
			kept := map[string]any{}
			for _, name := range sortedKeys(sub) {
				if len(name) > maxSchemaName || len(kept) == maxSchemaProps {
					c.changed = true
					continue
				}
				under := "" // a $defs or patternProperties entry names no property
				if k == "properties" {
					under = name
				}
				kept[name] = c.schema(sub[name], under, depth+1)
			}
			out[k] = kept
		case slices.Contains(schemaList, k):
			if l, ok := val.([]any); ok {
				if len(l) > maxSchemaProps {
					l, c.changed = l[:maxSchemaProps], true
				}
				kept := make([]any, len(l))
				for i, s := range l {
					kept[i] = c.schema(s, prop, depth+1)
				}
				out[k] = kept
			} else if slices.Contains(schemaOne, k) {
				out[k] = c.schema(val, prop, depth+1)
			} else {
				c.changed = true
			}
		case slices.Contains(schemaOne, k):
			out[k] = c.schema(val, prop, depth+1)
		case k == "enum":
			l, ok := val.([]any)
			if !ok {
				c.changed = true
				continue
			}
			kept := []any{}
			for _, e := range l {
				if len(kept) == maxSchemaEnum || !small(e) || secrets.HoldsSecret(e) {
					c.changed = true
					continue
				}
				kept = append(kept, e)
			}
			if len(kept) == 0 && len(l) > 0 {
				continue // an empty enum would tell the model no value is valid
			}
			out[k] = kept
		case slices.Contains(schemaValue, k):
			if !small(val) || (k == "default" || k == "const") && secretValue(val, prop) {
				c.changed = true
				continue
			}
			out[k] = val
		default:
			c.changed = true
		}
	}
	return out
}

// required keeps the names a property may have.
func (c *schemaClipper) required(v any) any {
	l, ok := v.([]any)
	if !ok {
		c.changed = true
		return []any{}
	}
	kept := []any{}
	for _, n := range l {
		if s, ok := n.(string); ok && len(s) <= maxSchemaName && len(kept) < maxSchemaProps {
			kept = append(kept, s)
		} else {
			c.changed = true
		}
	}
	return kept
}

// budget drops the descriptions and titles past the tool's maxSchemaTexts, breadth first
// (the tool's own, then its parameters', the required ones first, in name order), so
// the ones the model most needs to fill the arguments stay.
func (c *schemaClipper) budget(root map[string]any) {
	left := maxSchemaTexts
	queue := []map[string]any{root}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, k := range []string{"title", "description"} {
			s, ok := m[k].(string)
			if !ok {
				continue
			}
			if len(s) > left {
				delete(m, k)
				c.changed, left = true, 0
				continue
			}
			left -= len(s)
		}
		for _, k := range sortedKeys(m) {
			switch sub := m[k].(type) {
			case map[string]any:
				if slices.Contains(schemaMap, k) {
					names := sortedKeys(sub)
					if k == "properties" {
						names = requiredFirst(names, m["required"])
					}
					for _, name := range names {
						if s, ok := sub[name].(map[string]any); ok {
							queue = append(queue, s)
						}
					}
				} else if slices.Contains(schemaOne, k) {
					queue = append(queue, sub)
				}
			case []any:
				if slices.Contains(schemaList, k) {
					for _, s := range sub {
						if s, ok := s.(map[string]any); ok {
							queue = append(queue, s)
						}
					}
				}
			}
		}
	}
}

// bareSchema is an object schema of root's own properties and their types only: what is sent
// when even the bounded schema is too long.
func bareSchema(root map[string]any) map[string]any {
	props := map[string]any{}
	if p, ok := root["properties"].(map[string]any); ok {
		for name, s := range p {
			t := map[string]any{}
			if s, ok := s.(map[string]any); ok && s["type"] != nil {
				t["type"] = s["type"]
			}
			props[name] = t
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if r, ok := root["required"]; ok {
		out["required"] = r
	}
	return out
}

// secretValue reports a default or const of the property name that holds a credential:
// one shaped like it anywhere in the value (secrets.HoldsSecret), or a string or number
// under a name that always holds one (secrets.LooksSecretField: password, api_key…).
// The schema is the upstream server's or a template's, and the model's provider is no
// place for a credential written into it.
func secretValue(v any, name string) bool {
	if secrets.HoldsSecret(v) {
		return true
	}
	switch x := v.(type) {
	case string:
		return x != "" && name != "" && secrets.LooksSecretField(name)
	case json.Number:
		return name != "" && secrets.LooksSecretField(name)
	}
	return false
}

// small says whether v encodes in at most maxSchemaValue bytes.
func small(v any) bool {
	data, err := json.Marshal(v)
	return err == nil && len(data) <= maxSchemaValue
}

// requiredFirst is names with those required moved to the front, each part in order.
func requiredFirst(names []string, required any) []string {
	r, _ := required.([]any)
	out := make([]string, 0, len(names))
	for _, n := range names {
		if slices.Contains(r, any(n)) {
			out = append(out, n)
		}
	}
	for _, n := range names {
		if !slices.Contains(r, any(n)) {
			out = append(out, n)
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
