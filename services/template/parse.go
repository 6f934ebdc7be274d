package template

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/theory/jsonpath"
	"go.yaml.in/yaml/v3"

	"github.com/toolwarden/toolwarden/internal/yamlsize"
	"golang.org/x/net/http/httpguts"
)

// Parse reads and checks a template. Every problem found is reported at once, each at
// its line, in an *Error.
func Parse(text string) (*Template, error) {
	return ParseWith(text, ParseOptions{})
}

// ParseOptions changes what ParseWith checks.
type ParseOptions struct {
	// SkipCodeChecks leaves out the checks that no placeholder is code a shell or an
	// interpreter runs (interp.go). It is for reading what a template stored by an older
	// release says, such as where its tools send their arguments, so that a rule added
	// since does not hide that; a template read so must never be run.
	SkipCodeChecks bool
}

// ParseWith is Parse with options.
func ParseWith(text string, o ParseOptions) (*Template, error) {
	r := &reader{budget: 200_000, skipCode: o.SkipCodeChecks}
	t := r.template(text)
	if len(r.problems) > 0 {
		slices.SortStableFunc(r.problems, func(a, b Problem) int { return a.Line - b.Line })
		return nil, &Error{Problems: r.problems}
	}
	return t, nil
}

// reader walks the YAML tree, collecting problems.
type reader struct {
	problems []Problem
	budget   int // nodes left to visit: aliases must not blow a small text up
	skipCode bool
}

// maxProblems is how many problems a template's parse says.
const maxProblems = 100

func (r *reader) fail(line int, format string, a ...any) {
	if len(r.problems) < maxProblems {
		r.problems = append(r.problems, Problem{Line: line, Message: fmt.Sprintf(format, a...)})
	}
}

// maxExpandedBytes bounds the bytes of text a template stands for, its aliases
// followed: a few times what a template may hold written out.
const maxExpandedBytes = 4 * MaxBytes

// looksStructured reports whether a text body's written text, its placeholders left
// out, reads as JSON or XML: it opens an element, or an object or array with a quoted
// key or a colon in it. A placeholder before it changes nothing ("{p}{\"a\": \"{m}\"}"
// is still JSON once p is empty). A body that is only placeholders ("{message}") or
// brackets plain text ("[{level}] {message}") does not.
func looksStructured(t Text) bool {
	lit := strings.TrimSpace(t.Filled(""))
	if lit == "" {
		return false
	}
	if lit[0] == '<' {
		return true
	}
	return (lit[0] == '{' || lit[0] == '[') && strings.ContainsAny(lit, `":`)
}

// jsonContentType reports whether a Content-Type is JSON's: application/json or a
// type whose subtype ends in +json (application/merge-patch+json), with any parameters.
func jsonContentType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && typ != "" && !strings.ContainsAny(typ, "*") && (mt == "application/json" || strings.HasSuffix(sub, "+json") && len(sub) > len("+json"))
}

// formContentType reports whether a Content-Type is a URL-encoded form's.
func formContentType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(mt) == "application/x-www-form-urlencoded"
}

// yamlLine finds the line in a YAML syntax error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (r *reader) template(text string) *Template {
	switch {
	case len(text) > MaxBytes:
		r.fail(0, "is %d bytes; a template may have at most %d (%d KiB)", len(text), MaxBytes, MaxBytes>>10)
		return nil
	case strings.TrimSpace(text) == "":
		r.fail(0, "is empty: list the tools under tools:, each with a name and a command or an http request")
		return nil
	case strings.ContainsRune(text, 0):
		r.fail(0, "must not contain NUL characters")
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			r.fail(n, "is not valid YAML: %s", m[2])
		} else {
			r.fail(0, "is not valid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
		}
		return nil
	}
	if len(doc.Content) == 0 {
		r.fail(0, "is empty: list the tools under tools:, each with a name and a command or an http request")
		return nil
	}
	// Aliases are followed wherever they are used: a small template whose aliases
	// multiply would cost gigabytes each time it is parsed (on every connect and view).
	// One long string behind many aliases costs as much as many values.
	if nodes, _, over := yamlsize.Size(&doc, MaxNodes, maxExpandedBytes); over {
		if nodes > MaxNodes {
			r.fail(0, "stands for more than %d values once its aliases (*name) are followed: write the repeated parts out, or repeat fewer of them", MaxNodes)
		} else {
			r.fail(0, "stands for more than %d MiB of text once its aliases (*name) are followed: write the repeated parts out, or repeat fewer of them", maxExpandedBytes>>20)
		}
		return nil
	}
	root := r.resolve(doc.Content[0])
	m := r.mapping(root, "the template", "tools", "response_parsers")
	if m == nil {
		return nil
	}
	t := &Template{Parsers: map[string]*Parser{}}
	if pn := m.get("response_parsers"); pn != nil {
		if pm := r.mapping(pn, "response_parsers"); pm != nil {
			for _, name := range pm.order {
				if p := r.parser(name, pm.keyLine[name], pm.values[name]); p != nil {
					t.Parsers[name] = p
				}
			}
		}
	}
	tn := m.get("tools")
	if tn == nil {
		r.fail(root.Line, "has no tools: list them under tools:, each with a name and a command or an http request")
		return t
	}
	if tn.Kind != yaml.SequenceNode {
		r.fail(tn.Line, "tools must be a list (each item starting with \"- name: ...\")")
		return t
	}
	if len(tn.Content) == 0 {
		r.fail(tn.Line, "tools is empty: define at least one tool")
	}
	if len(tn.Content) > MaxTools {
		r.fail(tn.Line, "defines %d tools; a template may have at most %d", len(tn.Content), MaxTools)
		return t
	}
	seen := map[string]int{}
	for _, item := range tn.Content {
		tool := r.tool(r.resolve(item))
		if tool == nil {
			continue
		}
		if prev, dup := seen[tool.Name]; dup {
			r.fail(tool.Line, "tool %q is defined twice (first at line %d)", tool.Name, prev)
			continue
		}
		seen[tool.Name] = tool.Line
		if tool.Parse != "" && t.Parsers[tool.Parse] == nil && !r.parserFailed(pm(m), tool.Parse) {
			r.fail(tool.parseLine, "parse_response names %q, which response_parsers does not define%s", tool.Parse, known("it defines", slices.Sorted(maps.Keys(t.Parsers))))
		}
		t.Tools = append(t.Tools, &tool.Tool)
	}
	return t
}

// pm returns the response_parsers mapping node of the template mapping m, or nil.
func pm(m *mapping) *yaml.Node { return m.get("response_parsers") }

// parserFailed reports whether a parser called name is written (so a problem with it
// was already reported) even though it did not parse.
func (r *reader) parserFailed(n *yaml.Node, name string) bool {
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return true
		}
	}
	return false
}

func known(prefix string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "; " + prefix + " " + strings.Join(names, ", ")
}

// resolve follows an alias to the node it names.
func (r *reader) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// mapping is a YAML mapping read into its keys, in order.
type mapping struct {
	line    int
	order   []string
	values  map[string]*yaml.Node
	keyLine map[string]int
}

func (m *mapping) get(key string) *yaml.Node {
	if m == nil {
		return nil
	}
	return m.values[key]
}

// mapping reads n as a mapping. When allowed is given, other keys are problems. It
// returns nil (after reporting) when n is not a mapping.
func (r *reader) mapping(n *yaml.Node, what string, allowed ...string) *mapping {
	n = r.resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		line := 0
		if n != nil {
			line = n.Line
		}
		r.fail(line, "%s must be a mapping (key: value lines)", what)
		return nil
	}
	m := &mapping{line: n.Line, values: map[string]*yaml.Node{}, keyLine: map[string]int{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := r.resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			r.fail(k.Line, "a key of %s must be a plain name", what)
			continue
		}
		if prev, dup := m.keyLine[k.Value]; dup {
			r.fail(k.Line, "%s has %s twice (first at line %d)", what, k.Value, prev)
			continue
		}
		if len(allowed) > 0 && !slices.Contains(allowed, k.Value) {
			r.fail(k.Line, "%s has no key %q (it may have %s)", what, k.Value, strings.Join(allowed, ", "))
			continue
		}
		m.order = append(m.order, k.Value)
		m.values[k.Value] = r.resolve(v)
		m.keyLine[k.Value] = k.Line
	}
	return m
}

// scalar returns the text of a scalar node (a string, number or boolean as written);
// ok is false, after reporting, for anything else. Null is "" and ok.
func (r *reader) scalar(n *yaml.Node, what string) (string, bool) {
	n = r.resolve(n)
	if name, ok := bracedName(n); ok {
		r.fail(n.Line, "%s: write \"{%s}\" in quotes: unquoted, {%s} is a YAML mapping, not a placeholder", what, name, name)
		return "", false
	}
	if n == nil || n.Kind != yaml.ScalarNode {
		line := 0
		if n != nil {
			line = n.Line
		}
		r.fail(line, "%s must be a single value, not a list or mapping", what)
		return "", false
	}
	if n.ShortTag() == "!!null" {
		return "", true
	}
	return n.Value, true
}

// bracedName reports a placeholder written without quotes ({city}), which YAML reads
// as a mapping of one key with no value.
func bracedName(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.MappingNode || n.Style&yaml.FlowStyle == 0 || len(n.Content) != 2 {
		return "", false
	}
	k, v := n.Content[0], n.Content[1]
	if k.Kind != yaml.ScalarNode || k.Style != 0 || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!null" || v.Value != "" {
		return "", false
	}
	return k.Value, true
}

// field is the text of m's scalar key, "" when it is absent.
func (r *reader) field(m *mapping, key string) string {
	n := m.get(key)
	if n == nil {
		return ""
	}
	s, _ := r.scalar(n, key)
	return s
}

// text reads a scalar as a Text.
func (r *reader) text(n *yaml.Node, what string) (Text, bool) {
	s, ok := r.scalar(n, what)
	if !ok {
		return Text{}, false
	}
	n = r.resolve(n)
	return parseText(s, n.Line, n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0), true
}

func (r *reader) boolean(n *yaml.Node, what string) bool {
	n = r.resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		line := 0
		if n != nil {
			line = n.Line
		}
		r.fail(line, "%s must be true or false", what)
		return false
	}
	var b bool
	_ = n.Decode(&b)
	return b
}

func (r *reader) integer(n *yaml.Node, what string, lo, hi int) int {
	n = r.resolve(n)
	var v int
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || v < lo || v > hi {
		line := 0
		if n != nil {
			line = n.Line
		}
		r.fail(line, "%s must be a whole number from %d to %d", what, lo, hi)
		return lo
	}
	return v
}

// duration reads a timeout: a Go duration ("10s", "1m30s") or a number of seconds.
func (r *reader) duration(n *yaml.Node, what string) time.Duration {
	s, ok := r.scalar(n, what)
	if !ok {
		return DefaultTimeout
	}
	n = r.resolve(n)
	d, err := time.ParseDuration(s)
	if err != nil {
		if secs, err2 := strconv.ParseFloat(s, 64); err2 == nil && n.ShortTag() != "!!str" && secs > 0 && secs < math.MaxInt32 {
			d, err = time.Duration(secs*float64(time.Second)), nil
		}
	}
	switch {
	case err != nil || s == "":
		r.fail(n.Line, "%s must be a duration such as 10s or 2m, not %q", what, s)
	case d <= 0:
		r.fail(n.Line, "%s must be more than 0", what)
	case d > MaxTimeout:
		r.fail(n.Line, "%s must be at most %s", what, MaxTimeout)
	default:
		return d
	}
	return DefaultTimeout
}

// toolNamePattern is what MCP clients accept as a tool name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// toolDraft is a tool being read, with what its checks need.
type toolDraft struct {
	Tool
	props     []string // the input schema's property names: the placeholders allowed
	parseLine int
}

func (r *reader) tool(n *yaml.Node) *toolDraft {
	m := r.mapping(n, "a tool", "name", "title", "description", "input_schema", "annotations", "command", "http", "parse_response")
	if m == nil {
		return nil
	}
	t := &toolDraft{Tool: Tool{Line: m.line}}
	name := r.field(m, "name")
	switch {
	case m.get("name") == nil || name == "":
		r.fail(m.line, "a tool needs a name (letters, digits, '_', '-' and '.', at most 64)")
		name = ""
	case !toolNamePattern.MatchString(name):
		r.fail(m.get("name").Line, "tool name %q must be 1–64 letters, digits, '_', '-' or '.'", name)
	}
	t.Name = name
	if v := m.get("title"); v != nil {
		t.Title, _ = r.scalar(v, "title")
	}
	if v := m.get("description"); v != nil {
		t.Description, _ = r.scalar(v, "description")
	}
	t.readSchema(r, m)
	if v := m.get("annotations"); v != nil {
		t.Annotations = r.annotations(v)
	}
	cmd, hn := m.get("command"), m.get("http")
	switch {
	case cmd != nil && hn != nil:
		r.fail(m.keyLine["http"], "tool %q has both command and http: a tool runs one or the other", name)
	case cmd != nil:
		t.Command = r.command(cmd, t)
	case hn != nil:
		t.HTTP = r.http(hn, t)
	default:
		r.fail(m.line, "tool %q needs a command (argv: [program, args...]) or an http request (url: ...)", name)
	}
	if v := m.get("parse_response"); v != nil {
		t.Parse, _ = r.scalar(v, "parse_response")
		t.parseLine = v.Line
	}
	if name == "" {
		return nil
	}
	return t
}

func (t *toolDraft) readSchema(r *reader, m *mapping) {
	sn := m.get("input_schema")
	if sn == nil {
		t.InputSchema = map[string]any{"type": "object", "properties": map[string]any{}}
		return
	}
	v, ok := r.json(sn, 0)
	if !ok {
		return
	}
	schema, isMap := v.(map[string]any)
	if !isMap {
		r.fail(sn.Line, "input_schema must be a mapping such as {type: object, properties: {text: {type: string}}}")
		return
	}
	if schema["type"] != "object" {
		r.fail(sn.Line, "input_schema must have type: object (a tool takes its arguments by name)")
	}
	t.InputSchema = schema
	t.defaults = map[string]any{}
	switch props := schema["properties"].(type) {
	case nil:
	case map[string]any:
		t.props = slices.Sorted(maps.Keys(props))
		for k, p := range props {
			if pm, ok := p.(map[string]any); ok {
				if d, ok := pm["default"]; ok {
					t.defaults[k] = d
				}
			}
		}
	default:
		r.fail(sn.Line, "input_schema's properties must be a mapping from parameter names to schemas")
	}
}

// annotationKeys are the MCP tool annotations.
var annotationKeys = []string{"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

func (r *reader) annotations(n *yaml.Node) map[string]any {
	m := r.mapping(n, "annotations", annotationKeys...)
	if m == nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range m.order {
		if k == "title" {
			out[k], _ = r.scalar(m.values[k], "annotations title")
			continue
		}
		out[k] = r.boolean(m.values[k], "annotation "+k)
	}
	return out
}

// json converts a YAML node into the values encoding/json decodes to (numbers as
// json.Number), for schemas and literal parts of bodies.
func (r *reader) json(n *yaml.Node, depth int) (any, bool) {
	n = r.resolve(n)
	r.budget--
	if r.budget < 0 || depth > 64 {
		if r.budget == -1 || depth == 65 {
			r.fail(n.Line, "is nested too deeply or repeats aliases too often")
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := r.resolve(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				r.fail(k.Line, "a key must be a plain name")
				ok = false
				continue
			}
			if _, dup := out[k.Value]; dup {
				r.fail(k.Line, "key %q appears twice", k.Value)
				ok = false
				continue
			}
			v, vok := r.json(n.Content[i+1], depth+1)
			ok = ok && vok
			out[k.Value] = v
		}
		return out, ok
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for _, c := range n.Content {
			v, vok := r.json(c, depth+1)
			ok = ok && vok
			out = append(out, v)
		}
		return out, ok
	case yaml.ScalarNode:
		return r.jsonScalar(n)
	}
	r.fail(n.Line, "is not a value JSON can hold")
	return nil, false
}

func (r *reader) jsonScalar(n *yaml.Node) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		_ = n.Decode(&b)
		return b, true
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			r.fail(n.Line, "%s is not a number JSON can hold", n.Value)
			return nil, false
		}
		return json.Number(strconv.FormatInt(i, 10)), true
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			r.fail(n.Line, "%s is not a number JSON can hold", n.Value)
			return nil, false
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
	}
	return n.Value, true
}

// checkPlaceholders reports every placeholder of t that is not a property of the tool's
// input schema.
func (r *reader) checkPlaceholders(tool *toolDraft, texts ...Text) {
	for _, t := range texts {
		for _, p := range t.Parts {
			// props is sorted: a template of thousands of placeholders against thousands
			// of properties is looked up, not scanned.
			if _, ok := slices.BinarySearch(tool.props, p.Param); p.Param == "" || ok {
				continue
			}
			if len(r.problems) >= maxProblems {
				continue // not said: formatting it is the costly part
			}
			if len(tool.props) == 0 {
				r.fail(p.Line, "unknown placeholder {%s}; input_schema has no properties (add %s under input_schema properties, or write {{%s} for a literal brace)", p.Param, p.Param, p.Param)
				continue
			}
			named := tool.props
			more := ""
			if len(named) > 20 {
				named, more = named[:20], fmt.Sprintf(" and %d more", len(tool.props)-20)
			}
			r.fail(p.Line, "unknown placeholder {%s}; input_schema has %s%s", p.Param, strings.Join(named, ", "), more)
		}
	}
}

func (r *reader) command(n *yaml.Node, tool *toolDraft) *Command {
	m := r.mapping(n, "command", "argv", "stdin", "timeout")
	if m == nil {
		return nil
	}
	c := &Command{Timeout: DefaultTimeout}
	an := m.get("argv")
	switch {
	case an == nil:
		r.fail(m.line, "command needs argv: the program and its arguments, such as [wc, -w]")
	case an.Kind != yaml.SequenceNode || len(an.Content) == 0:
		r.fail(an.Line, "argv must be a non-empty list: the program, then its arguments, such as [wc, -w] (no shell runs it)")
	default:
		for i, item := range an.Content {
			t, ok := r.text(item, fmt.Sprintf("argv[%d]", i))
			if !ok {
				continue
			}
			c.Argv = append(c.Argv, t)
		}
		if len(c.Argv) > 0 {
			switch prog := c.Argv[0]; {
			case !prog.Literal():
				r.fail(prog.Line, "argv[0] is the program to run and cannot have placeholders: a call must never choose which program runs")
			case prog.String() == "":
				r.fail(prog.Line, "argv[0] must name the program to run")
			}
		}
	}
	if v := m.get("stdin"); v != nil {
		if t, ok := r.text(v, "stdin"); ok {
			c.Stdin = &t
		}
	}
	if len(c.Argv) > 0 && !r.skipCode {
		r.checkInterpreters(c.Argv, c.Stdin)
	}
	if v := m.get("timeout"); v != nil {
		c.Timeout = r.duration(v, "timeout")
	}
	texts := slices.Clone(c.Argv)
	if c.Stdin != nil {
		texts = append(texts, *c.Stdin)
	}
	r.checkPlaceholders(tool, texts...)
	return c
}

// httpMethods are the methods a template may send.
var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// reservedRequestHeaders are decided by the request itself: Host in particular would
// send the request to another virtual host than its URL names.
var reservedRequestHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "te", "trailer", "upgrade"}

func (r *reader) http(n *yaml.Node, tool *toolDraft) *HTTP {
	m := r.mapping(n, "http", "method", "url", "headers", "body", "form", "timeout")
	if m == nil {
		return nil
	}
	h := &HTTP{Method: http.MethodGet, Timeout: DefaultTimeout}
	var texts []Text
	if v := m.get("method"); v != nil {
		s, _ := r.scalar(v, "method")
		h.Method = strings.ToUpper(s)
		if !slices.Contains(httpMethods, h.Method) {
			r.fail(v.Line, "method %q is not one of %s", s, strings.Join(httpMethods, ", "))
		}
	}
	if v := m.get("url"); v == nil {
		r.fail(m.line, "http needs a url such as https://api.example.com/items/{id}")
	} else if t, ok := r.text(v, "url"); ok {
		h.URL = r.url(t)
		texts = append(texts, t)
	}
	contentType := ""
	var contentTypes []Header // every Content-Type written (names differing in case are all sent)
	if v := m.get("headers"); v != nil {
		if hm := r.mapping(v, "headers"); hm != nil {
			for _, name := range hm.order {
				line := hm.keyLine[name]
				val, ok := r.text(hm.values[name], "header "+name)
				switch {
				case !httpguts.ValidHeaderFieldName(name) || !parseText(name, line, false).Literal():
					r.fail(line, "%q is not a valid header name (placeholders cannot name headers)", name)
					continue
				case slices.Contains(reservedRequestHeaders, strings.ToLower(name)):
					r.fail(line, "header %s is decided by the request itself and cannot be set", name)
					continue
				case !ok:
					continue
				}
				for _, p := range val.Parts {
					if p.Param == "" && !httpguts.ValidHeaderFieldValue(p.Lit) {
						r.fail(line, "header %s must not contain line breaks or control characters", name)
					}
				}
				if strings.EqualFold(name, "Content-Type") {
					if !val.Literal() {
						r.fail(line, "the Content-Type header must be written out: a placeholder would let a caller decide how the body is read")
					}
					contentType = strings.ToLower(val.String())
					if val.Literal() {
						contentTypes = append(contentTypes, Header{Name: name, Value: Text{Parts: []Part{{Lit: strings.ToLower(val.Filled(""))}}, Line: line}})
					}
				}
				h.Headers = append(h.Headers, Header{Name: name, Value: val})
				texts = append(texts, val)
			}
		}
	}
	bodies := 0
	if v := m.get("body"); v != nil {
		bodies++
		if v.Kind == yaml.ScalarNode {
			if t, ok := r.text(v, "body"); ok {
				h.Body = &t
				texts = append(texts, t)
				// Only plain text has no structure a caller's value could break out of (XML,
				// JSON, a form, a SOAP envelope all have).
				if !t.Literal() && contentType != "" && !strings.HasPrefix(contentType, "text/plain") {
					r.fail(v.Line, "a body written as text is sent as it is, so placeholders could break its %s: write the body as a mapping (sent as JSON, each value encoded) or use form:, or send it as text/plain", contentType)
				} else if !t.Literal() && looksStructured(t) {
					// Sent as text/plain, it is still read as JSON or XML by servers that do
					// not look at the type: a value with a quote would add keys.
					r.fail(v.Line, "a body written as text with placeholders is sent as it is, and this one looks like JSON or XML, whose structure a caller's value could break: write the body as a mapping (sent as JSON, each value encoded) or use form:")
				}
			}
		} else if jv := r.jsonTemplate(v, 0); jv != nil {
			h.JSON = jv
			texts = append(texts, jv.texts()...)
		}
	}
	if v := m.get("form"); v != nil {
		bodies++
		if fm := r.mapping(v, "form"); fm != nil {
			for _, name := range fm.order {
				t, ok := r.text(fm.values[name], "form field "+name)
				if !ok {
					continue
				}
				if !parseText(name, fm.keyLine[name], false).Literal() {
					r.fail(fm.keyLine[name], "form field names cannot have placeholders")
				}
				h.Form = append(h.Form, FormField{Name: name, Value: t})
				texts = append(texts, t)
			}
		}
	}
	// A mapping body is JSON and a form is a form, each value encoded for it, only as
	// long as the server reads it so: under another type a form value's '&' or '='
	// would add fields ("x&role=admin" in a JSON string is a form field to a form reader).
	for _, ct := range contentTypes {
		value := ct.Value.Filled("")
		switch {
		case h.JSON != nil && !jsonContentType(value):
			r.fail(ct.Value.Line, "the body is a mapping, sent as JSON with each value encoded for JSON, so its Content-Type must be application/json or another JSON type (…+json), not %s: leave the header out, or use form: for a form", value)
		case h.Form != nil && !formContentType(value):
			r.fail(ct.Value.Line, "form: is sent as application/x-www-form-urlencoded with each value encoded for it, so its Content-Type cannot be %s: leave the header out, or write the body as a mapping for JSON", value)
		}
	}
	switch {
	case bodies > 1:
		r.fail(m.keyLine["form"], "http has both body and form: send one of them")
	case bodies == 1 && (h.Method == http.MethodGet || h.Method == http.MethodHead):
		line := m.keyLine["body"]
		if line == 0 {
			line = m.keyLine["form"]
		}
		r.fail(line, "a %s request has no body: use POST, PUT or PATCH, or put the values in the URL", h.Method)
	}
	if v := m.get("timeout"); v != nil {
		h.Timeout = r.duration(v, "timeout")
	}
	r.checkPlaceholders(tool, texts...)
	return h
}

// tableExtracts are the values of a table parser's extract (seed 002's EdgeLake
// templates): the column of a blockchain table whose distinct values are the result.
var tableExtracts = map[string]int{"unique_databases": 0, "unique_tables": 1}

// extract sets p's column from a table parser's extract, which says the column and
// uniqueness at once.
func (r *reader) extract(p *Parser, m *mapping, v *yaml.Node) {
	what, _ := r.scalar(v, "extract")
	col, ok := tableExtracts[what]
	switch {
	case !ok:
		r.fail(v.Line, "extract: %q is not known; use unique_databases (the first column's distinct values) or unique_tables (the second's), or from_column and unique", what)
	case m.get("from_column") != nil || m.get("unique") != nil:
		r.fail(v.Line, "extract says the column and uniqueness already: leave out from_column and unique, or extract")
	default:
		p.FromColumn, p.Unique = col, true
	}
}

func (r *reader) parser(name string, line int, n *yaml.Node) *Parser {
	m := r.mapping(n, "response parser "+name, "type", "pattern", "group", "all", "path", "from_column", "unique", "header", "separator", "extract")
	if m == nil {
		return nil
	}
	p := &Parser{Name: name, Line: line, Header: true}
	typ := r.field(m, "type")
	if typ == "blockchain_table" { // seed 002's name for it
		typ = ParserTable
	}
	p.Type = typ
	allowed := map[string][]string{ParserRegex: {"pattern", "group", "all"}, ParserJSON: {"path"},
		ParserTable: {"from_column", "unique", "header", "separator", "extract"}}
	keys, ok := allowed[typ]
	if !ok {
		r.fail(line, "response parser %s needs a type: regex, json or table", name)
		return nil
	}
	bad := false
	for _, k := range m.order {
		if k != "type" && !slices.Contains(keys, k) {
			r.fail(m.keyLine[k], "%s does not apply to a %s parser (it takes %s)", k, typ, strings.Join(keys, ", "))
			bad = true
		}
	}
	switch typ {
	case ParserRegex:
		pat := r.field(m, "pattern")
		if m.get("pattern") == nil || pat == "" {
			r.fail(line, "regex parser %s needs a pattern", name)
			return nil
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			r.fail(m.get("pattern").Line, "pattern does not compile: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			return nil
		}
		p.Pattern = re
		if re.NumSubexp() > 0 {
			p.Group = 1
		}
		if v := m.get("group"); v != nil {
			p.Group = r.integer(v, "group", 0, re.NumSubexp())
		}
		if v := m.get("all"); v != nil {
			p.All = r.boolean(v, "all")
		}
	case ParserJSON:
		path := r.field(m, "path")
		if m.get("path") == nil || path == "" {
			r.fail(line, "json parser %s needs a path such as $.current.temp", name)
			return nil
		}
		jp, err := jsonpath.Parse(path)
		if err != nil {
			r.fail(m.get("path").Line, "path is not a JSONPath query: %s", strings.TrimPrefix(err.Error(), "jsonpath: "))
			return nil
		}
		p.Path = jp
	case ParserTable:
		if v := m.get("from_column"); v != nil {
			p.FromColumn = r.integer(v, "from_column", 0, 1000)
		}
		if v := m.get("unique"); v != nil {
			p.Unique = r.boolean(v, "unique")
		}
		if v := m.get("header"); v != nil {
			p.Header = r.boolean(v, "header")
		}
		if v := m.get("separator"); v != nil {
			p.Separator, _ = r.scalar(v, "separator")
		}
		if v := m.get("extract"); v != nil {
			r.extract(p, m, v)
		}
	}
	if bad {
		return nil
	}
	return p
}
