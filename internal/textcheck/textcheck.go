// Package textcheck finds input that is not text: a NUL byte, bytes that are not
// UTF-8, or (in JSON) a lone UTF-16 surrogate escape. PostgreSQL stores none of these in
// text (and jsonb no lone surrogate), so such input is refused at the edge as bad
// input naming its field (issue #17, finding 8), instead of failing in the database.
package textcheck

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What is wrong with a piece of text.
const (
	WhyNUL       = "contains a NUL byte (\\u0000), which is not allowed in text"
	WhyNotUTF8   = "is not valid UTF-8 text"
	WhySurrogate = "contains a lone UTF-16 surrogate (\\ud800–\\udfff), which is not a character"
)

// Bad says what is wrong with s as text, or "".
func Bad(s string) string {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return WhyNUL
	case !utf8.ValidString(s):
		return WhyNotUTF8
	}
	return ""
}

// maxScanDepth bounds the nesting jsonBadText follows; deeper documents are the
// handler's to refuse (encoding/json stops at 10,000 too).
const maxScanDepth = 10_000

// JSON finds the first string of the JSON document raw, object keys included,
// that holds a NUL (\u0000), bytes that are not UTF-8, or a lone surrogate escape. It
// returns that string's JSON pointer and what is wrong; found is false when there is
// none, or when raw is not JSON at all (the handler says what is wrong with that).
func JSON(raw []byte) (ptr, why string, found bool) {
	if utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`)) {
		return "", "", false // the common case: nothing to look at closely
	}
	s := &jsonScan{b: raw}
	s.ws()
	ok := s.value(0)
	if s.why == "" || !ok && !s.found {
		return "", "", false
	}
	return s.pointer(), s.why, true
}

// jsonScan is a small recursive-descent reader of JSON that keeps the path to where it is.
type jsonScan struct {
	b     []byte
	i     int
	path  []string
	why   string
	found bool
}

func (s *jsonScan) pointer() string {
	var sb strings.Builder
	for _, p := range s.path {
		sb.WriteByte('/')
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
		sb.WriteString(strings.ToValidUTF8(strings.ReplaceAll(p, "\x00", ""), "\uFFFD"))
	}
	return sb.String()
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads one value; false stops the scan (a bad string found, or not JSON).
func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxScanDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, ok := s.str()
		return ok
	default:
		// A number, true, false or null: skip to the next delimiter.
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
			s.i++
		}
		return s.i > start
	}
}

func (s *jsonScan) object(depth int) bool {
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key, ok := s.str()
		if !ok {
			if s.found {
				s.path = append(s.path, key)
				s.why = "its name " + s.why
			}
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		s.path = append(s.path, key)
		if !s.value(depth + 1) {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *jsonScan) array(depth int) bool {
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for n := 0; ; n++ {
		s.ws()
		s.path = append(s.path, strconv.Itoa(n))
		if !s.value(depth + 1) {
			return false
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string at s.i and returns it as far as it was read; false when it is
// bad (s.found, s.why) or not a JSON string.
func (s *jsonScan) str() (string, bool) {
	s.i++ // opening quote
	var out []byte
	bad := func(why string) (string, bool) {
		s.why, s.found = why, true
		return string(out), false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return "", false
			}
			if s.b[s.i+1] != 'u' {
				out = append(out, s.b[s.i+1])
				s.i += 2
				continue
			}
			r, ok := hex4(s.b, s.i+2)
			if !ok {
				return "", false
			}
			s.i += 6
			switch {
			case r == 0:
				return bad(WhyNUL)
			case r >= 0xDC00 && r <= 0xDFFF:
				return bad(WhySurrogate)
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := rune(0), false
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					lo, ok = hex4(s.b, s.i+2)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return bad(WhySurrogate)
				}
				s.i += 6
				out = utf8.AppendRune(out, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
			default:
				out = utf8.AppendRune(out, r)
			}
		case c < 0x20:
			return "", false // a raw control character: not JSON
		case c < utf8.RuneSelf:
			out = append(out, c)
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return bad(WhyNotUTF8)
			}
			out = append(out, s.b[s.i:s.i+size]...)
			s.i += size
		}
	}
	return "", false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// Clip is s cut to at most n bytes at a character's start, with mark added when it was
// cut: for text a peer chose the length of (an upstream server's error or progress
// message) before it is stored or shown.
func Clip(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}
