package template

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Text is a string of a template with its placeholders: literal parts and {param}
// references, in order. "{{" is a literal "{"; a "{" not followed by a name and "}" is
// literal too, so JSON and shell syntax rarely need escaping.
type Text struct {
	Parts []Part
	Line  int // where the string starts in the YAML, for messages
}

// Part is a literal (Param "") or a placeholder (Param set, Lit "").
type Part struct {
	Lit   string
	Param string
	Line  int // the placeholder's own line, for messages
}

// parseText splits s into literals and placeholders. line is the line s starts on;
// block scalars (literal or folded) start on the line after their indicator, which
// block says.
func parseText(s string, line int, block bool) Text {
	t := Text{Line: line}
	first := line
	if block {
		first++
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.Parts = append(t.Parts, Part{Lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '{' {
			lit.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			lit.WriteByte('{')
			i++
			continue
		}
		end := placeholderEnd(s, i)
		if end < 0 {
			lit.WriteByte(c)
			continue
		}
		flush()
		t.Parts = append(t.Parts, Part{Param: s[i+1 : end], Line: first + strings.Count(s[:i], "\n")})
		i = end
	}
	flush()
	return t
}

// placeholderEnd returns the index of the "}" closing a placeholder that starts at
// s[i] == '{', or -1 when s[i:] does not start one. A name is a letter or '_', then
// letters, digits, '_' and '-'.
func placeholderEnd(s string, i int) int {
	j := i + 1
	for ; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '}':
			if j == i+1 {
				return -1
			}
			return j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case (c >= '0' && c <= '9' || c == '-') && j > i+1:
		default:
			return -1
		}
	}
	return -1
}

// Literal reports whether t has no placeholders.
func (t Text) Literal() bool {
	for _, p := range t.Parts {
		if p.Param != "" {
			return false
		}
	}
	return true
}

// Whole returns the parameter when t is exactly one placeholder and nothing else.
func (t Text) Whole() (string, bool) {
	if len(t.Parts) == 1 && t.Parts[0].Param != "" {
		return t.Parts[0].Param, true
	}
	return "", false
}

// Filled is t with every placeholder written as fill ("" leaves the literal text alone).
func (t Text) Filled(fill string) string {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Param != "" {
			b.WriteString(fill)
		} else {
			b.WriteString(p.Lit)
		}
	}
	return b.String()
}

// String is t as written in the template, with "{" of literals escaped again.
func (t Text) String() string {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Param != "" {
			b.WriteString("{" + p.Param + "}")
			continue
		}
		b.WriteString(strings.ReplaceAll(p.Lit, "{", "{{"))
	}
	return b.String()
}

// expand substitutes each placeholder with esc(text of its argument). Literals are
// kept as they are.
func (t Text) expand(a args, esc func(param, v string) (string, error)) (string, error) {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Param == "" {
			b.WriteString(p.Lit)
			continue
		}
		v := a.text(p.Param)
		if esc != nil {
			var err error
			if v, err = esc(p.Param, v); err != nil {
				return "", err
			}
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// args are a call's arguments, with the input schema's defaults for those left out.
type args struct {
	values   map[string]any
	defaults map[string]any
}

// value is the argument for param: as given, else its default; ok is false when
// neither exists.
func (a args) value(param string) (any, bool) {
	if v, ok := a.values[param]; ok {
		return v, true
	}
	v, ok := a.defaults[param]
	return v, ok
}

// text is the argument for param as text: a string as it is, a number as written, a
// boolean as true or false, null or absent as "", an object or array as compact JSON.
func (a args) text(param string) string {
	v, _ := a.value(param)
	return textOf(v)
}

func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// refusal is an argument a template refuses to use where it would land: the call
// fails with it, and nothing runs.
type refusal struct {
	param, msg string
	where      string // after the argument's name: what else the refusal is about
}

func (r *refusal) Error() string { return fmt.Sprintf("argument %q%s %s", r.param, r.where, r.msg) }

func refuse(param, format string, a ...any) error {
	return &refusal{param: param, msg: fmt.Sprintf(format, a...)}
}
