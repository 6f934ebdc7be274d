package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/services/verr"
)

// What one document checked against a schema may hold. The validator cannot be stopped:
// it turns every number it looks at into an exact fraction (1e999999 is a million-digit
// integer, 16 ms each time), allocates a whole error for every value that fails (600
// bytes: a 4 MiB array of wrong items is 1.2 GB), and applies the schema to every value.
const (
	// MaxValues bounds the JSON values (objects, arrays, strings, numbers, booleans and
	// nulls; not property names) of one document checked against a schema.
	MaxValues = 250_000
	// maxNumberText bounds a number's text, in characters, and maxExponent its written
	// exponent: float64 reaches 1.8e308 and 5e-324, an int64 has 19 digits.
	maxNumberText = 100
	maxExponent   = 400
	// maxEvaluationWork bounds one validation, in values times the most evaluations the
	// schema may make at one value (checkComplexity): 0.25 to 1.8 µs an evaluation as
	// measured on the 2-core development machine, so about 1 s or more. Real schemas make
	// at most 5 (the test data's), so MaxValues values stay well within it.
	maxEvaluationWork = 4_000_000
)

// numberProblem says why the number written n is not given to the validator, or "".
func numberProblem(n string) string {
	if len(n) > maxNumberText {
		return fmt.Sprintf("is a number written with %d characters; at most %d are checked against a schema", len(n), maxNumberText)
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return ""
	}
	// Written, not parsed: ParseFloat reads 1e-999999 as 0, but the validator builds 10^999999.
	digits := strings.TrimLeft(strings.TrimLeft(n[i+1:], "+-"), "0")
	if e, err := strconv.Atoi(digits); digits != "" && (err != nil || e > maxExponent) {
		return fmt.Sprintf("is a number with the exponent %s; exponents up to ±%d are checked against a schema", n[i+1:], maxExponent)
	}
	return ""
}

// scan is what the pre-pass found in a document: how many values it holds, and the first
// number not to be given to the validator, with its place.
type scan struct {
	values        int
	at, numberWhy string
}

// scanRaw scans a JSON document without decoding it. ok is false when jsontext cannot
// read it; the caller then decodes it as the validator does and scans the result.
func scanRaw(raw []byte) (sc scan, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		switch k := dec.PeekKind(); k {
		case 0: // the end, or an error
			_, err := dec.ReadToken()
			return sc, err == io.EOF
		case '0':
			v, err := dec.ReadValue()
			if err != nil {
				return sc, false
			}
			sc.values++
			if sc.numberWhy == "" && (len(v) > maxNumberText || bytes.ContainsAny(v, "eE")) {
				if why := numberProblem(string(v)); why != "" {
					sc.at, sc.numberWhy = string(dec.StackPointer()), why
				}
			}
		default:
			// An object's even-numbered strings are its property names, not values.
			kind, n := dec.StackIndex(dec.StackDepth())
			name := k == '"' && kind == '{' && n%2 == 0
			if _, err := dec.ReadToken(); err != nil {
				return sc, false
			}
			if !name && k != '}' && k != ']' {
				sc.values++
			}
		}
	}
}

// scanValue scans a decoded document (maps or *Object, slices, json.Number, and any
// other scalar) the same way, keys in order so the number named is always the same.
func scanValue(v any) scan {
	type step struct {
		key   string
		index int // -1 for a key
	}
	var sc scan
	var path []step // the place walked, spelled out only for the number named
	var walk func(v any)
	walk = func(v any) {
		sc.values++
		switch t := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				path = append(path, step{k, -1})
				walk(t[k])
				path = path[:len(path)-1]
			}
		case *Object:
			for _, k := range t.Keys() {
				path = append(path, step{k, -1})
				walk(t.m[k])
				path = path[:len(path)-1]
			}
		case []any:
			for i, e := range t {
				path = append(path, step{"", i})
				walk(e)
				path = path[:len(path)-1]
			}
		case json.Number:
			if why := numberProblem(string(t)); why != "" && sc.numberWhy == "" {
				tokens := make([]string, len(path))
				for i, p := range path {
					if tokens[i] = p.key; p.index >= 0 {
						tokens[i] = strconv.Itoa(p.index)
					}
				}
				sc.at, sc.numberWhy = PtrJoin("", tokens...), why
			}
		}
	}
	walk(v)
	return sc
}

// refuse is ValidateArguments' problem for a document it does not check against s, or nil.
func (sc scan) refuse(s *jsonschema.Schema) error {
	if sc.values > MaxValues {
		return verr.New("", fmt.Sprintf("too many values to check against the schema: the document holds %d JSON values; at most %d are checked; send fewer", sc.values, MaxValues))
	}
	if sc.numberWhy != "" {
		e := &verr.Error{}
		e.AddKind(sc.at, verr.KindValue, sc.numberWhy)
		return e
	}
	if evals := costsOf(s).evals; float64(sc.values)*evals > maxEvaluationWork {
		return verr.New("", fmt.Sprintf("too many values to check against the schema: %d JSON values, each of which the schema may check up to %.0f times (through $ref, allOf, anyOf and the like), could take %.2g evaluations, more than the %.0g allowed; send fewer",
			sc.values, evals, float64(sc.values)*evals, float64(maxEvaluationWork)))
	}
	return nil
}

// checkNumbers refuses a schema holding a number the validator must not be given, with
// its place: compiling it (minimum, multipleOf), checking the schema against the
// meta-schema (maxLength) or comparing a value to it (enum, const) costs seconds.
func checkNumbers(doc any) (string, error) {
	sc := scanValue(doc)
	if sc.numberWhy == "" {
		return "", nil
	}
	return sc.at, fmt.Errorf("%w: the value at %q %s; write a smaller number", ErrTooComplex, sc.at, sc.numberWhy)
}
