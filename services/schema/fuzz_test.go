package schema

import (
	"encoding/json"
	"errors"
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
