package schema

import (
	"slices"
	"testing"
)

// The reference server's tools are honest and well formed: none may be
// blocked, and each example call must pass the tool's own schema.
func TestEverythingTools(t *testing.T) {
	t.Parallel()
	tools := everythingTools(t)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"echo", "get-sum", "get-annotated-message", "get-structured-content", "gzip-file-as-resource"} {
		if !slices.Contains(names, want) {
			t.Fatalf("testdata lacks %s; got %v", want, names)
		}
	}
	for _, tl := range tools {
		t.Run(tl.Name, func(t *testing.T) {
			t.Parallel()
			fs := ValidateTool(tl)
			if Blocking(fs) {
				t.Errorf("got blocking findings %v, want none", fs)
			}
			s, err := CompileSchema(tl.InputSchema)
			if err != nil {
				t.Fatalf("input schema: %v", err)
			}
			if len(tl.OutputSchema) > 0 {
				if _, err := CompileSchema(tl.OutputSchema); err != nil {
					t.Fatalf("output schema: %v", err)
				}
			}
			args := ExampleArguments(tl.InputSchema)
			if err := s.Validate(roundTrip(t, args)); err != nil {
				t.Errorf("example %v does not validate: %v", args, err)
			}
			if md := Markdown(tl, "everything__"+tl.Name); len(md) == 0 {
				t.Error("got empty documentation")
			}
		})
	}
}

func TestEverythingFindingsInDetail(t *testing.T) {
	t.Parallel()
	byName := map[string]Tool{}
	for _, tl := range everythingTools(t) {
		byName[tl.Name] = tl
	}
	tests := []struct {
		tool  string
		codes []string // every finding expected, by code
	}{
		{"echo", nil},
		{"get-sum", nil},
		{"get-annotated-message", nil},
		{"get-structured-content", nil},
		{"gzip-file-as-resource", nil},
		// resourceType has an enum and a default but no description.
		{"get-resource-reference", []string{"param_undescribed"}},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, f := range ValidateTool(byName[tc.tool]) {
				got = append(got, f.Code)
			}
			if !slices.Equal(got, tc.codes) {
				t.Errorf("got %v, want %v", got, tc.codes)
			}
		})
	}
	ps := Parameters(byName["get-annotated-message"].InputSchema)
	if len(ps) != 2 || ps[0].Name != "messageType" || len(ps[0].Enum) != 3 || !ps[0].Required || ps[1].Default != false {
		t.Errorf("get-annotated-message parameters: got %+v", ps)
	}
	args := ExampleArguments(byName["get-sum"].InputSchema)
	if args["a"] != int64(0) || args["b"] != int64(0) {
		t.Errorf("get-sum example: got %v, want a and b set to 0", args)
	}
}

// BenchmarkValidateTool measures one definition; discovery of a 5,000-tool server
// validates and stores every one (the discovery target of docs/architecture.md, Performance).
func BenchmarkValidateTool(b *testing.B) {
	tools := everythingTools(b)
	var tl Tool
	for _, x := range tools {
		if x.Name == "get-structured-content" {
			tl = x
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ValidateTool(tl)
	}
}
