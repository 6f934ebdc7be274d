package textcheck

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// WhyDuplicate is what is wrong with an object key given twice.
const WhyDuplicate = "is given twice in the same object; each key may appear once"

// DuplicateKey finds the first object key of the JSON document raw that appears twice in
// the same object (compared after unescaping, so "a" and "\u0061" are the same key). It
// returns the JSON pointer of the second one; found is false when every key is unique,
// or when raw is not JSON at all (the handler says what is wrong with that).
//
// Go's decoder keeps the last of duplicate keys, while other readers of the same bytes
// (a proxy, a log reader, a person checking a plan) may keep the first: refusing them
// keeps every reader seeing one value.
func DuplicateKey(raw []byte) (ptr string, found bool) {
	if bytes.Count(raw, []byte(":")) < 2 {
		return "", false // fewer than two keys: nothing to compare
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		key    string // the current key (objects) or index (arrays)
		index  int
		expect bool // objects: the next string token is a key
	}
	var stack []*frame
	pointer := func() string {
		var sb strings.Builder
		for _, f := range stack {
			sb.WriteByte('/')
			if f.object {
				sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(f.key, "~", "~0"), "/", "~1"))
			} else {
				sb.WriteString(strconv.Itoa(f.index - 1))
			}
		}
		return sb.String()
	}
	// afterValue is called once a value (scalar or closed container) is complete.
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expect = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // the end, or not JSON: nothing found
		}
		top := (*frame)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				afterValue()
				continue
			}
			k, _ := tok.(string)
			top.key = k
			top.expect = false
			if top.keys[k] {
				return pointer(), true
			}
			top.keys[k] = true
			continue
		}
		if top != nil && !top.object {
			if d, ok := tok.(json.Delim); !ok || d != ']' {
				top.index++
			}
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true})
		case '[':
			stack = append(stack, &frame{})
		case ']', '}':
			stack = stack[:len(stack)-1]
			afterValue()
		default:
			afterValue()
		}
	}
}
