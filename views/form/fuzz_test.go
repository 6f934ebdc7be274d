package form

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/toolwarden/toolwarden/services/schema"
)

// FuzzDecodeForm: whatever a browser posts, decoding the test panel's form (Decode) against
// every schema answers — never panics — with JSON or field errors naming the fields.
func FuzzDecodeForm(f *testing.F) {
	corpus := formCorpus(f)
	addFormSeeds(f, corpus)
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

// FuzzBuildFrom: whatever a browser posts, the page can show it again
// (BuildFrom never panics), and when it was read without errors, what that
// page sends decodes as the first submission did. (With errors the page may
// differ: a JSON marker on a plain input, say, is not shown again.)
func FuzzBuildFrom(f *testing.F) {
	corpus := formCorpus(f)
	addFormSeeds(f, corpus)
	f.Fuzz(func(t *testing.T, query string) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, tl := range corpus {
			out, ve := Decode(tl.InputSchema, form)
			m := BuildFrom(tl.InputSchema, out, form)
			if m.JSONOnly {
				continue
			}
			again, _ := Decode(tl.InputSchema, formSubmission(m))
			if ve == nil && plainMarkers(m, form) && !sameFormArgs(t, again, out) {
				t.Fatalf("%s: %q decoded to %s, and shown again to %s", tl.Name, query, out, again)
			}
		}
	})
}

// plainMarkers reports whether every JSON marker of form names a JSON
// sub-editor of m: a marker on another input (which the page never sends)
// makes Decode read it as JSON, and the page shown again has no such marker.
func plainMarkers(m Model, form url.Values) bool {
	for _, p := range form[JSONKey] {
		if f := findPath(&m.Root, p); f == nil || f.Kind != "json" {
			return false
		}
	}
	return true
}

func addFormSeeds(f *testing.F, corpus []schema.Tool) {
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
		"arg/steps=1&arg/steps/0/~v=1&arg/steps/0/~v1/args/0/~key=q&_json=/steps/0/~v1/args/0",
		"arg/limits/~more/0/~key=default&arg/limits/~more/0=1&arg/~more/0/~key=k&arg/~more/0=v"} {
		f.Add(s)
	}
}
