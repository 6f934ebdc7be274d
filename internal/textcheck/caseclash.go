package textcheck

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// WhyCaseClash is what is wrong with two keys that differ only in case.
const WhyCaseClash = "differs only in case from another key of the same object; Toolwarden reads keys without regard to case, so give it once"

// CaseClash finds two keys of one object in raw that Go's decoder would both read into
// the same field of v (it matches field names without regard to case, and the last key
// wins, while a case-sensitive reader of the same bytes takes the first). Only objects
// decoded into structs are checked: maps and raw JSON (tool arguments) keep keys exactly
// as written, so "Name" and "name" are two keys there. It returns the JSON pointer of the
// second key.
func CaseClash(raw []byte, v any) (string, bool) {
	return caseClash(raw, reflect.TypeOf(v), "")
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func caseClash(raw []byte, t reflect.Type, at string) (string, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessage {
		return "", false
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return "", false
		}
		for i, it := range items {
			if p, bad := caseClash(it, t.Elem(), at+"/"+strconv.Itoa(i)); bad {
				return p, true
			}
		}
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", false
		}
		fields := jsonFields(t)
		seen := map[string]string{} // folded field name → the key that set it
		// Keys in document order would name the later one; map order is random, so
		// compare sorted keys: the pointer names one of the two, always the same.
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f, ok := fields[fold(k)]
			if !ok {
				continue
			}
			ptr := at + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if prev, dup := seen[fold(k)]; dup && prev != k {
				return ptr, true
			}
			seen[fold(k)] = k
			if p, bad := caseClash(obj[k], f, ptr); bad {
				return p, true
			}
		}
	}
	return "", false
}

// jsonFields maps a struct's JSON field names, lower case, to their types (embedded
// structs' fields included).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[fold(name)] = f.Type
	}
	return out
}

// fold is a key as Go's decoder compares it: without case, and with the letters that
// fold to ASCII ones ("ſ" is "s", the Kelvin sign is "k") folded too.
func fold(k string) string { return strings.ToLower(strings.ToUpper(k)) }
