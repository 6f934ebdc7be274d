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

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the package's JSON and schema walker. It is exported for code
// that presents schemas outside this package (the test panel's form in
// views/form): Decode reads a document keeping the order of object keys,
// Resolve gives the View of a schema at a JSON pointer through $ref and allOf
// wrappers, and View and Object read keywords. It knows nothing of forms.

// Object is a decoded JSON object that remembers the order of its keys, so that
// documentation lists parameters in the order the tool's author wrote them.
// A nil *Object reads as an empty object.
type Object struct {
	keys []string
	m    map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{m: map[string]any{}} }

// Keys lists the object's keys in document order.
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	return o.keys
}

// Set stores v under k; a new key goes last.
func (o *Object) Set(k string, v any) {
	if _, ok := o.m[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.m[k] = v
}

// Get returns the value under k.
func (o *Object) Get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.m[k]
	return v, ok
}

// Has reports whether the object has the key k.
func (o *Object) Has(k string) bool {
	_, ok := o.Get(k)
	return ok
}

// Str returns the string under k, or "".
func (o *Object) Str(k string) string {
	v, _ := o.Get(k)
	s, _ := v.(string)
	return s
}

// Object returns the object under k, or nil.
func (o *Object) Object(k string) *Object {
	v, _ := o.Get(k)
	c, _ := v.(*Object)
	return c
}

// Array returns the array under k, or nil.
func (o *Object) Array(k string) []any {
	v, _ := o.Get(k)
	a, _ := v.([]any)
	return a
}

// Num returns the number under k as float64.
func (o *Object) Num(k string) (float64, bool) {
	v, ok := o.Get(k)
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

// Decode parses one JSON value into *Object, []any, string, json.Number, bool
// or nil. Trailing data is an error, as it is for jsonschema.UnmarshalJSON. A key
// given twice keeps its first place and its last value, and invalid UTF-8 reads as
// U+FFFD, as encoding/json reads them; jsontext reads tokens without boxing each one,
// which made decoding most of a discovery's validation time.
func Decode(raw []byte) (any, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// decodeError drops the package prefix jsontext puts on its errors (a finding
// quotes the message to a person); input that ends too early is io.EOF (nothing at
// all) or io.ErrUnexpectedEOF, which callers test for.
func decodeError(err error) error {
	switch {
	case err == io.EOF:
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF
	}
	return errors.New(strings.TrimPrefix(err.Error(), "jsontext: "))
}

// maxDepth bounds recursion over documents that come from untrusted servers.
const maxDepth = 64

func decodeValue(dec *jsontext.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		o := &Object{m: map[string]any{}}
		for dec.PeekKind() != '}' {
			kt, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := kt.String()
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.m[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.m[k] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return o, nil
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	default: // 'n'
		return nil, nil
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
	case *Object:
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
	case *Object:
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

// PtrJoin appends tokens to a JSON pointer, escaping them.
func PtrJoin(ptr string, tokens ...string) string {
	var b strings.Builder
	b.WriteString(ptr)
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(ptrEscape(t))
	}
	return b.String()
}

// Lookup follows a JSON pointer (RFC 6901, as used in a $ref fragment) from root,
// a document as Decode gives it or as encoding/json does (map[string]any).
func Lookup(root any, ptr string) (any, bool) {
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
		case *Object:
			v, ok := c.Get(tok)
			if !ok {
				return nil, false
			}
			cur = v
		case map[string]any:
			v, ok := c[tok]
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
func localRef(root any, ref string) (*Object, string, bool) {
	base, frag, ok := strings.Cut(ref, "#")
	if !ok {
		return nil, "", false
	}
	if base != "" {
		r, _ := root.(*Object)
		if id := r.Str("$id"); id == "" || strings.TrimSuffix(id, "#") != base {
			return nil, "", false
		}
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	v, ok := Lookup(root, frag)
	if !ok {
		return nil, "", false
	}
	o, ok := v.(*Object)
	return o, frag, ok
}

// Layer is one schema object contributing to a View, with its JSON pointer
// in the document.
type Layer struct {
	Schema *Object
	Ptr    string
}

// View reads keywords from a schema and then from what it references: a
// property {"$ref": "#/$defs/Opts", "description": "..."} has its own
// description but the referenced type and properties.
type View []Layer

// Resolve builds the view of the schema s found at ptr in the document root
// (as Decode returns it). It follows local $ref chains and single-element
// allOf wrappers (pydantic emits those) a few levels; the last layer is the
// schema that was reached.
func Resolve(root any, s *Object, ptr string) View {
	v := View{{s, ptr}}
	seen := map[string]bool{ptr: true}
	for i := 0; i < 8; i++ {
		cur := v[len(v)-1].Schema
		next, nptr := (*Object)(nil), ""
		if ref := cur.Str("$ref"); ref != "" {
			next, nptr, _ = localRef(root, ref)
		} else if all := cur.Array("allOf"); len(all) == 1 && !cur.Has("type") && !cur.Has("properties") {
			next, _ = all[0].(*Object)
			nptr = PtrJoin(v[len(v)-1].Ptr, "allOf", "0")
		}
		if next == nil || seen[nptr] {
			break
		}
		seen[nptr] = true
		v = append(v, Layer{next, nptr})
	}
	return v
}

// Get returns the keyword k from the first layer that has it, with that
// layer's pointer.
func (v View) Get(k string) (any, string, bool) {
	for _, l := range v {
		if x, ok := l.Schema.Get(k); ok {
			return x, l.Ptr, true
		}
	}
	return nil, "", false
}

// Has reports whether a layer has the keyword k.
func (v View) Has(k string) bool {
	_, _, ok := v.Get(k)
	return ok
}

// Str returns the keyword k as a string, or "".
func (v View) Str(k string) string {
	x, _, _ := v.Get(k)
	s, _ := x.(string)
	return s
}

// Object returns the keyword k as an object, or nil, with its layer's pointer.
func (v View) Object(k string) (*Object, string) {
	x, p, _ := v.Get(k)
	o, _ := x.(*Object)
	return o, p
}

// Array returns the keyword k as an array, or nil.
func (v View) Array(k string) []any {
	x, _, _ := v.Get(k)
	a, _ := x.([]any)
	return a
}

// Num returns the numeric keyword k as float64.
func (v View) Num(k string) (float64, bool) {
	for _, l := range v {
		if l.Schema.Has(k) {
			return l.Schema.Num(k)
		}
	}
	return 0, false
}

// Integer returns the keyword k as an int from 0 to MaxInt32.
func (v View) Integer(k string) (int, bool) {
	f, ok := v.Num(k)
	if !ok || f < 0 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// Types lists the "type" keyword as strings, whether it is one name or an array.
func (v View) Types() []string {
	x, _, _ := v.Get("type")
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
	case *Object:
		return "object"
	}
	return "any"
}
