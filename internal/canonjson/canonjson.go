// Package canonjson is the one canonical form of JSON that Toolwarden hashes: object
// keys sorted, no insignificant whitespace, numbers exactly as written, strings escaped
// as encoding/json escapes them (HTML characters as \u003c \u003e \u0026, U+2028 and
// U+2029 escaped, invalid UTF-8 as U+FFFD). Hashes over it are stored (tool definition
// pins, plan and rollback hashes, execution seals), so its bytes must never change; the
// tests of its callers pin them on canonjsontest.Corpus.
package canonjson

import (
	"bytes"
	"encoding/json"
)

// Decode reads the first JSON value of raw with numbers kept as json.Number, so that
// Marshal writes them back as written. Anything after that first value is ignored, as
// it always was for the stored hashes. Empty input is an error (io.EOF).
func Decode(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Marshal writes v in canonical form. For the values Decode returns (and maps and
// structs holding them) that is encoding/json's encoding, whose map keys come sorted.
func Marshal(v any) ([]byte, error) {
	return json.Marshal(v)
}

// Canonical re-encodes raw in canonical form: only key order and whitespace change.
func Canonical(raw []byte) ([]byte, error) {
	v, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// Equal reports whether a and b are the same JSON value (false when either is not JSON).
func Equal(a, b []byte) bool {
	ca, err1 := Canonical(a)
	cb, err2 := Canonical(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
