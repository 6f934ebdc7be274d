package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Markdown documents a tool: its title and name, description, parameter
// table, output, behaviour hints and an example call for POST
// /api/v1/tools/call under qualifiedName (the tool's own name when empty).
//
// Text from the server is copied as written, except that hidden characters
// are shown as <U+XXXX> so readers see what a model would; render the result
// with a sanitising Markdown renderer, as it is untrusted input.
func Markdown(t Tool, qualifiedName string) string {
	var b strings.Builder
	name := qualifiedName
	if name == "" {
		name = t.Name
	}
	ann := annotationValues(t.Annotations)
	annTitle, _ := ann["title"].(string)
	fmt.Fprintf(&b, "# %s\n\n", cell(firstNonEmpty(t.Title, annTitle, t.Name)))
	fmt.Fprintf(&b, "Tool %s", code(name))
	if t.Name != "" && t.Name != name {
		fmt.Fprintf(&b, " (%s on its server)", code(t.Name))
	}
	b.WriteString(".\n\n")
	if d := strings.TrimSpace(t.Description); d != "" {
		lines := strings.Split(strings.ReplaceAll(d, "\r\n", "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(visible(l), " ")
		}
		b.WriteString(strings.Join(lines, "\n"))
		b.WriteString("\n\n")
	} else {
		b.WriteString("_The server gives no description._\n\n")
	}

	b.WriteString("## Parameters\n\n")
	if ps := Parameters(t.InputSchema); len(ps) > 0 {
		paramTable(&b, ps, "Parameter")
		b.WriteString("\n")
	} else {
		b.WriteString("This tool takes no parameters.\n\n")
	}

	b.WriteString("## Output\n\n")
	if present(t.OutputSchema) {
		b.WriteString("Structured content, validated against the tool's output schema")
		if fs := parameters(t.OutputSchema, "/outputSchema"); len(fs) > 0 {
			b.WriteString(":\n\n")
			paramTable(&b, fs, "Field")
			b.WriteString("\n")
		} else {
			b.WriteString(".\n\n")
		}
	} else {
		b.WriteString("Unstructured content (text, images or resources); the tool declares no output schema.\n\n")
	}

	b.WriteString("## Behaviour\n\n")
	if ann == nil {
		b.WriteString("The server gives no behaviour hints, so Toolwarden treats the tool as possibly destructive.\n\n")
	} else {
		for _, h := range []struct{ key, label, assumed string }{
			{"readOnlyHint", "Read-only", "no"},
			{"destructiveHint", "Destructive", "yes"},
			{"idempotentHint", "Idempotent", "no"},
			{"openWorldHint", "Open world", "yes"},
		} {
			v := "not stated (MCP assumes " + h.assumed + ")"
			if x, ok := ann[h.key].(bool); ok {
				v = map[bool]string{true: "yes", false: "no"}[x]
			}
			fmt.Fprintf(&b, "- %s: %s\n", h.label, v)
		}
		b.WriteString("\nThese are the server's hints, not guarantees; Toolwarden decides each call's risk itself.\n\n")
	}

	b.WriteString("## Example call\n\n`POST /api/v1/tools/call`\n\n```json\n")
	args, shortened := ExampleArgumentsShortened(t.InputSchema)
	b.WriteString(exampleJSON(name, args))
	b.WriteString("```\n\n")
	if shortened {
		b.WriteString("This example is shortened: the schema asks for more items, longer text or more values than a document can show, so the call above does not pass it as written.\n\n")
	}
	b.WriteString("Arguments that do not match the input schema are refused with `400 invalid_arguments`; ")
	b.WriteString("the error's `details` name each parameter at fault (`path`) and why (`message`).\n")
	return b.String()
}

// annotationValues decodes annotations, or returns nil when there are none
// or they are not an object.
func annotationValues(raw json.RawMessage) map[string]any {
	if !present(raw) {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func exampleJSON(tool string, args map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "<path>" readable
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}{tool, args})
	return buf.String()
}

func paramTable(b *strings.Builder, ps []Param, noun string) {
	fmt.Fprintf(b, "| %s | Type | Required | Description |\n|---|---|---|---|\n", noun)
	var rows func([]Param)
	rows = func(ps []Param) {
		for _, p := range ps {
			req := "no"
			if p.Required {
				req = "yes"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", code(p.Arg), cell(p.Type), req, cell(paramNotes(p)))
			rows(p.Children)
		}
	}
	rows(ps)
}

// paramNotes is the description column: the description, then the
// constraints a caller must meet.
func paramNotes(p Param) string {
	var parts []string
	if p.Description != "" {
		d := strings.TrimSpace(p.Description)
		if !strings.HasSuffix(d, ".") {
			d += "."
		}
		parts = append(parts, d)
	}
	if p.Deprecated {
		parts = append(parts, "Deprecated.")
	}
	if p.Default != nil {
		parts = append(parts, "Default: "+value(p.Default)+".")
	}
	if len(p.Enum) == 1 {
		parts = append(parts, "Always "+value(p.Enum[0])+".")
	} else if len(p.Enum) > 1 {
		vs := make([]string, len(p.Enum))
		for i, e := range p.Enum {
			vs[i] = value(e)
		}
		parts = append(parts, "One of: "+strings.Join(vs, ", ")+".")
	}
	if p.Format != "" {
		parts = append(parts, "Format: "+code(p.Format)+".")
	}
	if p.Pattern != "" {
		parts = append(parts, "Pattern: "+code(p.Pattern)+".")
	}
	if r := rangeText(p.Min, p.Max, p.ExclusiveMin, p.ExclusiveMax); r != "" {
		parts = append(parts, "Range: "+r+".")
	}
	if r := countText(p.MinLength, p.MaxLength); r != "" {
		parts = append(parts, "Length: "+r+" characters.")
	}
	if r := countText(p.MinItems, p.MaxItems); r != "" {
		parts = append(parts, "Items: "+r+".")
	}
	return strings.Join(parts, " ")
}

func rangeText(lo, hi *float64, xlo, xhi bool) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	var parts []string
	if lo != nil {
		op := "≥ "
		if xlo {
			op = "> "
		}
		parts = append(parts, op+f(*lo))
	}
	if hi != nil {
		op := "≤ "
		if xhi {
			op = "< "
		}
		parts = append(parts, op+f(*hi))
	}
	return strings.Join(parts, " and ")
}

func countText(lo, hi *int) string {
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("%d to %d", *lo, *hi)
	case lo != nil:
		return fmt.Sprintf("at least %d", *lo)
	case hi != nil:
		return fmt.Sprintf("at most %d", *hi)
	}
	return ""
}

// value renders a JSON value as inline code.
func value(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return code(fmt.Sprint(v))
	}
	return code(strings.TrimSpace(buf.String()))
}

// code renders s as an inline code span that survives backticks and pipes.
func code(s string) string {
	s = visible(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + strings.ReplaceAll(s, "|", `\|`) + fence
}

// cell makes text safe inside a table cell or heading: one line, pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(visible(s)), " "), "|", `\|`)
}
