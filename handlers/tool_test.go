package handlers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/views"
)

func TestIndentJSONSortsKeys(t *testing.T) {
	t.Parallel()
	got := indentJSON(json.RawMessage(`{"b":1,"a":{"y":1.50,"x":"<&>"}}`))
	want := "{\n  \"a\": {\n    \"x\": \"<&>\",\n    \"y\": 1.50\n  },\n  \"b\": 1\n}"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := indentJSON(json.RawMessage(`not json`)); got != "not json" {
		t.Errorf("not JSON: got %q, want it unchanged", got)
	}
}

func TestParamConstraintList(t *testing.T) {
	t.Parallel()
	one, ten, three := 1.0, 10.0, 3
	cases := []struct {
		p    schema.Param
		want []string
	}{
		{schema.Param{}, nil},
		{schema.Param{Enum: []any{"a", "b"}, Default: "a"}, []string{`one of "a", "b"`, `default "a"`}},
		{schema.Param{Enum: []any{"only"}}, []string{`always "only"`}},
		{schema.Param{Min: &one, Max: &ten, ExclusiveMax: true}, []string{"≥ 1", "< 10"}},
		{schema.Param{MinLength: &three}, []string{"at least 3 characters"}},
		{schema.Param{MinItems: &three, MaxItems: &three, Format: "uri", Pattern: "^a"}, []string{"format uri", "matches ^a", "3 to 3 items"}},
	}
	for _, tc := range cases {
		if got := paramConstraintList(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: got %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestLiveToolHead(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	card := views.ToolCard{ID: "t1", Name: "echo", QualifiedName: "s__echo", Status: "invalid", Risk: "high", Version: "1.0"}
	if err := views.LiveToolHead(card).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`id="tool-head-t1"`, `hx-swap-oob="true"`, `data-status="invalid"`, `data-testid="override-form"`,
		`name="back" value="/tools/t1"`} {
		if !strings.Contains(html, want) {
			t.Errorf("live head: %s missing in %s", want, html)
		}
	}
	if strings.Count(html, `id="tool-head-`) != 1 {
		t.Error("live head: want exactly one root with the head's id")
	}
	// The live head goes to everyone who follows the tools, guests too: it never
	// carries the override's reason (tool.inspect only).
	b.Reset()
	card.Status, card.Override = "enabled", "a secret reason"
	if err := views.LiveToolHead(card).Render(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "a secret reason") {
		t.Errorf("live head: has the override reason: %s", b.String())
	}
}

func TestPercent(t *testing.T) {
	for r, want := range map[float64]string{1: "100%", 0.5: "50%", 0.9995: "99.9%", 0.99999: "99.9%", 0.123: "12.3%", 0: "0%"} {
		if got := percent(r); got != want {
			t.Errorf("percent(%v) = %q, want %q", r, got, want)
		}
	}
}

// TestSchemaTabSaysExampleShortened: an example cut short does not pass its schema, and
// the Schema tab says so, as the generated Markdown does; a whole example says nothing.
func TestSchemaTabSaysExampleShortened(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema string
		shortened    bool
	}{
		{"huge minItems", `{"type":"object","properties":{"a":{"type":"array","minItems":2147483647}},"required":["a"]}`, true},
		{"small", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			it := tools.Item{Row: tools.Row{ID: "t1", Server: "srv", Name: "big", Description: "Takes many items.",
				InputSchema: json.RawMessage(tc.schema)}}
			s := schemaDocs(it)
			if s.ExampleShortened != tc.shortened {
				t.Errorf("ExampleShortened: got %v, want %v", s.ExampleShortened, tc.shortened)
			}
			var b strings.Builder
			page := views.ToolPage{Tool: views.ToolCard{ID: "t1", QualifiedName: it.QualifiedName()}, Tab: views.ToolTabSchema, Schema: s}
			if err := views.Tool(page).Render(t.Context(), &b); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), `data-testid="example-shortened"`); got != tc.shortened {
				t.Errorf("the page says the example is shortened: %v, want %v", got, tc.shortened)
			}
			if md := strings.Contains(s.Markdown, "This example is shortened"); md != tc.shortened {
				t.Errorf("the Markdown says the example is shortened: %v, want %v", md, tc.shortened)
			}
		})
	}
}
