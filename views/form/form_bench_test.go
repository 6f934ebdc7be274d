package form

import (
	"encoding/json"
	"net/url"
	"strconv"
	"testing"
)

// BenchmarkFormVariants: one answer of the test panel for the variants schema
// (choices in array items, nullable map values, rows): Decode the submission,
// then BuildFrom to show it again, as handlers/testpanel.go does, with 50
// steps and 50 map rows.
func BenchmarkFormVariants(b *testing.B) {
	s := variantsSchema(b)
	sub := url.Values{"arg/steps": {"50"}, "arg/env": {"50"}}
	for i := range 50 {
		n := strconv.Itoa(i)
		sub.Set("arg/steps/"+n+"/~v", strconv.Itoa(i%2))
		sub.Set("arg/steps/"+n+"/~v0/ms", n)
		sub.Set("arg/steps/"+n+"/~v1/tool", "echo")
		sub.Set("arg/env/"+n+"/~key", "K"+n)
		sub.Set("arg/env/"+n, "v"+n)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, errs := Decode(s, sub)
		if errs != nil {
			b.Fatal(errs)
		}
		if m := BuildFrom(s, out, sub); len(m.Unsupported) != 0 {
			b.Fatal(m.Unsupported)
		}
	}
}

// BenchmarkFormChoiceBuild: Build for arguments whose 50 choices each have to
// find the variant their value fits.
func BenchmarkFormChoiceBuild(b *testing.B) {
	s := variantsSchema(b)
	var steps []any
	for i := range 50 {
		if i%2 == 0 {
			steps = append(steps, map[string]any{"op": "wait", "ms": i})
		} else {
			steps = append(steps, map[string]any{"op": "call", "tool": "echo", "args": map[string]any{"a": "b"}})
		}
	}
	args, _ := json.Marshal(map[string]any{"steps": steps})
	b.ReportAllocs()
	for b.Loop() {
		if m := Build(s, args); fieldAt(b, m, "/steps/1").Chosen != 1 {
			b.Fatal("step 2 is not a call")
		}
	}
}
