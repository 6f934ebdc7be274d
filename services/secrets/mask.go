package secrets

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Masked is what a configured secret value becomes wherever it would be shown or
// stored: in a tool's result, an error, a progress message, a log line.
const Masked = "***"

// MinMasked is the shortest value a Masker hides: masking "1" or "prod" everywhere
// would garble every text without protecting anything worth a secret.
const MinMasked = 8

// Masker hides known secret values (a server's environment and headers, a tool's
// configured secret parameters) in text that leaves Toolwarden, as CI systems mask
// the secrets they know in their logs: an upstream server that echoes its API key
// back must not put it on a page, in an event or in the usage log. The zero value and
// nil mask nothing.
type Masker struct {
	values []string // longest first, so a value inside another is not masked first
	r      *strings.Replacer
	runes  map[rune]bool // every character of the values (see mayHold)
}

// NewMasker masks values, each also as a URL or base64 encodes it (a secret sent in a
// query or a Basic header comes back that way in an echoed URL or error), and for an
// Authorization value ("Bearer <token>", "Basic <base64>", "Token <token>", any case)
// the credential alone too; values shorter than MinMasked are left alone.
func NewMasker(values ...string) *Masker {
	m := &Masker{}
	for _, v := range values {
		v = strings.TrimSpace(v)
		m.addForms(v)
		if scheme, cred, ok := strings.Cut(v, " "); ok && authSchemes[strings.ToLower(scheme)] {
			cred = strings.TrimSpace(cred)
			m.addForms(cred)
			// A Basic credential is "user:password" in base64: a server echoing who signed in
			// ("bad password for alice:hunter2…") shows it decoded, the password alone too.
			if strings.EqualFold(scheme, "basic") {
				if dec, err := base64.StdEncoding.DecodeString(cred); err == nil && utf8.Valid(dec) {
					m.addForms(string(dec))
					if _, pass, ok := strings.Cut(string(dec), ":"); ok {
						m.addForms(pass)
					}
				}
			}
		}
	}
	if len(m.values) == 0 {
		return m
	}
	slices.SortFunc(m.values, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	m.values = slices.Compact(m.values)
	m.runes = map[rune]bool{}
	for _, v := range m.values {
		for _, r := range v {
			m.runes[r] = true
		}
	}
	pairs := make([]string, 0, 2*len(m.values))
	for _, v := range m.values {
		pairs = append(pairs, v, Masked)
	}
	m.r = strings.NewReplacer(pairs...)
	return m
}

// authSchemes are the Authorization schemes whose credential is masked on its own too.
var authSchemes = map[string]bool{"bearer": true, "basic": true, "token": true}

// addForms adds v and the forms encoding gives it; an encoding that leaves v as it is
// adds nothing new (Compact drops the repeat).
func (m *Masker) addForms(v string) {
	if len(v) < MinMasked {
		return
	}
	m.values = append(m.values, v, url.QueryEscape(v), url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
}

// NewJSONMasker masks the strings and numbers inside JSON values (a tool's configured
// secret parameters are JSON); a value that is not JSON is masked as text.
func NewJSONMasker(raws ...json.RawMessage) *Masker {
	var vals []string
	for _, raw := range raws {
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // a numeric secret (an account number, a PIN code) is masked as its digits
		if d.Decode(&v) != nil {
			vals = append(vals, string(raw))
			continue
		}
		walkStrings(v, func(s string) string { vals = append(vals, s); return s })
	}
	return NewMasker(vals...)
}

// Empty reports whether m masks nothing.
func (m *Masker) Empty() bool { return m == nil || m.r == nil }

// String masks s.
func (m *Masker) String(s string) string {
	if m.Empty() {
		return s
	}
	return m.r.Replace(s)
}

// Maskers mask with each of several maskers in turn: a call's server and tool, or the
// sessions before and after a request that a Refresh may have replaced in between.
type Maskers []*Masker

// Empty reports whether ms masks nothing.
func (ms Maskers) Empty() bool {
	for _, m := range ms {
		if !m.Empty() {
			return false
		}
	}
	return true
}

// String masks s with each masker.
func (ms Maskers) String(s string) string {
	for _, m := range ms {
		s = m.String(s)
	}
	return s
}

// JSON masks raw with each masker.
func (ms Maskers) JSON(raw json.RawMessage) json.RawMessage {
	for _, m := range ms {
		raw = m.JSON(raw)
	}
	return raw
}

// MaskUTF8 is b masked by mask when b is UTF-8 text (a configuration file or a log sent
// as a blob), b itself when it is not (an image: no secret can be told apart in its
// bytes, and masking would corrupt it) or when mask changed nothing.
func MaskUTF8(b []byte, mask func(string) string) []byte {
	if len(b) == 0 || !utf8.Valid(b) {
		return b
	}
	s := string(b)
	if out := mask(s); out != s {
		return []byte(out)
	}
	return b
}

// Contains reports whether s holds a value m masks.
func (m *Masker) Contains(s string) bool {
	if m.Empty() {
		return false
	}
	for _, v := range m.values {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// JSON masks the strings (values and keys) of the JSON document raw; raw comes back
// unchanged when nothing in it is a secret, re-encoded otherwise.
func (m *Masker) JSON(raw json.RawMessage) json.RawMessage {
	if m.Empty() || len(raw) == 0 || !m.mayHold(raw) {
		return raw
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return json.RawMessage(m.String(string(raw)))
	}
	changed := false
	v = walkStrings(v, func(s string) string {
		if out := m.String(s); out != s {
			changed = true
			return out
		}
		return s
	})
	if !changed {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(m.String(string(raw)))
	}
	return out
}

// mayHold is a quick look for a value in raw, as written or JSON-escaped: a value
// verbatim, or an escape sequence that spells a character some value has (Go escapes
// <, > and & as \u003c..., so an escape alone is no reason to decode).
func (m *Masker) mayHold(raw []byte) bool {
	for _, v := range m.values {
		if bytes.Contains(raw, []byte(v)) {
			return true
		}
		if esc, _ := json.Marshal(v); bytes.Contains(raw, esc[1:len(esc)-1]) {
			return true
		}
	}
	for i := bytes.IndexByte(raw, '\\'); i >= 0 && i+1 < len(raw); {
		switch raw[i+1] {
		case 'u':
			if i+6 <= len(raw) {
				if n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 32); err == nil && m.runes[rune(n)] {
					return true
				}
			}
		default:
			if r, ok := jsonEscapes[raw[i+1]]; ok && m.runes[r] {
				return true
			}
		}
		next := bytes.IndexByte(raw[i+2:], '\\')
		if next < 0 {
			break
		}
		i += 2 + next
	}
	return false
}

// jsonEscapes are JSON's one-letter escapes and the characters they stand for.
var jsonEscapes = map[byte]rune{'/': '/', '"': '"', '\\': '\\', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// walkStrings applies f to every string of a decoded JSON value (object keys too), and
// to the text of every number decoded as json.Number: a number f changes becomes the
// string f returns (a secret echoed as a number comes back "***").
func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case json.Number:
		if out := f(string(x)); out != string(x) {
			return out
		}
	case []any:
		for i := range x {
			x[i] = walkStrings(x[i], f)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[f(k)] = walkStrings(y, f)
		}
		return out
	}
	return v
}
