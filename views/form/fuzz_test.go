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
	for _, s := range []string{"", "a=1", "%00=%ff", JSONKey + "=&" + FieldName("") + "={", "p.x.0=1&p.x.count=999999999",
		// choices, null boxes and map rows (mcptest-shapes, variants)
		"arg/shape/~v=1&arg/shape/~v1/width=2&arg/shape/~v0/radius=x", "arg/size/~v=-1", "arg/size/~v=99999999999999999999",
		"arg/label/~null=1&arg/label=x", "arg/when/~null=on&arg/when/~v=1",
		"arg/tags=2&arg/tags/0/~key=a&arg/tags/0=1&arg/tags/1/~key=a&arg/tags/1=2",
		"arg/tags/5/~key=&arg/tags/5=x&arg/limits/0/~key=A&arg/limits=999999",
		"arg/env/0/~key=k&arg/env/0/~null=1&arg/matrix/0/~key=r&arg/matrix/0/3=1",
		"arg/steps=1&arg/steps/0/~v=1&arg/steps/0/~v1/args/0/~key=q&_json=/steps/0/~v1/args/0"} {
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
