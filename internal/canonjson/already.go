package canonjson

import "unicode/utf8"

// maxCanonicalDepth bounds IsCanonical's nesting; deeper text takes Canonical's path.
const maxCanonicalDepth = 200

// IsCanonical reports whether raw is already in canonical form: Canonical(raw) would
// return raw itself. It reads the bytes once and allocates nothing, so a caller can
// hash such text as it is instead of decoding and re-encoding it (JSON that Go's
// encoding/json wrote from maps, as an MCP client receives tool schemas, usually is).
// It is conservative: false means only "not sure", never "different" (keys with
// escapes, strings with escapes other than those Marshal writes, whitespace, more
// than one value: all false).
func IsCanonical(raw []byte) bool {
	end, ok := canonicalValue(raw, 0, 0)
	return ok && end == len(raw)
}

// canonicalValue checks the value at raw[i:] and returns where it ends.
func canonicalValue(raw []byte, i, depth int) (int, bool) {
	if i >= len(raw) || depth > maxCanonicalDepth {
		return 0, false
	}
	switch c := raw[i]; {
	case c == '{':
		i++
		if i < len(raw) && raw[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for first := true; ; first = false {
			start := i
			end, ok := canonicalString(raw, i, true)
			if !ok {
				return 0, false
			}
			key := raw[start+1 : end-1]
			// Marshal sorts keys by their bytes; equal keys would have been merged.
			if !first && string(prev) >= string(key) {
				return 0, false
			}
			prev = key
			if end >= len(raw) || raw[end] != ':' {
				return 0, false
			}
			if i, ok = canonicalValue(raw, end+1, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '[':
		i++
		if i < len(raw) && raw[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(raw, i, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '"':
		return canonicalString(raw, i, false)
	case c == '-' || c >= '0' && c <= '9':
		return canonicalNumber(raw, i)
	case c == 't':
		return literal(raw, i, "true")
	case c == 'f':
		return literal(raw, i, "false")
	case c == 'n':
		return literal(raw, i, "null")
	}
	return 0, false
}

func literal(raw []byte, i int, word string) (int, bool) {
	if len(raw)-i >= len(word) && string(raw[i:i+len(word)]) == word {
		return i + len(word), true
	}
	return 0, false
}

// canonicalString checks a string that Marshal would write byte for byte: valid UTF-8,
// no control characters, "<", ">", "&", U+2028 or U+2029 as themselves, and only the
// escapes Marshal writes (\" \\ \n \r \t \u003c \u003e \u0026 \u2028 \u2029). A key
// (key true) has no escapes at all, so that its bytes are the key's.
func canonicalString(raw []byte, i int, key bool) (int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return 0, false
	}
	i++
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if key || i+1 >= len(raw) {
				return 0, false
			}
			switch raw[i+1] {
			case '"', '\\', 'n', 'r', 't':
				i += 2
				continue
			case 'u':
				if len(raw)-i >= 6 {
					switch string(raw[i+2 : i+6]) {
					case "003c", "003e", "0026", "2028", "2029":
						i += 6
						continue
					}
				}
			}
			return 0, false
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 0, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0, false
			}
			i += size
		}
	}
	return 0, false
}

// canonicalNumber checks a JSON number; Marshal writes numbers as they were written.
func canonicalNumber(raw []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		return i
	}
	if raw[i] == '-' {
		i++
	}
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && raw[i] >= '1' && raw[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(raw) && raw[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}
