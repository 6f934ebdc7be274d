package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// value reads the value of key; types are what the tool's schema accepts for it.
func (p *parser) value(key string, types []string) (json.RawMessage, error) {
	if p.eof() || strings.ContainsRune("\r\n;", rune(p.src[p.pos])) {
		return nil, p.fail(p.pos, p.pos, fmt.Sprintf("The argument %s has no value; write %s=\"\" for an empty string.", key, key))
	}
	at := p.pos
	switch c := p.src[p.pos]; {
	case c == '"' || c == '\'':
		s, err := p.quoted()
		if err != nil {
			return nil, err
		}
		if err := p.boundary(); err != nil {
			return nil, err
		}
		return jsonString(s), nil
	case (c == '{' || c == '[') && !onlyString(types):
		return p.json("the value of " + key)
	}
	word := p.bare()
	v, msg := typed(word, types)
	if msg != "" {
		return nil, p.fail(at, p.pos, fmt.Sprintf("The argument %s must be %s; got %s.", key, msg, quoteFragment(word)))
	}
	return v, nil
}

// json reads one JSON value, which must end where a value may end.
func (p *parser) json(what string) (json.RawMessage, error) {
	at := p.pos
	dec := json.NewDecoder(strings.NewReader(p.src[at:]))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		end := p.segmentEnd(at)
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, p.fail(at, end, fmt.Sprintf("%s is not valid JSON (%v at byte %d); write JSON, or quote a string.", upper(what), syn, at+int(syn.Offset)-1))
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return nil, p.fail(at, end, fmt.Sprintf("%s is JSON that is not closed; check its brackets and quotes.", upper(what)))
		}
		return nil, p.fail(at, end, fmt.Sprintf("%s is not valid JSON (%v).", upper(what), err))
	}
	p.pos = at + int(dec.InputOffset())
	if err := p.boundary(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, p.fail(at, p.pos, fmt.Sprintf("%s is not valid JSON (%v).", upper(what), err))
	}
	return buf.Bytes(), nil
}

// boundary checks that a quoted or JSON value is not followed directly by more text.
func (p *parser) boundary() error {
	if p.eof() || isSpace(p.src[p.pos]) || p.src[p.pos] == ';' || p.src[p.pos] == ',' {
		return nil
	}
	return p.notUnderstood(p.pos, "A value ends with its closing quote or bracket; put a space before the next argument.")
}

// quoted reads a single- or double-quoted string with backslash escapes.
func (p *parser) quoted() (string, error) {
	q := p.src[p.pos]
	open := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.src):
			p.pos += 2
			switch e := p.src[p.pos-1]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case '/', '\\', '"', '\'':
				b.WriteByte(e)
			case 'u':
				if r, n := p.unicodeEscape(); n > 0 {
					b.WriteRune(r)
					p.pos += n
				} else {
					b.WriteString(`\u`)
				}
			default:
				// Kept as written, so C:\dir means what it says.
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.fail(open, len(p.src), fmt.Sprintf("The quote at byte %d is not closed; end the value with %c.", open, q))
}

// unicodeEscape reads the XXXX of \uXXXX at pos (and a second \uXXXX completing a
// surrogate pair); n is the bytes read, 0 when they are not an escape.
func (p *parser) unicodeEscape() (rune, int) {
	hex4 := func(at int) (rune, bool) {
		if at+4 > len(p.src) {
			return 0, false
		}
		v, err := strconv.ParseUint(p.src[at:at+4], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex4(p.pos)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) && strings.HasPrefix(p.src[p.pos+4:], `\u`) {
		if r2, ok := hex4(p.pos + 6); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 10
			}
		}
	}
	return r, 4
}

// bare reads a word up to whitespace, ";" or a comma that ends it.
func (p *parser) bare() string {
	at := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if isSpace(c) || c == ';' || c == ',' && (p.pos+1 == len(p.src) || isSpace(p.src[p.pos+1])) {
			break
		}
		p.pos++
	}
	return p.src[at:p.pos]
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var (
	numberRE  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	integerRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// typed turns a bare word into the JSON value the schema types call for; msg says what
// was expected when the word is none of them.
func typed(word string, types []string) (v json.RawMessage, msg string) {
	if len(types) == 0 || onlyString(types) {
		return jsonString(word), ""
	}
	has := func(t string) bool { return slices.Contains(types, t) }
	switch {
	case has("null") && word == "null":
		return json.RawMessage("null"), ""
	case has("integer") && isInteger(word):
		return json.RawMessage(word), ""
	case has("number") && numberRE.MatchString(word):
		return json.RawMessage(word), ""
	case has("boolean") && (strings.EqualFold(word, "true") || strings.EqualFold(word, "false")):
		return json.RawMessage(strings.ToLower(word)), ""
	case has("string") || !slices.ContainsFunc(types, known):
		return jsonString(word), ""
	}
	var want []string
	for _, t := range []string{"integer", "number", "boolean", "array", "object", "null"} {
		if has(t) {
			want = append(want, expected[t])
		}
	}
	return nil, strings.Join(want, " or ")
}

var expected = map[string]string{
	"integer": "an integer",
	"number":  "a number",
	"boolean": "true or false",
	"array":   `a JSON array, such as ["a","b"]`,
	"object":  `a JSON object, such as {"key":"value"}`,
	"null":    "null",
}

func known(t string) bool { _, ok := expected[t]; return ok || t == "string" }

// isInteger reports whether word is a JSON number with no fractional part (JSON Schema
// counts 1.0 and 1e3 as integers).
func isInteger(word string) bool {
	if integerRE.MatchString(word) {
		return true
	}
	if !numberRE.MatchString(word) {
		return false
	}
	f, _, err := big.ParseFloat(word, 10, 64, big.ToNearestEven)
	return err == nil && f.IsInt()
}

// onlyString reports whether a schema accepts only strings for a key, so a bare word
// starting with a bracket (a pattern like [a-z]+) is not read as JSON.
func onlyString(types []string) bool {
	return len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return t != "string" })
}

// jsonString encodes s as a JSON string without HTML escaping, so <, > and & stay readable.
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// object builds a compact JSON object, keys in the order written.
type object struct {
	keys    []string
	members []json.RawMessage // `"key":value`
}

func (o *object) has(key string) bool { return slices.Contains(o.keys, key) }

func (o *object) add(key string, v json.RawMessage) bool {
	if o.has(key) {
		return false
	}
	o.keys = append(o.keys, key)
	o.members = append(o.members, member(key, v))
	return true
}

func (o *object) prepend(key string, v json.RawMessage) {
	o.keys = slices.Insert(o.keys, 0, key)
	o.members = slices.Insert(o.members, 0, member(key, v))
}

func member(key string, v json.RawMessage) json.RawMessage {
	return append(append(jsonString(key), ':'), v...)
}

// fromJSON reads the members of a compact JSON object, keeping their order and text.
func (o *object) fromJSON(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if !o.add(key, v) {
			return fmt.Errorf("the key %q is given twice", key)
		}
	}
	return nil
}

func (o *object) json() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte('}')
	return b.Bytes()
}
