package schema

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolwarden/toolwarden/internal/toolname"
)

// Limits from the MCP specification and from what models handle well.
const (
	maxNameLen         = 128
	minDescriptionLen  = 20
	longDescriptionLen = 2000
	hugeDescriptionLen = 10000
)

// paramName is the property-name rule of the major model APIs; a client that
// forwards the tool to such an API fails on other names.
var paramName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// Bounds on the findings of one tool. Discovery validates every tool a server lists
// and stores the findings, so a hostile schema (thousands of properties under a long
// name, repeated in every path and message) must not make them large.
const (
	maxFindings      = 200       // findings listed; the rest are counted in one findings_omitted
	maxFindingsBytes = 256 << 10 // the findings listed, as JSON, findings_omitted included
	omittedReserve   = 4 << 10   // room left for findings_omitted (one count per code)
	maxQuoted        = 64        // characters of a name or pointer token in a path or message
	maxPathBytes     = 512       // a finding's path
	maxMessageBytes  = 2048      // a finding's message
)

// checker collects findings for one tool: the most serious maxFindings (up to twice
// as many between trims) and how many it left out, by code.
type checker struct {
	out     []Finding
	omitted map[string]omission
}

// omission counts the findings of one code that are not listed.
type omission struct {
	n     int
	worst Severity
}

func (c *checker) add(path, code string, sev Severity, msg string) {
	c.out = append(c.out, Finding{Path: shortPath(path), Code: code, Severity: sev, Message: clipBytes(msg, maxMessageBytes)})
	if len(c.out) >= 2*maxFindings {
		SortFindings(c.out)
		c.omit(c.out[maxFindings:])
		clear(c.out[maxFindings:]) // the dropped findings' strings can be freed
		c.out = c.out[:maxFindings]
	}
}

func (c *checker) omit(fs []Finding) {
	if len(fs) > 0 && c.omitted == nil {
		c.omitted = map[string]omission{}
	}
	for _, f := range fs {
		o := c.omitted[f.Code]
		o.n++
		if o.worst == "" || f.Severity.Rank() < o.worst.Rank() {
			o.worst = f.Severity
		}
		c.omitted[f.Code] = o
	}
}

// findings sorts what was found and keeps the most serious: at most maxFindings, and
// maxFindingsBytes as JSON. What is left out is counted in a last finding,
// findings_omitted, with the severity of the worst finding it counts, so that Blocking
// and Worst say of the list what they would of every finding.
func (c *checker) findings() []Finding {
	SortFindings(c.out)
	size, kept := len("[]"), 0
	for ; kept < len(c.out) && kept < maxFindings; kept++ {
		b, err := json.Marshal(c.out[kept])
		if err != nil || size+len(b)+1 > maxFindingsBytes-omittedReserve {
			break
		}
		size += len(b) + 1
	}
	c.omit(c.out[kept:])
	clear(c.out[kept:])
	c.out = c.out[:kept]
	if len(c.omitted) == 0 {
		return c.out
	}
	codes := slices.Collect(maps.Keys(c.omitted))
	slices.SortFunc(codes, func(a, b string) int {
		oa, ob := c.omitted[a], c.omitted[b]
		return cmp.Or(cmp.Compare(oa.worst.Rank(), ob.worst.Rank()), cmp.Compare(ob.n, oa.n), cmp.Compare(a, b))
	})
	total, worst, parts := 0, Severity(""), make([]string, len(codes))
	for i, code := range codes {
		o := c.omitted[code]
		total += o.n
		if worst == "" || o.worst.Rank() < worst.Rank() {
			worst = o.worst
		}
		parts[i] = fmt.Sprintf("%d %s (%s)", o.n, code, o.worst)
	}
	return append(c.out, Finding{Path: "", Code: "findings_omitted", Severity: worst, Message: fmt.Sprintf(
		"%d more findings are not listed (a tool lists at most %d, fewer when they are long): %s. Fix those listed and validate again to see the rest.",
		total, maxFindings, strings.Join(parts, ", "))})
}

// ValidateTool checks a tool definition against the MCP rules, JSON Schema
// 2020-12 and Toolwarden's own rules (see the package documentation for the
// codes). It returns the findings sorted by SortFindings, the most serious 200
// at most (fewer when they are large), followed when some were left out by one
// findings_omitted that counts them; a clean tool gets an empty, non-nil slice.
func ValidateTool(t Tool) []Finding {
	c := &checker{out: []Finding{}}
	c.name(t.Name)
	c.description(t)
	c.scanText("/title", "title", t.Title)
	c.inputSchema(t.InputSchema)
	c.outputSchema(t.OutputSchema)
	c.annotations(t.Annotations)
	return c.findings()
}

// join is PtrJoin with each token cut to maxQuoted characters. The checks build the
// pointer of every subschema from its parent's, so a long name would otherwise be
// copied into the pointer of everything under it.
func join(ptr string, tokens ...string) string {
	for _, t := range tokens {
		ptr = PtrJoin(ptr, clipRunes(t, maxQuoted))
	}
	return ptr
}

// shortPath bounds a finding's path: each token cut to maxQuoted characters, and a
// path still over maxPathBytes keeps its first and last tokens around "/…".
func shortPath(p string) string {
	toks := strings.Split(p, "/")
	for i, t := range toks[1:] {
		if utf8.RuneCountInString(t) > maxQuoted {
			toks[i+1] = ptrEscape(clipRunes(ptrUnescape(t), maxQuoted))
		}
	}
	if n := len(toks) - 1 + sumLen(toks); n <= maxPathBytes {
		return strings.Join(toks, "/") // a new string: p, however long, is not kept
	}
	// The last token says what is at fault, the first tokens where: keep the last
	// always (at most 4*maxQuoted+3 bytes), then up to half the bytes of tokens before
	// it, then as many of the first tokens as fit.
	tail := len(toks) - 1
	size := len(toks[tail]) + 1
	for tail-1 > 1 && size+len(toks[tail-1])+1 <= maxPathBytes/2 {
		tail--
		size += len(toks[tail]) + 1
	}
	head := 1
	size += len(toks[0]) + len("/…")
	for head < tail && size+len(toks[head])+1 <= maxPathBytes {
		size += len(toks[head]) + 1
		head++
	}
	return strings.Join(toks[:head], "/") + "/…/" + strings.Join(toks[tail:], "/")
}

func sumLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}

func ptrUnescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// clipRunes cuts s to n characters, marking the cut with "…". A string cut from a
// long one is a copy, so the long one can be freed.
func clipRunes(s string, n int) string {
	i, count := 0, 0
	for i < len(s) && count < n {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		count++
	}
	if i >= len(s) {
		return s
	}
	return strings.Clone(s[:i]) + "…"
}

// clipBytes cuts s to at most n bytes, on a character boundary, marking the cut with "…".
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.Clone(s[:i]) + "…"
}

// quoteName renders a name for a message: hidden characters shown, cut to maxQuoted
// characters.
func quoteName(s string) string {
	return clipRunes(visible(clipRunes(s, maxQuoted)), maxQuoted)
}

func (c *checker) name(name string) {
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		c.add("/name", "name_length", SeverityError, "name is empty; MCP tool names are 1 to 128 characters long.")
		return
	case n > maxNameLen:
		c.add("/name", "name_length", SeverityError, fmt.Sprintf(
			"name is %d characters long; MCP allows at most %d. Ask the server's author for a shorter name.", n, maxNameLen))
	}
	var bad []string
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if ok {
			continue
		}
		q := strconv.QuoteRune(r)
		if r == ' ' || isHidden(r) || r > 0x7E {
			q = fmt.Sprintf("U+%04X", r)
		}
		if !containsString(bad, q) {
			bad = append(bad, q)
		}
	}
	if len(bad) > 0 {
		c.add("/name", "name_charset", SeverityError, fmt.Sprintf(
			"name %q contains %s; MCP tool names may only use A-Z, a-z, 0-9, \"_\", \"-\" and \".\".",
			quoteName(name), strings.Join(bad, ", ")))
	}
	if strings.Contains(name, toolname.Sep) {
		c.add("/name", "name_double_underscore", SeverityWarning, fmt.Sprintf(
			"name %q contains \"__\", which Toolwarden uses to join server and tool (server__tool); the qualified name will be hard to read and may be ambiguous.",
			quoteName(name)))
	}
	// The model reads the name with the description; a name that spells an
	// order ("ignore_all_previous_instructions") is one.
	c.nameText("/name", func() string { return "name" }, name)
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) description(t Tool) {
	d := strings.TrimSpace(scanHidden(t.Description).clean)
	c.scanText("/description", "description", t.Description)
	if d == "" {
		c.add("/description", "description_missing", SeverityError,
			"the tool has no description; the model chooses tools by their descriptions, so add one that says what the tool does, what it returns and when to use it.")
		return
	}
	n := utf8.RuneCountInString(d)
	switch {
	case sameText(d, t.Name) || sameText(d, t.Title):
		c.add("/description", "description_short", SeverityWarning,
			"description only repeats the tool's name; say what the tool does, what it returns and when to use it.")
	case n < minDescriptionLen || len(strings.Fields(d)) == 1:
		c.add("/description", "description_short", SeverityWarning, fmt.Sprintf(
			"description %q is too short to tell a model when to use the tool; say what it does, what it returns and when to use it.", quoteName(d)))
	}
	switch {
	case n > hugeDescriptionLen:
		c.add("/description", "description_long", SeverityError, fmt.Sprintf(
			"description is %d characters long (more than %d); it costs every conversation that lists the tool and can hide instructions. Shorten it.", n, hugeDescriptionLen))
	case n > longDescriptionLen:
		c.add("/description", "description_long", SeverityWarning, fmt.Sprintf(
			"description is %d characters long (more than %d); long descriptions cost tokens in every conversation. Consider shortening it.", n, longDescriptionLen))
	}
}

// sameText compares ignoring case, spaces and the separators of tool names,
// so that "get_sum", "Get Sum" and "get-sum" are the same.
func sameText(a, b string) bool {
	fold := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch r {
			case ' ', '_', '-', '.', '\t', '\n':
				return -1
			}
			return r
		}, strings.ToLower(strings.TrimSpace(s)))
	}
	fa := fold(a)
	return fa != "" && fa == fold(b)
}

// schemaSide says how the input and the output schema differ in their checks.
type schemaSide struct {
	field, code, texts string // "inputSchema", "input_schema", "input"
	use                string // what the schema is for, in messages
	why                string // why the root must be an object
}

var (
	inputSide = schemaSide{field: "inputSchema", code: "input_schema", texts: "input",
		use: "calls cannot be checked against it", why: "arguments are always an object"}
	outputSide = schemaSide{field: "outputSchema", code: "output_schema", texts: "output",
		use: "results cannot be checked against it", why: "structured content is always an object"}
)

func (c *checker) inputSchema(raw json.RawMessage) {
	if !present(raw) {
		c.add("/inputSchema", "input_schema_missing", SeverityError,
			`the tool has no inputSchema; MCP requires one, at least {"type": "object"} for a tool without parameters.`)
		return
	}
	if root, o := c.schema(raw, inputSide); o != nil {
		c.params(root, o, "/inputSchema", false, 0, nil)
	}
}

func (c *checker) outputSchema(raw json.RawMessage) {
	if present(raw) {
		c.schema(raw, outputSide)
	}
}

// schema runs the checks both schemas share: it reads as JSON, compiles, is an object
// with "type": "object" at the root, and its texts are clean. It returns the decoded
// schema and its root object (nil when the root is not an object).
func (c *checker) schema(raw json.RawMessage, side schemaSide) (any, *Object) {
	at := "/" + side.field
	root, err := Decode(raw)
	if err != nil {
		c.add(at, side.code+"_invalid", SeverityError, side.field+" cannot be read as JSON: "+err.Error())
		return nil, nil
	}
	var compiled *jsonschema.Schema
	if !surelyCompiles(root) { // compiling is the costly part of a tool's checks; its result is not kept
		s, ptr, err := compileDoc(schemaDoc(root))
		compiled = s
		switch {
		case errors.Is(err, ErrTooComplex):
			c.add(at+ptr, "schema_too_complex", SeverityError, fmt.Sprintf(
				"%s is refused, so %s: %s", side.field, side.use, strings.TrimPrefix(err.Error(), "schema: ")))
		case err != nil:
			c.add(at+ptr, side.code+"_invalid", SeverityError, fmt.Sprintf(
				"%s does not compile, so %s: %s", side.field, side.use, strings.TrimPrefix(err.Error(), "schema: ")))
		}
	}
	if hasUnsupportedPattern(root) { // rare: worth a compile that surelyCompiles skipped
		if compiled == nil && surelyCompiles(root) {
			compiled, _, _ = compileDoc(schemaDoc(root))
		}
		if compiled != nil {
			for _, ptr := range selectingPatterns(compiled) {
				c.add(at+ptr, "pattern_unsupported_selecting", SeverityError, fmt.Sprintf(
					"this pattern cannot be run by Go's regexp and decides the outcome here (under not, if, oneOf or contains, or as a patternProperties name); Toolwarden takes it as matching everything, which can refuse valid values, so %s as declared.",
					side.use))
			}
		}
	}
	o, ok := root.(*Object)
	if !ok {
		c.add(at, side.code+"_not_object", SeverityError, fmt.Sprintf(
			`%s is a JSON %s; MCP requires a schema object with "type": "object", because %s.`, side.field, jsonType(root), side.why))
		return root, nil
	}
	c.schemaTexts(root, side.texts, o, at, 0)
	if typ, ok := o.Get("type"); !ok || typ != "object" {
		path := at
		if ok {
			path += "/type"
		}
		c.add(path, side.code+"_not_object", SeverityError, fmt.Sprintf(
			`%s has %s; MCP requires "type": "object" at the root, because %s.`, side.field, describeType(typ, ok), side.why))
	}
	return root, o
}

func describeType(typ any, ok bool) string {
	if !ok {
		return "no type"
	}
	b, _ := json.Marshal(plain(typ))
	return fmt.Sprintf(`"type": %s`, b)
}

var hints = []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

func (c *checker) annotations(raw json.RawMessage) {
	const at = "/annotations"
	if !present(raw) {
		return
	}
	v, err := Decode(raw)
	if err != nil {
		c.add(at, "annotations_invalid", SeverityWarning, "annotations are not valid JSON ("+err.Error()+"); Toolwarden ignores them and treats the tool as destructive.")
		return
	}
	o, ok := v.(*Object)
	if !ok {
		c.add(at, "annotations_invalid", SeverityWarning, fmt.Sprintf(
			"annotations are a JSON %s, not an object; Toolwarden ignores them and treats the tool as destructive.", jsonType(v)))
		return
	}
	for _, h := range hints {
		x, ok := o.Get(h)
		if !ok || x == nil {
			continue
		}
		if _, isBool := x.(bool); !isBool {
			b, _ := json.Marshal(plain(x))
			c.add(join(at, h), "annotations_invalid", SeverityWarning, fmt.Sprintf(
				"%s is %s; hints must be true or false, so Toolwarden ignores this one.", h, b))
		}
	}
	if x, ok := o.Get("title"); ok && x != nil {
		if s, isStr := x.(string); isStr {
			c.scanText(join(at, "title"), "annotations title", s)
		} else {
			c.add(join(at, "title"), "annotations_invalid", SeverityWarning, "annotations title must be a string.")
		}
	}
	if ro, _ := o.m["readOnlyHint"].(bool); ro {
		if d, _ := o.m["destructiveHint"].(bool); d {
			c.add(join(at, "destructiveHint"), "annotations_contradict", SeverityWarning,
				"readOnlyHint and destructiveHint are both true; a read-only tool cannot destroy anything, so one of them is wrong. Ask the server's author which, and set the tool's risk by hand meanwhile.")
		}
	}
}

// schemaTexts walks every subschema of a schema and checks the text in it
// that a model reads: descriptions, titles, enum values, defaults, examples,
// and every other string a keyword holds ($comment, format, pattern, x-...
// and unknown keywords, with the objects under them), since clients pass the
// whole schema to the model. Property and definition names are read as text
// too (nameText); types, references and required names get only the
// hidden-characters check. It also reports patterns that Go's regexp cannot run.
func (c *checker) schemaTexts(root any, side string, o *Object, ptr string, depth int) {
	if depth > maxDepth {
		return
	}
	where := place(side, ptr)
	for _, k := range o.keys {
		v, at := o.m[k], join(ptr, k)
		what := clipRunes(k, maxQuoted) + " of " + where
		switch {
		case k == "description" || k == "title":
			if s, ok := v.(string); ok {
				c.scanText(at, what, s)
			}
		case k == "enum":
			for i, e := range o.Array("enum") {
				c.valueTexts(join(at, strconv.Itoa(i)), "enum value of "+where, e, false, 0)
			}
		case k == "const" || k == "default" || k == "examples":
			c.valueTexts(at, what, v, false, 0)
		case identifierKeywords[k]:
			c.hiddenTexts(at, what, v, 0)
		case subschemaKeywords[k]:
			// Walked below, as subschemas; what else they hold (the names in draft-07's
			// "dependencies") only names properties.
			if m, ok := v.(*Object); ok && k == "dependencies" {
				for _, name := range m.keys {
					if _, isSchema := m.m[name].(*Object); !isSchema {
						c.hiddenTexts(join(at, name), what, m.m[name], 0)
					}
				}
			}
		default: // $comment, format, pattern, x-..., unknown keywords: text a model may read
			c.valueTexts(at, what, v, true, 0)
		}
	}
	if p, ok := o.m["pattern"].(string); ok {
		c.pattern(join(ptr, "pattern"), where, p)
	}
	if pp := o.Object("patternProperties"); pp != nil {
		for _, k := range pp.keys {
			c.pattern(join(ptr, "patternProperties", k), where, k)
			c.scanText(join(ptr, "patternProperties", k), "pattern of "+where, k)
		}
	}
	// Clients hand property and definition names to the model with the rest of
	// the schema, so a name can carry an order as well as a description can.
	for _, k := range []string{"properties", "$defs", "definitions", "dependentSchemas", "dependencies"} {
		m := o.Object(k)
		for _, name := range m.Keys() {
			at := join(ptr, k, name)
			c.nameText(at, func() string {
				if k == "dependentSchemas" || k == "dependencies" {
					return fmt.Sprintf("%s name %q of %s", k, quoteName(name), where)
				}
				return "name of " + place(side, at)
			}, name)
		}
	}
	forEachSubschema(o, ptr, func(sub *Object, p string) { c.schemaTexts(root, side, sub, p, depth+1) })
}

// identifierKeywords hold types, references, identifiers and property names, not
// prose: only hidden characters are looked for in them.
var identifierKeywords = map[string]bool{"type": true, "$ref": true, "$dynamicRef": true, "$recursiveRef": true,
	"$id": true, "$anchor": true, "$dynamicAnchor": true, "$recursiveAnchor": true, "$schema": true,
	"$vocabulary": true, "required": true, "dependentRequired": true}

// subschemaKeywords hold subschemas, which forEachSubschema walks.
var subschemaKeywords = map[string]bool{"items": true, "additionalProperties": true, "unevaluatedProperties": true,
	"unevaluatedItems": true, "contains": true, "propertyNames": true, "not": true, "if": true, "then": true,
	"else": true, "contentSchema": true, "additionalItems": true, "properties": true, "patternProperties": true,
	"$defs": true, "definitions": true, "dependentSchemas": true, "dependencies": true, "allOf": true,
	"anyOf": true, "oneOf": true, "prefixItems": true}

// valueTexts checks the strings inside a JSON value (an enum entry, a default, an
// unknown keyword's value), and the keys of its objects too when keys is set.
func (c *checker) valueTexts(ptr, what string, v any, keys bool, depth int) {
	if depth > maxDepth {
		return
	}
	switch t := v.(type) {
	case string:
		c.scanText(ptr, what, t)
	case []any:
		for i, e := range t {
			c.valueTexts(join(ptr, strconv.Itoa(i)), what, e, keys, depth+1)
		}
	case *Object:
		for _, k := range t.keys {
			at := join(ptr, k)
			if keys {
				c.scanText(at, what, k)
			}
			c.valueTexts(at, what, t.m[k], keys, depth+1)
		}
	}
}

// hiddenTexts looks for hidden characters in the strings inside a JSON value, and in
// the keys of its objects.
func (c *checker) hiddenTexts(ptr, what string, v any, depth int) {
	if depth > maxDepth {
		return
	}
	switch t := v.(type) {
	case string:
		c.hiddenText(ptr, what, t)
	case []any:
		for i, e := range t {
			c.hiddenTexts(join(ptr, strconv.Itoa(i)), what, e, depth+1)
		}
	case *Object:
		for _, k := range t.keys {
			at := join(ptr, k)
			c.hiddenText(at, what, k)
			c.hiddenTexts(at, what, t.m[k], depth+1)
		}
	}
}

func (c *checker) pattern(ptr, where, p string) {
	if _, err := regexp.Compile(p); err != nil {
		c.add(ptr, "pattern_unsupported", SeverityWarning, fmt.Sprintf(
			"pattern %q of %s cannot be compiled by Go's regexp (%v); Toolwarden does not enforce it, so only the server checks it.",
			clipRunes(p, 4*maxQuoted), where, clipRunes(strings.TrimPrefix(err.Error(), "error parsing regexp: "), 4*maxQuoted)))
	}
}

// forEachSubschema calls fn for each schema object directly inside o.
func forEachSubschema(o *Object, ptr string, fn func(*Object, string)) {
	for _, k := range []string{"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
		"contains", "propertyNames", "not", "if", "then", "else", "contentSchema", "additionalItems"} {
		if sub := o.Object(k); sub != nil {
			fn(sub, join(ptr, k))
		}
	}
	for _, k := range []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"} {
		if m := o.Object(k); m != nil {
			for _, name := range m.keys {
				if sub, ok := m.m[name].(*Object); ok {
					fn(sub, join(ptr, k, name))
				}
			}
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"} {
		for i, e := range o.Array(k) {
			if sub, ok := e.(*Object); ok {
				fn(sub, join(ptr, k, strconv.Itoa(i)))
			}
		}
	}
}

// place names a schema location for people: `parameter "options.depth"`,
// `output field "temperature"`, `definition "Options"`, `input schema`.
func place(side, ptr string) string {
	unescape := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~") }
	quote := func(s string) string { return `"` + clipRunes(visible(s), 4*maxQuoted) + `"` }
	toks := strings.Split(ptr, "/")[2:] // drop "" and "inputSchema"
	var names []string
	def := ""
	for i := 0; i < len(toks); i++ {
		switch tok := toks[i]; {
		case tok == "properties" && i+1 < len(toks):
			i++
			names = append(names, clipRunes(unescape(toks[i]), maxQuoted))
		case tok == "items" && len(names) > 0:
			names[len(names)-1] += "[]"
		case (tok == "$defs" || tok == "definitions") && i+1 < len(toks):
			i++
			def, names = clipRunes(unescape(toks[i]), maxQuoted), nil
		}
	}
	noun := "parameter"
	if side == "output" {
		noun = "output field"
	}
	switch {
	case len(names) > 0 && def != "":
		return fmt.Sprintf("%s %s of definition %s", noun, quote(strings.Join(names, ".")), quote(def))
	case len(names) > 0:
		return noun + " " + quote(strings.Join(names, "."))
	case def != "":
		return "definition " + quote(def)
	}
	return side + " schema"
}

// typedKeywords are the keywords that give a property a type (or a set of
// allowed values); a property with none of them accepts anything.
var typedKeywords = []string{"type", "enum", "const", "$ref", "$dynamicRef", "oneOf", "anyOf", "allOf"}

// params checks the properties of an object schema, and recursively those of
// nested objects, array items, alternatives and definitions. outer are the schemas
// whose allOf, anyOf or oneOf o is a branch of (innermost last): they apply to the
// same value, so the properties they define count for o's required.
func (c *checker) params(root any, o *Object, ptr string, nested bool, depth int, outer []View) {
	if depth > maxDepth {
		return
	}
	props := o.Object("properties")
	for _, name := range props.Keys() {
		pp := join(ptr, "properties", name)
		where := place("input", pp)
		if !paramName.MatchString(name) {
			// A name with spaces or over 64 characters is prose, which the model
			// reads as such and no model API accepts: it blocks. Other characters
			// ("@type", "a/b") only break clients that forward the tool.
			sev, why := SeverityWarning, "clients that forward the tool to them will fail"
			if utf8.RuneCountInString(name) > 64 || strings.IndexFunc(name, unicode.IsSpace) >= 0 {
				sev, why = SeverityError, "a name with spaces or over 64 characters is text the model reads, not a name, and model APIs refuse the tool"
			}
			c.add(pp, "param_name", sev, fmt.Sprintf(
				"%s does not match ^[a-zA-Z0-9_.-]{1,64}$, which model APIs require of parameter names; %s.", where, why))
		}
		if h := scanHidden(name); h.first >= 0 {
			c.add(pp, "hidden_characters", SeverityCritical, fmt.Sprintf(
				"the name of %s contains hidden characters (%s); remove them.", where, codePoints(h.runes)))
		}
		switch p := props.m[name].(type) {
		case bool:
			if p {
				c.add(pp, "param_untyped", SeverityWarning, fmt.Sprintf(
					"%s is the schema true and accepts any value; give it a type so the model knows what to send.", where))
			}
		case *Object:
			if !hasAny(p, typedKeywords) {
				c.add(pp, "param_untyped", SeverityWarning, fmt.Sprintf(
					"%s has no type (no type, enum, const, $ref or oneOf/anyOf/allOf), so any value passes validation; add a type.", where))
			}
			if !described(root, p, pp) {
				sev := SeverityWarning
				if nested {
					sev = SeverityInfo
				}
				c.add(pp, "param_undescribed", sev, fmt.Sprintf(
					"%s has no description; the model has only its name to guess what to send.", where))
			}
			c.params(root, p, pp, true, depth+1, nil)
		}
	}
	c.required(root, o, ptr, outer)
	for _, k := range []string{"items", "additionalProperties", "unevaluatedProperties"} {
		if sub := o.Object(k); sub != nil {
			c.params(root, sub, join(ptr, k), true, depth+1, nil)
		}
	}
	// A branch's required names may be the properties beside it: "at least one of a and
	// b" is {"properties": {"a", "b"}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}.
	var branchOuter []View
	for _, k := range []string{"items", "prefixItems", "anyOf", "oneOf", "allOf"} {
		for i, e := range o.Array(k) {
			if sub, ok := e.(*Object); ok {
				var in []View
				if k != "items" && k != "prefixItems" {
					if branchOuter == nil {
						branchOuter = append(slices.Clip(outer), Resolve(root, o, ptr))
					}
					in = branchOuter
				}
				c.params(root, sub, join(ptr, k, strconv.Itoa(i)), nested || k == "items" || k == "prefixItems", depth+1, in)
			}
		}
	}
	for _, k := range []string{"$defs", "definitions"} {
		defs := o.Object(k)
		for _, name := range defs.Keys() {
			if sub, ok := defs.m[name].(*Object); ok {
				c.params(root, sub, join(ptr, k, name), true, depth+1, nil)
			}
		}
	}
}

func hasAny(o *Object, keys []string) bool {
	for _, k := range keys {
		if o.Has(k) {
			return true
		}
	}
	return false
}

// described reports whether a property has a description of its own or from
// the definition it references.
func described(root any, p *Object, ptr string) bool {
	return strings.TrimSpace(Resolve(root, p, ptr).Str("description")) != ""
}

// required reports names in "required" that no property defines, in o, its
// allOf/anyOf/oneOf branches, or the schemas outer it is a branch of (and their
// branches). Names that patternProperties or an additionalProperties schema may
// cover are left alone.
func (c *checker) required(root any, o *Object, ptr string, outer []View) {
	req := o.Array("required")
	if len(req) == 0 {
		return
	}
	known := map[string]bool{}
	addProps := func(v View) {
		if props, _ := v.Object("properties"); props != nil {
			for _, k := range props.keys {
				known[k] = true
			}
		}
	}
	for _, v := range append(slices.Clip(outer), Resolve(root, o, ptr)) {
		if v.Has("patternProperties") {
			return
		}
		if ap, _ := v.Object("additionalProperties"); ap != nil {
			return
		}
		addProps(v)
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			a, at, _ := v.Get(k)
			branches, _ := a.([]any)
			for i, e := range branches {
				if sub, ok := e.(*Object); ok {
					addProps(Resolve(root, sub, join(at, k, strconv.Itoa(i))))
				}
			}
		}
	}
	for i, e := range req {
		name, ok := e.(string)
		if !ok || known[name] {
			continue
		}
		c.add(join(ptr, "required", strconv.Itoa(i)), "required_unknown", SeverityError, fmt.Sprintf(
			"%q is listed in required but no property of that name is defined; define the property or remove it from required.", clipRunes(name, maxQuoted)))
	}
}
