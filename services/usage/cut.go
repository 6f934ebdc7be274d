package usage

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/secrets"
)

// Cut and RedactCut are for a page that shows only the start of a large value (an
// execution step's result): it is cut to about limit bytes of content before it is
// masked, in the order a page shows it (keys sorted, as Redact encodes them), so that
// what is left out costs its decoding only.
const (
	// cutShort: a scalar of up to this many bytes is kept past limit (up to
	// limit+cutSlack), so that small fields (a content's type) survive a long text.
	cutShort = 256
	cutSlack = 4 << 10
)

// Cut is raw cut to about limit bytes of content (strings, keys and numbers, in the
// order of its keys sorted), and whether anything was left out. A raw of limit bytes or
// less, or one that is not JSON, is returned as it is.
func Cut(raw json.RawMessage, limit int) (json.RawMessage, bool) {
	if len(raw) <= limit {
		return raw, false
	}
	v, ok := decodeJSON(raw)
	if !ok {
		return raw, false
	}
	c := cutter{limit: limit}
	if v, _ = c.value(v); !c.cut {
		return raw, false
	}
	return encodeRedacted(v), true
}

// RedactCut is RedactChanged of raw cut as by Cut, masking all that is kept as
// RedactChanged would: a string cut that looks like a credential whole is masked whole,
// one holding JSON is cut as JSON (its keys still name what they hold), and prose is cut
// after a whole word, its words masked before (each is judged on its own, whatever
// follows it).
func RedactCut(raw json.RawMessage, limit int) (out json.RawMessage, changed, cut bool) {
	if len(raw) <= limit {
		out, changed = RedactChanged(raw)
		return out, changed, false
	}
	v, ok := decodeJSON(raw)
	if !ok {
		return json.RawMessage(`"(unreadable JSON withheld)"`), true, false
	}
	c := cutter{limit: limit, mask: true}
	v, _ = c.value(v)
	changed = c.changed
	v = redactValue(v, &changed)
	if !changed && !c.cut {
		return raw, false, false
	}
	return encodeRedacted(v), changed, c.cut
}

// Keys of a log's metadata that ForLog's caller (the router) sets: the size of the
// request's or the response's JSON before ForLog cut it, absent when it was not cut.
// Recent reads them back (Log.RequestTruncated, Log.Truncated, Log.ResponseBytes).
const (
	MetaRequestBytes  = "request_bytes"
	MetaResponseBytes = "response_bytes"
)

// maxLogBytes bounds what ForLog keeps however the JSON is shaped: empty arrays and
// objects count for no content, and escaping may make a string's JSON 6 times longer.
const maxLogBytes = 4 * MaxJSONBytes

// ForLog is a call's request or response JSON as its log row keeps it, and whether some
// was left out. JSON of up to MaxJSONBytes is returned as it is (Recent masks it when it
// is read). Larger JSON is cut to about MaxJSONBytes of content as RedactCut cuts it,
// and masked now: cut as text, it would no longer be JSON, and masked when read by its
// shape only, a value under a secret key name shown. A picture's or a sound's data that
// does not fit is left out, and a long word cut (RedactCut keeps them whole, for a page).
func ForLog(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) <= MaxJSONBytes {
		return raw, false
	}
	v, ok := decodeJSON(raw)
	if !ok {
		return json.RawMessage(`"(unreadable JSON withheld)"`), true
	}
	return forLog(v)
}

// ForLogValue is ForLog of JSON longer than MaxJSONBytes given as v, the value that
// decoding it with numbers as json.Number gives (maps, slices, strings, json.Number,
// bool, nil; see Decode), so that a result of megabytes is not encoded whole only to be
// decoded again. Its maps and slices are changed in place. Its length for the log's
// metadata is JSONLen's.
func ForLogValue(v any) (json.RawMessage, bool) { return forLog(v) }

// Decode is raw, one JSON value, decoded as ForLogValue takes it.
func Decode(raw []byte) (any, bool) { return decodeJSON(raw) }

// forLog is ForLog's cut of v, large JSON decoded.
func forLog(v any) (json.RawMessage, bool) {
	c := cutter{limit: MaxJSONBytes, mask: true, forLog: true}
	v, _ = c.value(v)
	changed := c.changed
	out := encodeRedacted(redactValue(v, &changed))
	if len(out) > maxLogBytes {
		// Thousands of empty values, say: the masked text's start, as a string.
		out, _ = Cap(out, MaxJSONBytes)
		return out, true
	}
	return out, c.cut
}

// JSONLen is the length of json.Marshal's encoding of v, a value as ForLogValue takes
// it, without encoding it. Its strings must be valid UTF-8 (as decoded JSON's are).
func JSONLen(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 2 + max(len(x)-1, 0) // braces, commas
		for k, val := range x {
			n += stringLen(k) + 1 + JSONLen(val)
		}
		return n
	case []any:
		n := 2 + max(len(x)-1, 0)
		for _, e := range x {
			n += JSONLen(e)
		}
		return n
	case string:
		return stringLen(x)
	case json.Number:
		return len(x)
	case bool:
		if x {
			return 4
		}
		return 5
	case nil:
		return 4
	}
	b, _ := json.Marshal(v)
	return len(b)
}

// stringLen is the length of s as json.Marshal writes it: quoted, with '<', '>' and
// '&' escaped for HTML as it does, s valid UTF-8.
func stringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1 {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// decodeJSON is raw, one JSON value, decoded (numbers as json.Number).
func decodeJSON(raw []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// cutter keeps a value's content until used reaches limit; mask makes the strings it
// cuts safe to mask in part (RedactCut); forLog bounds what is kept, for a log row
// (ForLog): a picture's data that does not fit is left out, and a long word the cut
// falls in is masked whole and then cut (a page keeps them whole).
type cutter struct {
	used, limit  int
	mask         bool
	forLog       bool
	cut, changed bool
}

// value is v cut; keep is false when none of it is kept.
func (c *cutter) value(v any) (_ any, keep bool) {
	switch x := v.(type) {
	case map[string]any:
		if c.used >= c.limit {
			c.cut = true
			return nil, false
		}
		// Keys masked before they are sorted and counted, so that what is kept is the
		// start of what a page shows (redactValue masks them as well, after).
		if c.mask && maskKeys(x) {
			c.changed = true
		}
		media := x["type"] == "image" || x["type"] == "audio"
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if media {
			// A picture's data last: its type and mimeType, which say how to show it, are
			// kept before its size is counted.
			keys = append(slices.DeleteFunc(keys, func(k string) bool { return k == "data" }), "data")
			if _, ok := x["data"]; !ok {
				keys = keys[:len(keys)-1]
			}
		}
		for _, k := range keys {
			val := x[k]
			c.used += len(k)
			switch s, isString := val.(string); {
			case c.mask && val != nil && secrets.LooksSecretName(k):
				x[k], c.changed = Mask, true // masked whole anyway: not walked
			case k == "type" && isString:
				// Whole or not at all: cut short, "image …" would read as a picture's type
				// when masked, and its data be kept unmasked.
				if len(s) <= max(c.limit-c.used, 0) || len(s) <= cutShort && c.used+len(s) <= c.limit+cutSlack {
					c.used += len(s)
				} else {
					delete(x, k)
					c.cut = true
				}
			case media && k == "data" && isString:
				// A picture is shown whole or not at all, and is not masked.
				if c.forLog && c.used+len(s) > c.limit {
					delete(x, k)
					c.cut = true
				} else {
					c.used += len(s)
				}
			default:
				if nv, ok := c.value(val); ok {
					x[k] = nv
				} else {
					delete(x, k)
				}
			}
		}
		return x, true
	case []any:
		if c.used >= c.limit {
			c.cut = true
			return nil, false
		}
		for i, e := range x {
			nv, ok := c.value(e)
			if !ok {
				return x[:i], true // the rest is past the limit too (bar a short scalar)
			}
			x[i] = nv
		}
		return x, true
	case string:
		room := c.limit - c.used
		if len(x) <= room || len(x) <= cutShort && c.used+len(x) <= c.limit+cutSlack {
			c.used += len(x)
			return x, true
		}
		c.cut = true
		if room <= 0 {
			return nil, false
		}
		s := c.cutString(x, room)
		c.used += len(s)
		return s, true
	default: // json.Number, bool, nil
		n := 4
		if num, ok := x.(json.Number); ok {
			n = len(num)
		}
		if c.used+n > c.limit+cutSlack {
			c.cut = true
			return nil, false
		}
		c.used += n
		return v, true
	}
}

// cutString is about room bytes of s (longer than room).
func (c *cutter) cutString(s string, room int) string {
	if !c.mask {
		i := room
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i]
	}
	// As redactValue judges a string: whole first.
	if secrets.LooksSecretValue(s) {
		c.changed = true
		return Mask
	}
	if t := strings.TrimSpace(s); len(t) >= 2 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		if v, ok := decodeJSON([]byte(t)); ok {
			in := cutter{limit: room, mask: true, forLog: c.forLog}
			v, _ = in.value(v)
			c.changed = c.changed || in.changed
			return string(encodeRedacted(v)) // still JSON: masked as such after
		}
	}
	i := room
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	w := redactWords(s[:i])
	if w != s[:i] {
		c.changed = true
	}
	if c.forLog && len(w) > room+cutShort {
		// A word of kilobytes (base64, a minified line): masked whole above, so what
		// is cut off it cannot leave a credential's start in clear.
		i = room
		for i > 0 && !utf8.RuneStart(w[i]) {
			i--
		}
		w = w[:i]
	}
	return w
}
