package textcheck

import (
	"bytes"
	"errors"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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
	// jsontext refuses duplicate names (after unescaping) as it reads, and says where.
	// A *bytes.Buffer is read in place (no copy of raw kept in the decoder), and
	// resetting to an empty one drops it: the pool keeps no request's body. Invalid
	// UTF-8 and lone surrogates are read as encoding/json reads them (replaced), so that
	// they do not hide a duplicate from this check.
	dec := decoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(&bytes.Buffer{})
		decoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(raw), jsontext.AllowInvalidUTF8(true))
	for {
		// Every value of the text, as a reader of a stream of values would see them.
		_, err := dec.ReadValue()
		if err == nil {
			continue
		}
		if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok && errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return string(se.JSONPointer), true
		}
		return "", false // every key unique, or not JSON: nothing found
	}
}

// decoders keeps jsontext's decoders (and their buffers) between requests.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(&bytes.Buffer{}) }}

// Problem says what is wrong with JSON text a person typed, beyond its syntax, or "":
// a string PostgreSQL cannot store (JSON) or a key given twice (DuplicateKey), naming
// where inside the text.
func Problem(raw []byte) string {
	if ptr, why, found := JSON(raw); found {
		if ptr == "" {
			return why
		}
		return "at " + ptr + ": " + why
	}
	if ptr, dup := DuplicateKey(raw); dup {
		return "the key " + ptr + " " + WhyDuplicate
	}
	return ""
}
