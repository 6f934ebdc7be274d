package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/views"
)

// toolSchema builds the Schema tab: parameters, the JSON schemas, the generated docs
// and the definition's versions to compare.
func (h ToolPageHandler) toolSchema(ctx context.Context, it tools.Item, from, to string) (*views.ToolSchema, error) {
	s := schemaDocs(it)
	// The newest versions only, without their definitions: a server flipping between two
	// definitions leaves thousands, and guests may open this tab.
	versions, older, err := h.Registry.ToolVersionsPage(ctx, it.ID, registry.MaxToolVersions)
	if err != nil {
		return nil, err
	}
	s.OlderVersions = older
	byHash := map[string]registry.ToolVersion{}
	label := func(v registry.ToolVersion) string {
		l := fmt.Sprintf("v%d.%d", v.VersionMajor, v.VersionMinor)
		if v.DefinitionHash == it.DefinitionHash {
			l += " (current)"
		}
		return l
	}
	for _, v := range versions {
		if _, dup := byHash[v.DefinitionHash]; dup {
			continue // a definition seen again later: its newest version stands for it
		}
		byHash[v.DefinitionHash] = v
		row := views.ToolVersionRow{Version: fmt.Sprintf("%d.%d", v.VersionMajor, v.VersionMinor), Hash: v.DefinitionHash,
			Current: v.DefinitionHash == it.DefinitionHash, Breaking: v.Breaking, At: v.CreatedAt}
		// Versions stored before discovery bounded their changes may hold thousands of
		// them, quoting a server's names whole.
		for _, ch := range registry.ClipChanges(v.Changes) {
			row.Changes = append(row.Changes, views.ToolChangeRow{Message: ch.Message, Breaking: ch.Breaking})
		}
		if !row.Current {
			row.CompareURL = toolTabURL(it.ID, views.ToolTabSchema, url.Values{"from": {v.DefinitionHash}, "to": {it.DefinitionHash}}) + "#compare-h"
		}
		s.Versions = append(s.Versions, row)
		s.VersionOpts = append(s.VersionOpts, views.Option{Value: v.DefinitionHash, Label: label(v)})
	}
	// A version chosen but too old to be listed (the History tab links to every change)
	// is found by its hash, and offered in the selects.
	for _, hash := range []string{from, to} {
		if _, ok := byHash[hash]; ok || hash == "" {
			continue
		}
		v, found, err := h.Registry.ToolVersionOf(ctx, it.ID, hash)
		if err != nil {
			return nil, err
		}
		if found {
			byHash[hash] = v
			s.VersionOpts = append(s.VersionOpts, views.Option{Value: hash, Label: label(v)})
		}
	}
	if len(s.VersionOpts) < 2 {
		return s, nil
	}
	// Without a choice, compare the previous version with the current one.
	if from == "" && to == "" {
		to = it.DefinitionHash
		if _, ok := byHash[to]; !ok {
			to = s.VersionOpts[0].Value
		}
		for _, o := range s.VersionOpts {
			if o.Value != to {
				from = o.Value
				break
			}
		}
	} else {
		s.CompareSelected = true
	}
	s.From, s.To = from, to
	a, okA := byHash[from]
	b, okB := byHash[to]
	if !okA || !okB {
		s.DiffError = "Choose two versions of this tool's definition to compare."
		return s, nil
	}
	s.FromLabel, s.ToLabel = label(a), label(b)
	// Only the two definitions compared are read.
	defA, err := h.Registry.ToolDefinition(ctx, it.ID, a.VersionMajor, a.VersionMinor)
	if err != nil {
		return nil, err
	}
	defB := defA
	if b.DefinitionHash != a.DefinitionHash {
		if defB, err = h.Registry.ToolDefinition(ctx, it.ID, b.VersionMajor, b.VersionMinor); err != nil {
			return nil, err
		}
	}
	// Versions stored before discovery masked the server's secrets in tool texts keep
	// them: mask them as the current one is (nothing while the server has no session).
	if h.MCP != nil {
		m := h.MCP.Masker(it.ServerID)
		defA, defB = m.JSON(defA), m.JSON(defB)
	}
	s.Diff, s.DiffTruncated = views.FoldDiff(views.DiffLines(strings.Split(indentJSON(defA), "\n"),
		strings.Split(indentJSON(defB), "\n")), 3)
	for _, l := range s.Diff {
		switch l.Op {
		case views.ToolDiffAdded:
			s.LinesAdded++
		case views.ToolDiffRemoved:
			s.LinesRemoved++
		}
	}
	return s, nil
}

// schemaDocs is what the Schema tab shows of the current definition: parameters, the
// JSON schemas, the generated docs and an example call.
func schemaDocs(it tools.Item) *views.ToolSchema {
	def := schema.Tool{Name: it.Name, Title: it.Title, Description: it.Description, InputSchema: it.InputSchema,
		OutputSchema: it.OutputSchema, Annotations: it.Annotations}
	s := &views.ToolSchema{Params: schemaParamRows(schema.Parameters(it.InputSchema), 0), InputJSON: indentJSON(it.InputSchema),
		Markdown: schema.Markdown(def, it.QualifiedName())}
	if len(bytes.TrimSpace(it.OutputSchema)) > 0 && string(bytes.TrimSpace(it.OutputSchema)) != "null" {
		s.OutputJSON = indentJSON(it.OutputSchema)
	}
	args, shortened := schema.ExampleArgumentsShortened(it.InputSchema)
	s.Example, s.ExampleShortened = exampleCall(it.QualifiedName(), args), shortened
	return s
}

// schemaParamRows flattens parameters and their nested children, depth first.
func schemaParamRows(ps []schema.Param, depth int) []views.ToolParamRow {
	var out []views.ToolParamRow
	for _, p := range ps {
		out = append(out, views.ToolParamRow{Name: p.Name, Arg: p.Arg, Type: p.Type, Required: p.Required, Deprecated: p.Deprecated,
			Description: p.Description, Constraints: paramConstraintList(p), Depth: depth})
		out = append(out, schemaParamRows(p.Children, depth+1)...)
	}
	return out
}

// paramConstraintList says in words what values a parameter accepts.
func paramConstraintList(p schema.Param) []string {
	var out []string
	if len(p.Enum) == 1 {
		out = append(out, "always "+jsonText(p.Enum[0]))
	} else if len(p.Enum) > 1 {
		vals := make([]string, len(p.Enum))
		for i, e := range p.Enum {
			vals[i] = jsonText(e)
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	if p.Default != nil {
		out = append(out, "default "+jsonText(p.Default))
	}
	if p.Format != "" {
		out = append(out, "format "+p.Format)
	}
	if p.Pattern != "" {
		out = append(out, "matches "+p.Pattern)
	}
	bound := func(v *float64, excl bool, incl, strict string) {
		if v == nil {
			return
		}
		op := incl
		if excl {
			op = strict
		}
		out = append(out, op+" "+strconv.FormatFloat(*v, 'g', -1, 64))
	}
	bound(p.Min, p.ExclusiveMin, "≥", ">")
	bound(p.Max, p.ExclusiveMax, "≤", "<")
	count := func(lo, hi *int, noun string) {
		switch {
		case lo != nil && hi != nil:
			out = append(out, fmt.Sprintf("%d to %d %s", *lo, *hi, noun))
		case lo != nil:
			out = append(out, fmt.Sprintf("at least %d %s", *lo, noun))
		case hi != nil:
			out = append(out, fmt.Sprintf("at most %d %s", *hi, noun))
		}
	}
	count(p.MinLength, p.MaxLength, "characters")
	count(p.MinItems, p.MaxItems, "items")
	return out
}

// jsonText shows a JSON value compactly.
func jsonText(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(buf.String())
}

// indentJSON pretty-prints JSON with sorted keys and exact numbers, so two versions of
// a definition diff line by line; what is not JSON is returned as it is.
func indentJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	if indentedSize(raw) > maxIndented {
		return string(raw) // shown as it came: indented, it would be too large
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimRight(buf.String(), "\n")
}

// maxIndented bounds, in bytes, the text indentJSON makes: each line is indented two
// spaces per level, so 20 KB nested 10,000 deep would be 200 MB (anyone who may view a
// tool could send that to the test panel, and a tool could return it).
const maxIndented = 4 << 20

// indentedSize is at most how many bytes raw takes indented: every value could start a
// line indented as deep as the deepest nesting.
func indentedSize(raw []byte) int {
	depth, deepest, lines, inString := 0, 0, 1, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
			lines += 2
		case c == ']' || c == '}':
			depth--
		case c == ',':
			lines++
		}
	}
	return len(raw) + lines*(2*deepest+1)
}

// exampleCall is the body of POST /api/v1/tools/call for the example arguments.
func exampleCall(tool string, args map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}{tool, args})
	return strings.TrimRight(buf.String(), "\n")
}
