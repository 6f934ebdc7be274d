package registry_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// A change is breaking when a caller that worked with the old definition could fail
// with the new one (DESIGN §4, tool versioning): a name newly required, declared or not,
// at any depth; a nested parameter removed; schema keywords that refuse what they
// accepted. A change to the keywords around the parameters is listed even alongside
// parameter changes.
func TestDiffBreaking(t *testing.T) {
	t.Parallel()
	type change struct {
		Kind     string
		Path     string
		Breaking bool
	}
	const nested = `{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}}}`
	cases := []struct {
		name     string
		old, new string
		want     []change
	}{
		{"format added under draft-07, which checks it", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"to":{"type":"string"}}}`,
			`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"to":{"type":"string","format":"email"}}}`,
			[]change{{"parameter_changed", "/to", true}}},
		{"format added under 2020-12, which only describes it", `{"type":"object","properties":{"to":{"type":"string"}}}`,
			`{"type":"object","properties":{"to":{"type":"string","format":"email"}}}`,
			[]change{{"parameter_changed", "/to", false}}},
		{"$schema changed", `{"type":"object","properties":{"to":{"type":"string"}}}`,
			`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"to":{"type":"string"}}}`,
			[]change{{"input_schema", "", true}}},
		{"undeclared name newly required", `{"type":"object"}`, `{"type":"object","required":["confirm"]}`,
			[]change{{"parameter_required", "/confirm", true}}},
		{"undeclared name no longer required", `{"type":"object","required":["confirm"]}`, `{"type":"object"}`,
			[]change{{"parameter_optional", "/confirm", false}}},
		{"nested parameter newly required", nested,
			`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"]}}}`,
			[]change{{"parameter_required", "/o/b", true}}},
		{"nested parameter removed", nested,
			`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}`,
			[]change{{"parameter_removed", "/o/b", true}}},
		{"nested parameter retyped", nested,
			`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]}}}`,
			[]change{{"parameter_retyped", "/o/b", true}}},
		{"nested required parameter added", nested,
			`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"required":["a","c"]}}}`,
			[]change{{"parameter_added", "/o/c", true}}},
		{"nested parameter made optional, and described", nested,
			`{"type":"object","properties":{"o":{"type":"object","description":"options","properties":{"a":{"type":"string","description":"x"},"b":{"type":"string"}}}}}`,
			[]change{{"parameter_changed", "/o", false}, {"parameter_changed", "/o/a", false}, {"parameter_optional", "/o/a", false}}},
		{"nested object refusing extra properties", nested,
			`{"type":"object","properties":{"o":{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}}}`,
			[]change{{"parameter_changed", "/o", true}}},
		{"nested required reordered", `{"type":"object","properties":{"o":{"type":"object","required":["a","b"]}}}`,
			`{"type":"object","properties":{"o":{"type":"object","required":["b","a"]}}}`,
			[]change{{"parameter_changed", "/o", false}}},
		{"parameter given an enum", `{"type":"object","properties":{"m":{"type":"string"}}}`,
			`{"type":"object","properties":{"m":{"type":"string","enum":["a","b"]}}}`,
			[]change{{"parameter_changed", "/m", true}}},
		{"parameter's enum dropped", `{"type":"object","properties":{"m":{"type":"string","enum":["a","b"]}}}`,
			`{"type":"object","properties":{"m":{"type":"string"}}}`,
			[]change{{"parameter_changed", "/m", false}}},
		{"array items narrowed", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string"}}}}}}`,
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}}}`,
			[]change{{"parameter_changed", "/l", true}}},
		{"array items described", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string"}}}}}}`,
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string","description":"the x"}}}}}}`,
			[]change{{"parameter_changed", "/l", false}}},
		{"additionalProperties turned false", `{"type":"object","properties":{"a":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			[]change{{"input_schema", "", true}}},
		{"additionalProperties turned true", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`,
			[]change{{"input_schema", "", false}}},
		{"schema described", `{"type":"object"}`, `{"type":"object","description":"what it takes","$schema":"https://json-schema.org/draft/2020-12/schema"}`,
			[]change{{"input_schema", "", false}}},
		{"schema type narrowed", `{"type":["object","null"]}`, `{"type":"object"}`,
			[]change{{"input_schema", "", true}}},
		{"schema type widened", `{"type":"object"}`, `{"type":["object","null"]}`,
			[]change{{"input_schema", "", false}}},
		{"keyword change alongside a parameter change", `{"type":"object","properties":{"a":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"z":{"type":"string"}},"additionalProperties":false}`,
			[]change{{"parameter_added", "/z", false}, {"input_schema", "", true}}},
		{"harmless keyword change alongside a parameter change", `{"type":"object","properties":{"a":{"type":"string"}}}`,
			`{"type":"object","title":"T","properties":{"a":{"type":"string","description":"d"}}}`,
			[]change{{"parameter_changed", "/a", false}, {"input_schema", "", false}}},
		{"required reordered", `{"type":"object","properties":{"a":{},"b":{}},"required":["a","b"]}`,
			`{"type":"object","properties":{"a":{},"b":{}},"required":["b","a"]}`,
			[]change{{"input_schema", "", false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []change
			for _, c := range registry.Diff(def("d", tc.old), def("d", tc.new)) {
				if c.Message == "" {
					t.Errorf("%s: got an empty message, want one", c.Kind)
				}
				got = append(got, change{c.Kind, c.Path, c.Breaking})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Nested schemas come from servers: Diff looks a bounded depth into them, and a change
// deeper down than it looks counts as breaking rather than going unseen.
func TestDiffNestedBounded(t *testing.T) {
	t.Parallel()
	// deep nests objects n levels under parameter p0, the innermost holding leaf.
	deep := func(n int, leaf string) string {
		s := leaf
		for i := n - 1; i >= 0; i-- {
			s = fmt.Sprintf(`{"type":"object","properties":{"p%d":%s}}`, i, s)
		}
		return s
	}
	t.Run("within reach", func(t *testing.T) {
		t.Parallel()
		// p7 is the eighth level: its newly required x is seen and named.
		cs := registry.Diff(def("d", deep(8, `{"type":"object"}`)), def("d", deep(8, `{"type":"object","required":["x"]}`)))
		if len(cs) != 1 || cs[0].Kind != "parameter_required" || cs[0].Path != "/p0/p1/p2/p3/p4/p5/p6/p7/x" || !cs[0].Breaking {
			t.Fatalf("got %+v, want one breaking parameter_required at /p0/…/p7/x", cs)
		}
		if !strings.Contains(cs[0].Message, `"p0/p1/p2/p3/p4/p5/p6/p7/x"`) {
			t.Fatalf("message %q, want it to quote the nested name", cs[0].Message)
		}
	})
	t.Run("out of reach", func(t *testing.T) {
		t.Parallel()
		cs := registry.Diff(def("d", deep(200, `{"type":"string"}`)), def("d", deep(200, `{"type":"string","description":"x"}`)))
		if len(cs) != 1 || cs[0].Kind != "parameter_changed" || !cs[0].Breaking || strings.Count(cs[0].Path, "/") > 9 {
			t.Fatalf("got %+v, want one breaking parameter_changed at most 9 levels deep", cs)
		}
	})
	t.Run("wide", func(t *testing.T) {
		t.Parallel()
		// 200 object parameters of 200 object parameters each, every leaf described anew:
		// the work is bounded and the changes are too.
		wide := func(desc string) string {
			inner := make(map[string]any, 200)
			for i := range 200 {
				inner[fmt.Sprint("q", i)] = map[string]any{"type": "string", "description": desc}
			}
			outer := make(map[string]any, 200)
			for i := range 200 {
				outer[fmt.Sprint("p", i)] = map[string]any{"type": "object", "properties": inner}
			}
			b, _ := json.Marshal(map[string]any{"type": "object", "properties": outer})
			return string(b)
		}
		cs := registry.Diff(def("d", wide("a")), def("d", wide("b")))
		if n := len(cs); n != registry.MaxChanges+1 || cs[n-1].Kind != "more" {
			t.Fatalf("got %d changes, want %d ending with one counting the rest", n, registry.MaxChanges+1)
		}
	})
}

// Discovery bumps the major version for a newly required undeclared name, and the
// version's changes say it is breaking.
func TestApplyDiscoveryUndeclaredRequired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("undeclared-required"))
	base := registry.ToolDef{Name: "t", Description: "Does things", InputSchema: json.RawMessage(`{"type":"object"}`)}
	next := registry.ToolDef{Name: "t", Description: "Does things", InputSchema: json.RawMessage(`{"type":"object","required":["confirm"]}`)}
	f.discover(sv.ID, discovery("connect", base))
	f.discover(sv.ID, discovery("list_changed", next))
	tl := f.toolsByName(sv.ID)["t"]
	if tl.Version() != "2.0" {
		t.Fatalf("got version %s, want 2.0", tl.Version())
	}
	vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || !vs[0].Breaking || len(vs[0].Changes) != 1 || vs[0].Changes[0].Kind != "parameter_required" ||
		vs[0].Changes[0].Path != "/confirm" || !vs[0].Changes[0].Breaking {
		t.Fatalf("got versions %+v, want the newest breaking with one breaking parameter_required /confirm", vs)
	}
}
