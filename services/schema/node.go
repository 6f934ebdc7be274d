package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// obj is a decoded JSON object that remembers the order of its keys, so that
// documentation lists parameters in the order the tool's author wrote them.
type obj struct {
	keys []string
	m    map[string]any
}

func (o *obj) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.m[k]
	return v, ok
}

func (o *obj) has(k string) bool {
	_, ok := o.get(k)
	return ok
}

func (o *obj) str(k string) string {
	v, _ := o.get(k)
	s, _ := v.(string)
	return s
}

func (o *obj) object(k string) *obj {
	v, _ := o.get(k)
	c, _ := v.(*obj)
	return c
}

func (o *obj) array(k string) []any {
	v, _ := o.get(k)
	a, _ := v.([]any)
	return a
}

// num returns a numeric keyword as float64.
func (o *obj) num(k string) (float64, bool) {
	v, ok := o.get(k)
	if !ok {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// decode parses one JSON value into *obj, []any, string, json.Number, bool or
// nil. Trailing data is an error, as it is for jsonschema.UnmarshalJSON.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// maxDepth bounds recursion over documents that come from untrusted servers.
const maxDepth = 64

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &obj{m: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.m[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// present reports whether raw holds a value: absent, empty and JSON null all
// mean "not given", because that is how a nullable JSONB column comes back.
func present(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// plain converts a decoded value into the types encoding/json produces, except
// that whole numbers become int64: callers print and compare these values.
func plain(v any) any {
	switch t := v.(type) {
	case *obj:
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			m[k] = plain(t.m[k])
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = plain(e)
		}
		return a
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

// schemaDoc converts a decoded value into the form jsonschema.UnmarshalJSON
// produces, so a schema decoded once can also be compiled.
func schemaDoc(v any) any {
	switch t := v.(type) {
	case *obj:
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			m[k] = schemaDoc(t.m[k])
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = schemaDoc(e)
		}
		return a
	}
	return v
}

// number makes the JSON value for a generated number: int64 when it is whole.
func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// ptrEscape escapes one JSON pointer token (RFC 6901).
func ptrEscape(s string) string {
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}

// ptrJoin appends tokens to a JSON pointer.
func ptrJoin(ptr string, tokens ...string) string {
	var b strings.Builder
	b.WriteString(ptr)
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(ptrEscape(t))
	}
	return b.String()
}

// lookup follows a JSON pointer (RFC 6901, as used in a $ref fragment) from root.
func lookup(root any, ptr string) (any, bool) {
	if ptr == "" {
		return root, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *obj:
			v, ok := c.get(tok)
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// localRef resolves a $ref that points inside the same document ("#",
// "#/$defs/Name", or the document's own $id followed by a fragment). It
// returns the target and its JSON pointer relative to the root.
func localRef(root any, ref string) (*obj, string, bool) {
	base, frag, ok := strings.Cut(ref, "#")
	if !ok {
		return nil, "", false
	}
	if base != "" {
		r, _ := root.(*obj)
		if id := r.str("$id"); id == "" || strings.TrimSuffix(id, "#") != base {
			return nil, "", false
		}
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	v, ok := lookup(root, frag)
	if !ok {
		return nil, "", false
	}
	o, ok := v.(*obj)
	return o, frag, ok
}

// layer is one schema object contributing to a view, with its JSON pointer.
type layer struct {
	o   *obj
	ptr string
}

// view reads keywords from a schema and then from what it references: a
// property {"$ref": "#/$defs/Opts", "description": "..."} has its own
// description but the referenced type and properties.
type view []layer

// resolve builds the view of the schema s found at ptr. It follows local $ref
// chains and single-element allOf wrappers (pydantic emits those) a few levels.
func resolve(root any, s *obj, ptr string) view {
	v := view{{s, ptr}}
	seen := map[string]bool{ptr: true}
	for i := 0; i < 8; i++ {
		cur := v[len(v)-1].o
		next, nptr := (*obj)(nil), ""
		if ref := cur.str("$ref"); ref != "" {
			next, nptr, _ = localRef(root, ref)
		} else if all := cur.array("allOf"); len(all) == 1 && !cur.has("type") && !cur.has("properties") {
			next, _ = all[0].(*obj)
			nptr = ptrJoin(v[len(v)-1].ptr, "allOf", "0")
		}
		if next == nil || seen[nptr] {
			break
		}
		seen[nptr] = true
		v = append(v, layer{next, nptr})
	}
	return v
}

func (v view) get(k string) (any, string, bool) {
	for _, l := range v {
		if x, ok := l.o.get(k); ok {
			return x, l.ptr, true
		}
	}
	return nil, "", false
}

func (v view) has(k string) bool {
	_, _, ok := v.get(k)
	return ok
}

func (v view) str(k string) string {
	x, _, _ := v.get(k)
	s, _ := x.(string)
	return s
}

func (v view) object(k string) (*obj, string) {
	x, p, _ := v.get(k)
	o, _ := x.(*obj)
	return o, p
}

func (v view) array(k string) []any {
	x, _, _ := v.get(k)
	a, _ := x.([]any)
	return a
}

func (v view) num(k string) (float64, bool) {
	for _, l := range v {
		if l.o.has(k) {
			return l.o.num(k)
		}
	}
	return 0, false
}

func (v view) integer(k string) (int, bool) {
	f, ok := v.num(k)
	if !ok || f < 0 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// types lists the "type" keyword as strings, whether it is one name or an array.
func (v view) types() []string {
	x, _, _ := v.get("type")
	switch t := x.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// jsonType names the JSON Schema type of a decoded value.
func jsonType(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case *obj:
		return "object"
	}
	return "any"
}
