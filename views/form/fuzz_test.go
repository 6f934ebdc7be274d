package form

import (
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzDecodeForm: whatever a browser posts, decoding the test panel's form (Decode) against
// every schema answers — never panics — with JSON or field errors naming the fields.
func FuzzDecodeForm(f *testing.F) {
	corpus := formCorpus(f)
	for _, tl := range corpus {
		m := Build(tl.InputSchema, nil)
		f.Add(formSubmission(m).Encode())
	}
	for _, s := range []string{"", "a=1", "%00=%ff", JSONKey + "=&" + FieldName("") + "={", "p.x.0=1&p.x.count=999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, tl := range corpus {
			out, ve := Decode(tl.InputSchema, form)
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
