package schema

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/services/verr"
)

// FuzzValidateArguments: whatever arguments an agent sends, against every schema of the
// corpus (server-everything's tools and the form schemas), validation answers — never
// panics — and an answer that refuses names each problem by a JSON pointer.
func FuzzValidateArguments(f *testing.F) {
	corpus := formCorpus(f)
	for _, tl := range corpus {
		if ex, err := json.Marshal(ExampleArguments(tl.InputSchema)); err == nil {
			f.Add(string(ex))
		}
	}
	for _, s := range []string{`{}`, `null`, `[]`, `"x"`, `{"message":5}`, `{"a":"1","b":[{}]}`, `{"\u0000":1}`, `{"a":1e400}`} {
		f.Add(s)
	}
	type compiled struct {
		name string
		s    *jsonschema.Schema
	}
	var schemas []compiled
	for _, tl := range corpus {
		if s, err := CompileSchema(tl.InputSchema); err == nil {
			schemas = append(schemas, compiled{tl.Name, s})
		}
	}
	if len(schemas) < 10 {
		f.Fatalf("only %d schemas compiled", len(schemas))
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, c := range schemas {
			err := ValidateArguments(c.s, json.RawMessage(args))
			if err == nil {
				continue
			}
			var ve *verr.Error
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("%s: %q refused without field errors: %v", c.name, args, err)
			}
			for _, fe := range ve.Fields {
				if fe.Field != "" && fe.Field[0] != '/' {
					t.Fatalf("%s: %q: field %q is not a JSON pointer", c.name, args, fe.Field)
				}
			}
		}
	})
}

// FuzzDecodeForm: whatever a browser posts, decoding the test panel's form against
// every schema answers — never panics — with JSON or field errors naming the fields.
func FuzzDecodeForm(f *testing.F) {
	corpus := formCorpus(f)
	for _, tl := range corpus {
		m := Form(tl.InputSchema, nil)
		f.Add(formSubmission(m).Encode())
	}
	for _, s := range []string{"", "a=1", "%00=%ff", FormJSONKey + "=&" + FieldName("") + "={", "p.x.0=1&p.x.count=999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, tl := range corpus {
			out, ve := DecodeForm(tl.InputSchema, form)
			if ve != nil {
				if len(ve.Fields) == 0 {
					t.Fatalf("%s: %q refused without field errors", tl.Name, query)
				}
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%s: %q decoded to invalid JSON %q", tl.Name, query, out)
			}
		}
	})
}
