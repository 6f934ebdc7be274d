package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/template"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Tool states (docs/architecture.md, State machines). services/toolstate owns the transitions; discovery
// creates tools (discovered) and moves changed ones to updating; tools.Validate then
// takes both on to validated or invalid in the same transaction.
const (
	ToolDiscovered = toolstate.Discovered
	ToolUpdating   = toolstate.Updating
)

// ToolDef is a tool as a server lists it.
type ToolDef struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage // nil when the tool declares none
	Annotations  json.RawMessage // nil when the tool has none
	Raw          json.RawMessage // the whole tool object as received
}

// Tool is a stored tool: its row (tools.Row) and when discovery saw it.
type Tool struct {
	tools.Row
	FirstSeen time.Time `db:"first_seen" json:"first_seen"`
	LastSeen  time.Time `db:"last_seen" json:"last_seen"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

const toolColumns = tools.RowColumns + `, t.first_seen, t.last_seen, t.updated_at`

// DefinitionHash is the pin of a tool definition (docs/architecture.md, State machines): SHA-256 over the canonical
// JSON of its name, title, description, input and output schema and annotations, and,
// for a template tool, the hash of what it does (template.SpecMeta in the _meta of Raw,
// as "_meta"). Key order and whitespace do not change it; any change of meaning does.
//
// It writes that JSON itself, in Marshal's order of the keys, and copies a schema that
// is already canonical (canonjson.IsCanonical) instead of decoding and re-encoding it:
// a discovery hashes every tool it lists, changed or not, and most schemas arrive as
// Go's encoding/json wrote them. The bytes are those of
// canonjson.Marshal(map[string]any{"name": ..., "inputSchema": canonical(...), ...});
// TestDefinitionHashForm holds it to them.
func DefinitionHash(d ToolDef) string {
	b := make([]byte, 0, 128+len(d.Name)+len(d.Title)+len(d.Description)+len(d.InputSchema)+len(d.OutputSchema)+len(d.Annotations))
	b = append(b, '{')
	// Only when present, so that every other tool's hash stays what it was.
	if spec := specOf(d.Raw); spec != nil {
		b = append(b, `"_meta":{`...)
		b = appendString(b, template.SpecMeta)
		b = append(b, ':')
		b = appendCanonical(b, spec)
		b = append(b, `},`...)
	}
	b = append(b, `"annotations":`...)
	b = appendCanonical(b, d.Annotations)
	b = append(b, `,"description":`...)
	b = appendString(b, d.Description)
	b = append(b, `,"inputSchema":`...)
	b = appendCanonical(b, d.InputSchema)
	b = append(b, `,"name":`...)
	b = appendString(b, d.Name)
	b = append(b, `,"outputSchema":`...)
	b = appendCanonical(b, d.OutputSchema)
	b = append(b, `,"title":`...)
	b = appendString(b, d.Title)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// specOf is the template.SpecMeta member of the _meta of the listed tool raw, or nil.
// The listing is decoded only when it names the key: most tools do not.
func specOf(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"`+template.SpecMeta+`"`)) {
		return nil
	}
	var t struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return nil
	}
	return t.Meta[template.SpecMeta]
}

// appendCanonical appends the canonical JSON of canonical(raw).
func appendCanonical(b []byte, raw json.RawMessage) []byte {
	if canonjson.IsCanonical(raw) {
		return append(b, raw...)
	}
	c, _ := canonjson.Marshal(canonical(raw))
	return append(b, c...)
}

// appendString appends s as Marshal writes a string.
func appendString(b []byte, s string) []byte {
	c, _ := canonjson.Marshal(s)
	return append(b, c...)
}

// canonical decodes raw JSON keeping numbers exact, so re-encoding sorts keys only. An
// empty value hashes as null and text that is not JSON as that text (a string).
func canonical(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	v, err := canonjson.Decode(raw)
	if err != nil {
		return string(raw)
	}
	return v
}

// Change is one difference between two versions of a tool definition.
type Change struct {
	Kind     string `json:"kind"`           // parameter_added, parameter_removed, parameter_retyped, parameter_required, parameter_optional, parameter_changed, description, title, behaviour, input_schema, output_schema, annotations, notation, more
	Path     string `json:"path,omitempty"` // a parameter's, "/o/b" for b within object parameter o
	Message  string `json:"message"`
	Breaking bool   `json:"breaking"`
}

// A server chooses its titles and parameter names, of any length and number, and the
// changes are stored with every version and shown to guests: a change quotes at most
// MaxChangeName bytes of a name, says at most MaxChangeMessage, and a version keeps
// MaxChanges of them and one counting the rest.
const (
	MaxChangeName    = 200
	MaxChangeMessage = 1024
	MaxChanges       = 50
)

// clipName is a title or parameter name as a change quotes it.
func clipName(s string) string { return textcheck.Clip(s, MaxChangeName-len(cutMark), cutMark) }

const cutMark = "…"

// ClipChanges bounds changes as Diff does: each message and path clipped, at most
// MaxChanges kept and one "and N more changes" after them, breaking when any left out is.
// The pages apply it to changes stored before Diff bounded them; a list it bounded
// already comes back the same.
func ClipChanges(cs []Change) []Change {
	if len(cs) == 0 {
		return cs
	}
	n := min(len(cs), MaxChanges)
	out := make([]Change, 0, n+1)
	for _, c := range cs[:n] {
		c.Message = textcheck.Clip(c.Message, MaxChangeMessage-len(cutMark), cutMark)
		c.Path = textcheck.Clip(c.Path, 1+MaxChangeName-len(cutMark), cutMark)
		out = append(out, c)
	}
	switch rest := cs[n:]; {
	case len(rest) == 1 && rest[0].Kind == "more":
		m := rest[0]
		m.Message = textcheck.Clip(m.Message, MaxChangeMessage-len(cutMark), cutMark)
		out = append(out, m)
	case len(rest) == 1:
		out = append(out, Change{Kind: "more", Message: "and 1 more change", Breaking: rest[0].Breaking})
	case len(rest) > 1:
		out = append(out, Change{Kind: "more", Message: fmt.Sprintf("and %d more changes", len(rest)),
			Breaking: slices.ContainsFunc(rest, func(c Change) bool { return c.Breaking })})
	}
	return out
}

// Diff lists what changed from old to new; a change is breaking when a caller that
// worked with old could fail with new (removed or retyped parameter, newly required one,
// at any depth, or input schema keywords that can refuse arguments accepted before:
// inputDiff.refuses). The list is bounded by ClipChanges.
func Diff(old, new ToolDef) []Change {
	var out []Change
	if old.Title != new.Title {
		out = append(out, Change{Kind: "title", Message: fmt.Sprintf("title changed from %q to %q", clipName(old.Title), clipName(new.Title))})
	}
	if old.Description != new.Description {
		out = append(out, Change{Kind: "description", Message: "description changed"})
	}
	switch a, b := specOf(old.Raw), specOf(new.Raw); {
	case a != nil && !jsonEqual(a, b):
		// What a template tool does (its command, request or parser) is not in what it
		// lists: a GET made a DELETE changes nothing else.
		out = append(out, Change{Kind: "behaviour", Breaking: true,
			Message: "what the template tool does changed (its command, request or output parser)"})
	case a == nil && b != nil:
		// Stored before what a template tool does was hashed: the new version says why.
		out = append(out, Change{Kind: "behaviour",
			Message: "what the template tool does (its command, request and output parser) is now part of its definition"})
	}
	out = append(out, diffInput(old.InputSchema, new.InputSchema)...)
	if !jsonEqual(old.OutputSchema, new.OutputSchema) {
		out = append(out, Change{Kind: "output_schema", Message: "output schema changed"})
	}
	if !jsonEqual(old.Annotations, new.Annotations) {
		out = append(out, Change{Kind: "annotations", Message: "annotations changed"})
	}
	return ClipChanges(out)
}

// notationChange is the change of a definition whose hash changed though Diff found
// nothing: only how it writes a value (1.0 for 1, 1e-05 for 0.00001), which the pin,
// a hash of the text, tells apart.
var notationChange = Change{Kind: "notation",
	Message: "how the definition writes a value changed (a number's notation, such as 1.0 for 1), not what it means"}

// Input schemas come from servers, which may be hostile: Diff decodes each once, looks
// at most maxDiffDepth schemas deep (parameters in parameters, items, ...) and compares
// at most maxDiffSchemas nested schemas; a difference it does not look into counts as
// breaking.
const (
	maxDiffDepth   = 8
	maxDiffSchemas = 10_000
)

// inputDiff collects the changes between two input schemas.
type inputDiff struct {
	out  []Change
	work int // nested schemas compared so far
	// formats: the new schema's dialect is older than 2019-09, where format is checked
	// (draft-04 to draft-07, as the schema compiler honours $schema), not only described.
	formats bool
}

// diffInput lists the parameters removed, retyped, added, made required or optional,
// or otherwise changed, at any depth down to maxDiffDepth (a parameter b of an object
// parameter o is /o/b), then an input_schema change when the schema's other keywords
// changed (or when nothing else explains a difference, such as required reordered).
func diffInput(old, new json.RawMessage) []Change {
	o, n := canonical(old), canonical(new)
	if same(o, n) {
		return nil
	}
	var d inputDiff
	om, oOK := schemaOf(o)
	nm, nOK := schemaOf(n)
	if !oOK || !nOK {
		return []Change{{Kind: "input_schema", Breaking: true, Message: "input schema changed (it is not a JSON object)"}}
	}
	if v, _ := nm["$schema"].(string); strings.Contains(v, "draft-0") {
		d.formats = true
	}
	d.object("", om, nm, 0)
	switch {
	case !keywordsEqual(om, nm):
		c := Change{Kind: "input_schema", Message: "input schema changed"}
		if d.refuses(om, nm, 0) {
			c.Breaking, c.Message = true, "input schema changed: it can refuse arguments it accepted before"
		}
		d.out = append(d.out, c)
	case len(d.out) == 0:
		d.out = append(d.out, Change{Kind: "input_schema", Message: "input schema changed"})
	}
	return d.out
}

// object lists the changes to the properties and required list of an object schema
// whose parameter path is prefix ("" for the input schema itself). A name newly
// required is breaking whether or not properties declares it.
func (d *inputDiff) object(prefix string, old, new map[string]any, depth int) {
	op, or := props(old)
	np, nr := props(new)
	// The path and the name a message quotes, each clipped once.
	path := func(name string) (string, string) {
		label := name
		if prefix != "" {
			label = prefix[1:] + "/" + name
		}
		return prefix + "/" + clipName(name), clipName(label)
	}
	for _, name := range slices.Sorted(maps.Keys(op)) {
		p, label := path(name)
		n, ok := np[name]
		switch {
		case !ok:
			d.out = append(d.out, Change{Kind: "parameter_removed", Path: p, Breaking: true,
				Message: fmt.Sprintf("parameter %q was removed", label)})
		case typeOf(op[name]) != typeOf(n):
			d.out = append(d.out, Change{Kind: "parameter_retyped", Path: p, Breaking: true,
				Message: fmt.Sprintf("parameter %q changed type from %s to %s", label, typeOf(op[name]), typeOf(n))})
		case !same(op[name], n):
			d.changed(p, label, op[name], n, depth+1)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(np)) {
		if _, ok := op[name]; !ok {
			p, label := path(name)
			c := Change{Kind: "parameter_added", Path: p, Message: fmt.Sprintf("parameter %q was added", label)}
			if nr[name] {
				c.Breaking = true
				c.Message = fmt.Sprintf("required parameter %q was added", label)
			}
			d.out = append(d.out, c)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(nr)) {
		_, before := op[name]
		_, now := np[name]
		if !or[name] && (before || !now) { // a declared parameter added required is parameter_added above
			p, label := path(name)
			c := Change{Kind: "parameter_required", Path: p, Breaking: true,
				Message: fmt.Sprintf("parameter %q is now required", label)}
			if !now {
				c.Message = fmt.Sprintf("parameter %q is now required (it is not declared)", label)
			}
			d.out = append(d.out, c)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(or)) {
		_, before := op[name]
		_, now := np[name]
		if !nr[name] && (now || !before) { // a parameter removed is parameter_removed above
			p, label := path(name)
			d.out = append(d.out, Change{Kind: "parameter_optional", Path: p,
				Message: fmt.Sprintf("parameter %q is now optional", label)})
		}
	}
}

// changed lists how a parameter of the same type in both versions changed: itself
// (parameter_changed, breaking when its keywords can refuse a value they accepted),
// then the parameters nested in it when it is an object.
func (d *inputDiff) changed(path, label string, old, new any, depth int) {
	c := Change{Kind: "parameter_changed", Path: path, Message: fmt.Sprintf("parameter %q changed", label)}
	om, oOK := schemaOf(old)
	nm, nOK := schemaOf(new)
	switch {
	case depth > maxDiffDepth || d.work >= maxDiffSchemas:
		c.Breaking, c.Message = true, fmt.Sprintf("parameter %q changed (too deeply nested or too large to compare, so counted as breaking)", label)
		d.out = append(d.out, c)
		return
	case !oOK || !nOK:
		c.Breaking = true
		d.out = append(d.out, c)
		return
	}
	d.work++
	if d.refuses(om, nm, depth) {
		c.Breaking, c.Message = true, fmt.Sprintf("parameter %q changed: it can refuse values it accepted before", label)
	}
	at := len(d.out)
	if !keywordsEqual(om, nm) {
		d.out = append(d.out, c)
	}
	d.object(path, om, nm, depth)
	if len(d.out) == at { // e.g. a nested required list reordered
		d.out = append(d.out, c)
	}
}

// validating are the JSON Schema keywords (draft 4 to 2020-12) that can refuse a value;
// the others (title, description, default, examples, deprecated, $comment, and keywords
// JSON Schema does not define) only describe, so changing them breaks no caller. format
// refuses too under a dialect before 2019-09 (inputDiff.formats), and $schema, which
// chooses the dialect, counts as refusing when it names another dialect.
var validating = map[string]bool{
	"type": true, "enum": true, "const": true, "multipleOf": true, "maximum": true, "exclusiveMaximum": true,
	"minimum": true, "exclusiveMinimum": true, "maxLength": true, "minLength": true, "pattern": true,
	"maxItems": true, "minItems": true, "uniqueItems": true, "maxContains": true, "minContains": true,
	"contains": true, "items": true, "prefixItems": true, "additionalItems": true, "unevaluatedItems": true,
	"maxProperties": true, "minProperties": true, "additionalProperties": true, "patternProperties": true,
	"unevaluatedProperties": true, "propertyNames": true, "dependentRequired": true, "dependentSchemas": true,
	"dependencies": true, "allOf": true, "anyOf": true, "oneOf": true, "not": true, "if": true, "then": true,
	"else": true, "$ref": true, "$dynamicRef": true, "$recursiveRef": true, "$defs": true, "definitions": true,
}

// refuses reports whether a schema whose keywords (properties and required aside, which
// Diff compares parameter by parameter) went from old to new can refuse a value old
// accepted. The rule is simple and cautious: type refuses when it allows fewer types
// (integer within number); additionalProperties and items when they turn false, or from
// accepting anything into a schema, or into a schema that refuses (schemaRefuses); any
// other validating keyword when it is added or changed, never when it is removed; a
// describing keyword never.
func (d *inputDiff) refuses(old, new map[string]any, depth int) bool {
	for k, n := range new {
		o, had := old[k]
		// $schema chooses what the other keywords mean (format checked or not, say).
		if !validating[k] && k != "$schema" && (k != "format" || !d.formats) || (had && same(o, n)) {
			continue
		}
		switch k {
		case "$schema":
			if dialect(o) != dialect(n) {
				return true
			}
		case "type":
			if typesNarrowed(o, n) {
				return true
			}
		case "additionalProperties", "items":
			if !acceptsAll(n) && (acceptsAll(o) || n == false || d.schemaRefuses(o, n, depth+1)) {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// schemaRefuses is refuses for two schemas that differ, counting a property removed or
// retyped or a name newly required as refusing, as Diff does for parameters.
func (d *inputDiff) schemaRefuses(old, new any, depth int) bool {
	if depth > maxDiffDepth || d.work >= maxDiffSchemas {
		return true
	}
	d.work++
	om, oOK := schemaOf(old)
	nm, nOK := schemaOf(new)
	if !oOK || !nOK || d.refuses(om, nm, depth) {
		return true
	}
	op, or := props(om)
	np, nr := props(nm)
	for name := range nr {
		if !or[name] {
			return true
		}
	}
	for name, o := range op {
		n, ok := np[name]
		if !ok || typeOf(o) != typeOf(n) || (!same(o, n) && d.schemaRefuses(o, n, depth+1)) {
			return true
		}
	}
	return false
}

// dialect is the JSON Schema dialect a $schema value names, as the schema compiler reads
// it: none is 2020-12 (the MCP default).
func dialect(v any) string {
	s, _ := v.(string)
	for _, d := range []string{"2020-12", "2019-09", "draft-07", "draft-06", "draft-04"} {
		if strings.Contains(s, d) {
			return d
		}
	}
	if s == "" {
		return "2020-12"
	}
	return s
}

// schemaOf is a decoded schema as an object; ok is false when it is present but not an
// object (true, false, or text that is not JSON).
func schemaOf(v any) (m map[string]any, ok bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case map[string]any:
		return x, true
	}
	return nil, false
}

// props returns an object schema's properties and its required set.
func props(m map[string]any) (map[string]any, map[string]bool) {
	p, _ := m["properties"].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	req := map[string]bool{}
	r, _ := m["required"].([]any)
	for _, x := range r {
		if s, ok := x.(string); ok {
			req[s] = true
		}
	}
	return p, req
}

// keywordsEqual reports whether two object schemas agree on every keyword but
// properties and required.
func keywordsEqual(a, b map[string]any) bool {
	for k, v := range a {
		if w, ok := b[k]; k != "properties" && k != "required" && (!ok || !same(v, w)) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; k != "properties" && k != "required" && !ok {
			return false
		}
	}
	return true
}

// acceptsAll reports whether a decoded subschema is absent, true or {}.
func acceptsAll(v any) bool {
	m, isMap := v.(map[string]any)
	return v == nil || v == true || (isMap && len(m) == 0)
}

// typesNarrowed reports whether a type keyword went from old to new allowing fewer
// types (absent allows all; integer is within number).
func typesNarrowed(old, new any) bool {
	n := typeSet(new)
	if n == nil {
		return false
	}
	o := typeSet(old)
	if o == nil {
		return true
	}
	for t := range o {
		if !n[t] && (t != "integer" || !n["number"]) {
			return true
		}
	}
	return false
}

// typeSet is the types a decoded type keyword allows; nil when absent (any type).
func typeSet(v any) map[string]bool {
	if v == nil {
		return nil
	}
	set := map[string]bool{}
	switch t := v.(type) {
	case string:
		set[t] = true
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				set[s] = true
			}
		}
	}
	return set
}

// typeOf is a decoded property's declared type as text ("string", "[integer null]", "any").
func typeOf(v any) string {
	m, _ := v.(map[string]any)
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		parts := make([]string, len(t))
		for i, x := range t {
			parts[i] = fmt.Sprint(x)
		}
		slices.Sort(parts)
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "any"
}

// same reports whether two values canonical decoded are the same JSON, numbers compared
// by value (numberEqual): the stored definition Diff compares a listing against is read
// back from jsonb, which writes 1e-05 as 0.00001 and 1E+2 as 100.
func same(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numberEqual(string(x), string(y))
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// jsonEqual reports whether two JSON texts are the same JSON, as same does.
func jsonEqual(a, b json.RawMessage) bool {
	return bytes.Equal(a, b) || same(canonical(a), canonical(b))
}

// numberEqual reports whether two JSON numbers (as json.Number holds them: valid JSON
// number text) have the same value, whatever their notation: 1e-05, 0.00001 and
// 10.0E-6 are equal, and -0 is 0. Each is reduced to its sign, its significant digits
// and the power of ten of the last, in time linear in its text: the exponent is
// compared as big.Int only when it does not fit an int64 (listings are not bounded by
// the validator's numberProblem), and no value is ever expanded (1e999999 would be a
// million digits).
func numberEqual(a, b string) bool {
	if a == b {
		return true
	}
	an, ad, ae, aBig := decimal(a)
	bn, bd, be, bBig := decimal(b)
	if ad != bd || an != bn {
		return false
	}
	if ad == "" { // both zero
		return true
	}
	if aBig == nil && bBig == nil {
		return ae == be
	}
	if aBig == nil {
		aBig = big.NewInt(ae)
	}
	if bBig == nil {
		bBig = big.NewInt(be)
	}
	return aBig.Cmp(bBig) == 0
}

// decimal is the JSON number n as digits × 10^exp with digits free of leading and
// trailing zeros ("" for zero, whose sign is then false), exp as big when it does not
// fit an int64.
func decimal(n string) (neg bool, digits string, exp int64, bigExp *big.Int) {
	if strings.HasPrefix(n, "-") {
		neg, n = true, n[1:]
	}
	mant, expText, _ := strings.Cut(strings.ToLower(n), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits = strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return false, "", 0, nil
	}
	shift := int64(len(digits)-len(trimmed)) - int64(len(frac))
	digits = trimmed
	if expText == "" {
		return neg, digits, shift, nil
	}
	if e, err := strconv.ParseInt(expText, 10, 64); err == nil && e < math.MaxInt64/2 && e > math.MinInt64/2 {
		return neg, digits, e + shift, nil
	}
	bigExp, _ = new(big.Int).SetString(strings.TrimPrefix(expText, "+"), 10)
	if bigExp == nil { // not JSON number text; json.Number never holds such
		bigExp = new(big.Int)
	}
	return neg, digits, 0, bigExp.Add(bigExp, big.NewInt(shift))
}

// Discovery is one completed tools/list sweep to store.
type Discovery struct {
	Trigger   string // connect, manual, list_changed, import
	Actor     audit.Actor
	StartedAt time.Time
	Pages     int
	Tools     []ToolDef
	Resources []Resource // nil: not listed (no capability or the list failed)
	Prompts   []Prompt
	// Fingerprint is that of the Connection the list was fetched with; when set, a list
	// whose server's settings changed meanwhile is not stored (ErrDiscoverySuperseded).
	Fingerprint string
	// LeftOut counts the listed tools that could not be stored (their names); the
	// first few are in LeftOutNames as "name: why", shown with the run.
	LeftOut      int
	LeftOutNames []string
	// Listed is HashListing(Tools) when the caller computed it already (the session
	// manager does, to check calls against it): hashing is most of a large list's cost.
	Listed []ListedTool
	// Seq is ListingSeq taken as the listing began; when set, a list begun before the
	// one stored (on another replica) is not stored (ErrDiscoveryOvertaken).
	Seq int64
}

// ListingSeq numbers a listing of a server as it begins (Discovery.Seq): the numbers
// order listings across replicas, whose clocks may differ.
func (s *Service) ListingSeq(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `/* registry.ListingSeq */ SELECT nextval('discovery_listing_seq')`).Scan(&n)
	return n, err
}

// MaxToolsPerServer is the most tools stored for one server, listed now or not: a
// server that lists fresh names on every reconnect would otherwise add rows (and their
// versions and history) forever. It is well above the largest listings measured
// (docs/architecture.md, Performance: 10,000 tools).
const MaxToolsPerServer = 20_000

// maxToolsPerServer is MaxToolsPerServer; tests lower it.
var maxToolsPerServer = MaxToolsPerServer

// ErrTooManyTools: storing the list would pass maxToolsPerServer. Its Withf message
// gives the numbers.
var ErrTooManyTools = fault.Upstream("too_many_tools", "the server lists more tools than Toolwarden stores for one server").About("server")

// ErrDiscoverySuperseded: the server's connection settings changed while its tools were
// listed, so the list may be another endpoint's. The session reconnects on the change
// and discovers again.
var ErrDiscoverySuperseded = fault.Stale("discovery_superseded", "the server's settings changed during the discovery, so its list was not stored; a new discovery runs with the new settings").About("server")

// ErrDiscoveryOvertaken: a listing of the server begun after this one (by another
// session: another replica's, or an import's) was stored first; the older list is not
// stored over it, and no run is recorded (the newer list's run is the server's last).
// The result then describes what is stored: that run, and the tools it left available.
var ErrDiscoveryOvertaken = fault.Stale("discovery_overtaken", "a newer listing of the server, begun after this one by another session (another replica's, or an import's), was stored first and is the server's list now; this older list was not stored").About("server")

// DiscoveryResult counts what a discovery changed (docs/api.md: POST .../discover).
type DiscoveryResult struct {
	RunID     int64    `json:"run_id"`
	Added     int      `json:"added"`
	Updated   int      `json:"updated"`
	Unchanged int      `json:"unchanged"`
	Removed   int      `json:"removed"`
	Total     int      `json:"total"`
	Pages     int      `json:"pages"`
	Changed   []string `json:"changed,omitempty"` // names of added, updated and removed tools (first 50)
	Validated int      `json:"validated"`         // tools whose new definition was validated now
	Invalid   int      `json:"invalid"`           // of those, tools with critical or error findings
	LeftOut   int      `json:"left_out"`          // listed tools that could not be stored (Discovery.LeftOut)
}

// ApplyDiscovery stores the complete tool list of a server in one transaction: new tools
// are inserted as discovered, changed ones get a new version and move to updating,
// both are then validated (→ validated or invalid, services/toolstate), missing ones are
// marked unavailable (never deleted), and the run, its audit entry and events commit
// with them. Callers pass only complete lists; a failed or partial
// fetch goes to RecordDiscoveryFailure and changes no tool. A list whose new tools would
// take the server past MaxToolsPerServer is stored as a failed run (ErrTooManyTools).
// A transaction lost to a deadlock, a serialization failure or a tool moved meanwhile
// runs again from scratch (retryDiscovery).
func (s *Service) ApplyDiscovery(ctx context.Context, serverID string, d Discovery) (DiscoveryResult, error) {
	if !uuidtext.Canonical(serverID) {
		return DiscoveryResult{}, ErrNotFound
	}
	// Hashed once for every attempt; a name listed with different definitions is left
	// out of the store and reported with the run.
	d = withClashes(d)
	var res DiscoveryResult
	err := retryDiscovery(ctx, func() error {
		var err error
		res, err = s.applyDiscovery(ctx, serverID, d)
		return err
	})
	if errors.Is(err, ErrDiscoveryOvertaken) {
		return res, err // res is what is stored: the newer listing's
	}
	if err != nil {
		return DiscoveryResult{}, fmt.Errorf("registry: discovery of %s: %w", serverID, err)
	}
	return res, nil
}

// discoveryAttempts bounds how often ApplyDiscovery runs its transaction.
const discoveryAttempts = 3

// retryDiscovery runs attempt until it succeeds, fails in a way running it again cannot
// fix, or has run discoveryAttempts times. The list a server sent is still what it
// offers: losing a race with a person's change or another transaction's locks must not
// make the run fail (and wait for the next list) when reading the tools again succeeds.
func retryDiscovery(ctx context.Context, attempt func() error) error {
	var err error
	for range discoveryAttempts {
		if err = attempt(); err == nil || !discoveryRetryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// discoveryRetryable reports whether err ended a discovery's transaction that may
// succeed from a fresh read: a deadlock's victim or a serialization failure
// (db.Retryable), or a tool that was no longer in the state the discovery read
// (toolstate.Moved: a conflict about a tool with the kind's default code; an illegal
// transition has its own code and would fail the same way again).
func discoveryRetryable(err error) bool {
	if db.Retryable(err) {
		return true
	}
	var fe *fault.Error
	return errors.As(err, &fe) && fe.Kind == fault.KindConflict && fe.Subject == "tool" && fe.Code == fault.KindConflict.String()
}

// applyDiscovery is one attempt of ApplyDiscovery: it reads the stored tools and writes
// the difference in one transaction.
func (s *Service) applyDiscovery(ctx context.Context, serverID string, d Discovery) (DiscoveryResult, error) {
	var res DiscoveryResult
	superseded, overtaken := false, false
	var tooMany *fault.Error
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		// The row lock serializes discoveries of one server across sessions and replicas.
		sv, err := getServer(ctx, tx, serverID, true)
		if err != nil {
			return err
		}
		name := sv.Name
		// Settings changed while the list was fetched (a new URL, say): the list may be
		// the old endpoint's, so only the run is recorded. The change reconnects the
		// session, which discovers again.
		if d.Fingerprint != "" {
			now, err := s.open(draftOf(sv))
			if err != nil {
				return err
			}
			if now.Fingerprint != d.Fingerprint {
				superseded = true
				// Stored as a failed run saying so.
				res.RunID, err = insertFailedRun(ctx, tx, serverID, d, ErrDiscoverySuperseded.Message)
				return err
			}
		}
		// Lists are stored in the order their listings began, whichever commits first.
		if d.Seq != 0 {
			tag, err := tx.Exec(ctx, `/* registry.ApplyDiscovery.order */
				UPDATE mcp_servers SET listing_seq = $2 WHERE id = $1 AND listing_seq < $2`, serverID, d.Seq)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				// The list stored is the newer listing's: its run and the tools it left are
				// what this discovery found out, and the pages showing this one's progress
				// hear that it ended.
				overtaken = true
				if err := tx.QueryRow(ctx, `/* registry.ApplyDiscovery.overtaken */
					SELECT coalesce((SELECT max(id) FROM discovery_runs WHERE server_id = $1 AND status = 'succeeded'), 0),
						(SELECT count(*)::int FROM mcp_tools WHERE server_id = $1 AND available)`, serverID).Scan(&res.RunID, &res.Total); err != nil {
					return err
				}
				res.Unchanged, res.Pages = res.Total, d.Pages
				_, err := events.DiscoveryCompleted.Publish(ctx, tx, ServersTopic, events.DiscoveryResult{ServerID: serverID, Server: name,
					Trigger: d.Trigger, RunID: res.RunID, Unchanged: res.Total, Total: res.Total})
				return err
			}
		}
		// What the comparison needs of each stored tool; the definitions themselves
		// are read only for the tools that changed (applyTools).
		rows, err := tx.Query(ctx, `/* registry.ApplyDiscovery.load */
			SELECT id::text, name, status, available, definition_hash, version_major, version_minor
			FROM mcp_tools WHERE server_id = $1`, serverID)
		if err != nil {
			return err
		}
		existing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (storedTool, error) {
			var t storedTool
			err := r.Scan(&t.ID, &t.Name, &t.Status, &t.Available, &t.DefinitionHash, &t.VersionMajor, &t.VersionMinor)
			return t, err
		})
		if err != nil {
			return err
		}
		byName := make(map[string]*storedTool, len(existing))
		for i := range existing {
			byName[existing[i].Name] = &existing[i]
		}
		// Past the cap the whole list is refused, as a failed run saying so. Pruning
		// unlisted tools instead would delete their history and usage (the foreign keys
		// to mcp_tools cascade) and unlink their executions; refusing keeps all of it
		// and still bounds the rows.
		// A list adding no rows passes however many are stored (a server over the bound
		// before it existed is still discovered).
		if fresh := newNames(d.Listed, byName); fresh > 0 && len(byName)+fresh > maxToolsPerServer {
			tooMany = ErrTooManyTools.Withf("the list has %d new tools and %d are stored (listed now or not); a server may have at most %d: "+
				"nothing was stored. Check why the server lists so many names; deleting the server and adding it again drops the tools it no longer lists",
				fresh, len(byName), maxToolsPerServer)
			res.RunID, err = insertFailedRun(ctx, tx, serverID, d, tooMany.Message)
			return err
		}
		res, err = s.applyTools(ctx, tx, serverID, name, d, byName)
		if err != nil {
			return err
		}
		res.LeftOut = d.LeftOut
		leftOut := leftOutNames(d)
		if err := tx.QueryRow(ctx, `/* registry.ApplyDiscovery.run */
			INSERT INTO discovery_runs (server_id, trigger, actor, status, pages, added, updated, unchanged, removed, started_at,
				left_out, left_out_names)
			VALUES ($1, $2, $3, 'succeeded', $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
			serverID, d.Trigger, d.Actor.Name, d.Pages, res.Added, res.Updated, res.Unchanged, res.Removed, d.StartedAt,
			d.LeftOut, leftOut).Scan(&res.RunID); err != nil {
			return err
		}
		if d.Resources != nil || d.Prompts != nil {
			if _, err := tx.Exec(ctx, `/* registry.ApplyDiscovery.lists */
				UPDATE mcp_servers SET resources = COALESCE($2::jsonb, resources), prompts = COALESCE($3::jsonb, prompts) WHERE id = $1`,
				serverID, nilIfNil(d.Resources), nilIfNil(d.Prompts)); err != nil {
				return err
			}
		}
		changedAny := res.Added+res.Updated+res.Removed > 0
		if changedAny || d.Trigger == "manual" || d.Trigger == "import" {
			p := map[string]any{"trigger": d.Trigger, "added": res.Added, "updated": res.Updated, "unchanged": res.Unchanged,
				"removed": res.Removed, "changed": res.Changed}
			if d.LeftOut > 0 {
				p["left_out"], p["left_out_names"] = d.LeftOut, leftOut
			}
			if _, err := audit.Append(ctx, tx, audit.Entry{Actor: d.Actor, Action: "server.discover", TargetType: "server",
				TargetID: serverID, TargetName: name, Payload: p}); err != nil {
				return err
			}
		}
		payload := events.DiscoveryResult{ServerID: serverID, Server: name, Trigger: d.Trigger, RunID: res.RunID,
			Added: res.Added, Updated: res.Updated, Unchanged: res.Unchanged, Removed: res.Removed, Total: res.Total}
		if _, err := events.DiscoveryCompleted.Publish(ctx, tx, ServersTopic, payload); err != nil {
			return err
		}
		if changedAny {
			if _, err := events.ToolsChanged.Publish(ctx, tx, ToolsTopic, payload); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && superseded {
		return res, ErrDiscoverySuperseded
	}
	if err == nil && overtaken {
		return res, ErrDiscoveryOvertaken
	}
	if err == nil && tooMany != nil {
		return res, tooMany
	}
	return res, err
}

// newNames counts the names in list (distinct, HashListing's) that are not stored yet.
func newNames(list []ListedTool, byName map[string]*storedTool) int {
	fresh := 0
	for _, l := range list {
		if _, ok := byName[l.Def.Name]; !ok {
			fresh++
		}
	}
	return fresh
}

func nilIfNil[T any](v []T) any {
	if v == nil {
		return nil
	}
	return v
}

// storedTool is what discovery compares of a stored tool; def is read only when needed.
type storedTool struct {
	ID             string
	Name           string
	Status         string
	Available      bool
	DefinitionHash string
	VersionMajor   int
	VersionMinor   int
	def            ToolDef
}

// applyTools computes the difference and writes it, with the validation of every new
// definition, through tools.StoreDiscovery (one COPY for new tools, one batch for the
// rest), then one COPY for the new versions. Hashing is the only work done for a tool
// listed unchanged.
func (s *Service) applyTools(ctx context.Context, tx pgx.Tx, serverID, server string, d Discovery, byName map[string]*storedTool) (DiscoveryResult, error) {
	res := DiscoveryResult{Total: len(d.Tools), Pages: d.Pages}
	note := func(name string) {
		if len(res.Changed) < 50 {
			res.Changed = append(res.Changed, name)
		}
	}
	actor := d.Actor.Name
	if actor == "" {
		actor = "system"
	}
	list := d.Listed
	if list == nil {
		list = HashListing(d.Tools)
	}
	seen := make(map[string]bool, len(list))
	for _, l := range list {
		seen[l.Def.Name] = true
	}
	// A changed tool's old definition is diffed against the new one, and a tool still
	// awaiting validation is validated: read those definitions, and only those.
	needs := make(map[string]bool)
	var changedIDs, changedHashes []string
	for _, l := range list {
		if cur, ok := byName[l.Def.Name]; ok && cur.DefinitionHash != l.Hash {
			needs[cur.ID] = true
			changedIDs, changedHashes = append(changedIDs, cur.ID), append(changedHashes, l.Hash)
		}
	}
	for _, cur := range byName {
		if awaitsValidation(cur.Status) {
			needs[cur.ID] = true
		}
	}
	if err := readDefinitions(ctx, tx, slices.Collect(maps.Keys(needs)), byName); err != nil {
		return res, err
	}
	// A changed tool going back to a definition it had before (a server flipping it)
	// stores its new version without the definition: read through the row that has it.
	known, err := storedHashes(ctx, tx, changedIDs, changedHashes)
	if err != nil {
		return res, err
	}
	// The diffs of changed tools, on every CPU too.
	diffs := make([][]Change, len(list))
	parallel(len(list), func(i int) {
		if cur, ok := byName[list[i].Def.Name]; ok && cur.DefinitionHash != list[i].Hash {
			diffs[i] = Diff(cur.def, list[i].Def)
			if len(diffs[i]) == 0 {
				// Diff compares numbers by value; the pin hashes them as written.
				diffs[i] = []Change{notationChange}
			}
		}
	})

	var schemaRows [][]any
	w := tools.DiscoveryWrite{Actor: actor, Server: server}
	written := make(map[string]bool)
	for i, l := range list {
		def, hash := l.Def, l.Hash
		in := def.InputSchema
		raw := def.Raw
		if len(raw) == 0 {
			raw, _ = json.Marshal(map[string]any{"name": def.Name})
		}
		stored := tools.Definition{Title: def.Title, Description: def.Description, InputSchema: in,
			OutputSchema: def.OutputSchema, Annotations: def.Annotations, Raw: raw, Hash: hash}
		cur, ok := byName[def.Name]
		switch {
		case !ok:
			id := uuid.NewString()
			w.New = append(w.New, tools.NewTool{ID: id, Name: def.Name, Definition: stored})
			schemaRows = append(schemaRows, []any{uuidArg(id), int32(1), int32(0), hash, raw, false, json.RawMessage(`[]`)})
			w.History = append(w.History, tools.HistoryRow{ToolID: id, To: ToolDiscovered,
				Reason: "discovered by " + d.Trigger + " discovery", Actor: actor})
			res.Added++
			note(def.Name)
		case cur.DefinitionHash == hash && cur.Available:
			w.Seen = append(w.Seen, def.Name)
			res.Unchanged++
		case cur.DefinitionHash == hash:
			// Listed again after being missing: the same definition, available again.
			w.Relisted = append(w.Relisted, tools.Relisted{ID: cur.ID, Name: cur.Name, Was: cur.Status})
			res.Updated++
			note(def.Name)
		default:
			changes := diffs[i]
			breaking := slices.ContainsFunc(changes, func(c Change) bool { return c.Breaking })
			major, minor := cur.VersionMajor, cur.VersionMinor+1
			if breaking {
				major, minor = cur.VersionMajor+1, 0
			}
			changesJSON, _ := json.Marshal(changes)
			// A tool never validated yet (still discovered) is simply validated anew.
			next := ToolUpdating
			if cur.Status == ToolDiscovered {
				next = ToolDiscovered
			}
			w.Relisted = append(w.Relisted, tools.Relisted{ID: cur.ID, Name: cur.Name, Definition: &stored,
				VersionMajor: major, VersionMinor: minor, Status: next, Was: cur.Status, WasHash: cur.DefinitionHash,
				Unavailable: !cur.Available})
			written[cur.ID] = true
			var definition any = raw
			if known[cur.ID+" "+hash] {
				definition = nil // ToolDefinition reads the tool's row with this hash that stores it
			}
			schemaRows = append(schemaRows, []any{uuidArg(cur.ID), int32(major), int32(minor), hash, definition, breaking, json.RawMessage(changesJSON)})
			if cur.Status != next {
				reason := fmt.Sprintf("definition changed (v%d.%d → v%d.%d)", cur.VersionMajor, cur.VersionMinor, major, minor)
				if breaking {
					reason += ", breaking"
				}
				w.History = append(w.History, tools.HistoryRow{ToolID: cur.ID, From: cur.Status, To: next, Reason: reason,
					Actor: actor, Metadata: mustJSON(map[string]any{"from_hash": cur.DefinitionHash, "to_hash": hash, "changes": changes})})
			}
			res.Updated++
			note(def.Name)
		}
	}
	res.Total = len(seen)
	var clashed map[string]bool // the names listed, made once an enabled tool went: those not seen clashed
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		cur := byName[name]
		if !seen[name] && cur.Available {
			why := "no longer listed"
			if cur.Status == toolstate.Enabled {
				if clashed == nil {
					clashed = listedNames(d.Tools)
				}
				if clashed[name] {
					why = "listed with different definitions"
				}
			}
			w.Gone = append(w.Gone, tools.Gone{ID: cur.ID, Name: cur.Name, Status: cur.Status, Why: why})
			res.Removed++
			note(name)
		}
		if awaitsValidation(cur.Status) && !written[cur.ID] {
			w.Waiting = append(w.Waiting, toolstate.Pending{ID: cur.ID, Status: cur.Status, Hash: cur.DefinitionHash,
				Def: schema.Tool{Name: cur.Name, Title: cur.def.Title, Description: cur.def.Description,
					InputSchema: cur.def.InputSchema, OutputSchema: cur.def.OutputSchema, Annotations: cur.def.Annotations}})
		}
	}
	out, err := tools.StoreDiscovery(ctx, tx, serverID, w)
	if err != nil {
		return res, err
	}
	var changed []string
	for _, r := range w.Relisted {
		if r.Definition != nil {
			changed = append(changed, r.ID)
		}
	}
	if err := tools.SealNowSecret(ctx, tx, s.keys, changed); err != nil {
		return res, err
	}
	res.Validated = len(out)
	for _, o := range out {
		if o.Status == toolstate.Invalid {
			res.Invalid++
		}
	}
	if len(schemaRows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tool_schemas"}, []string{"tool_id", "version_major",
			"version_minor", "definition_hash", "definition", "breaking", "changes"}, pgx.CopyFromRows(schemaRows)); err != nil {
			return res, fmt.Errorf("insert tool versions: %w", err)
		}
	}
	return res, nil
}

// ListedTool is a listed tool as discovery stores it, with its DefinitionHash.
type ListedTool struct {
	Def  ToolDef
	Hash string
}

// HashListing is a server's listing as discovery stores and hashes it: a tool listed
// without an input schema with {} (stored so: hashed the same, or it would look changed
// on every run), each with its DefinitionHash, computed on every CPU (hashing is most of
// the work for a list that has not changed). A name listed more than once is kept once
// when every copy has the same definition (hash), and left out entirely when they
// differ: which copy the server runs on tools/call is its choice, so vetting either one
// would vouch for nothing (ApplyDiscovery reports it, see listedClashes). The session
// manager checks calls against it, so such a name is not callable either.
func HashListing(tools []ToolDef) []ListedTool {
	list := make([]ListedTool, len(tools))
	for i, def := range tools {
		if len(bytes.TrimSpace(def.InputSchema)) == 0 || string(bytes.TrimSpace(def.InputSchema)) == "null" {
			def.InputSchema = json.RawMessage(`{}`)
		}
		list[i] = ListedTool{Def: def}
	}
	parallel(len(list), func(i int) { list[i].Hash = DefinitionHash(list[i].Def) })
	at := make(map[string]int, len(list)) // name → index of its first copy in out
	var clash map[string]bool
	out := list[:0] // in place: out never passes the entry being read
	for _, l := range list {
		if i, ok := at[l.Def.Name]; ok {
			if out[i].Hash != l.Hash {
				if clash == nil {
					clash = map[string]bool{}
				}
				clash[l.Def.Name] = true
			}
			continue
		}
		at[l.Def.Name] = len(out)
		out = append(out, l)
	}
	if clash != nil {
		out = slices.DeleteFunc(out, func(l ListedTool) bool { return clash[l.Def.Name] })
	}
	return slices.Clip(out)
}

// listedNames is the set of names tools has: a name in it that the listing left out
// was listed with different definitions.
func listedNames(tools []ToolDef) map[string]bool {
	m := make(map[string]bool, len(tools))
	for _, t := range tools {
		m[t.Name] = true
	}
	return m
}

// listedClash is a name HashListing left out: listed n times with different definitions.
type listedClash struct {
	name string
	n    int
}

// listedClashes are the names of tools that list (HashListing(tools)) left out, in the
// order they were first listed, each with how many times it was listed. Every name in
// tools is storable (the session manager left out the others first), so a name missing
// from list is one listed with different definitions.
func listedClashes(tools []ToolDef, list []ListedTool) []listedClash {
	if len(tools) == len(list) {
		return nil
	}
	kept := make(map[string]bool, len(list))
	for _, l := range list {
		kept[l.Def.Name] = true
	}
	var out []listedClash
	at := map[string]int{}
	for _, t := range tools {
		if kept[t.Name] {
			continue
		}
		i, ok := at[t.Name]
		if !ok {
			i = len(out)
			at[t.Name] = i
			out = append(out, listedClash{name: t.Name})
		}
		out[i].n++
	}
	return out
}

// maxLeftOutName bounds a left-out name as a run shows it (quoted), as the session
// manager bounds the names it leaves out.
const maxLeftOutName = 200

// withClashes is d with its listing hashed (Listed) and the names listed with different
// definitions counted in LeftOut and named in LeftOutNames (the first few), as the tools
// whose names cannot be stored are: the run, its audit entry and the result say so.
func withClashes(d Discovery) Discovery {
	if d.Listed == nil {
		d.Listed = HashListing(d.Tools)
	}
	clashes := listedClashes(d.Tools, d.Listed)
	if len(clashes) == 0 {
		return d
	}
	names := slices.Clip(d.LeftOutNames) // the caller's slice is not written to
	for _, c := range clashes {
		d.LeftOut++
		if len(names) < MaxLeftOutNames {
			names = append(names, fmt.Sprintf("%s: listed %d times with different definitions",
				textcheck.Clip(strconv.Quote(c.name), maxLeftOutName, CutMark), c.n))
		}
	}
	d.LeftOutNames = names
	return d
}

// parallel calls fn(0) … fn(n-1) on GOMAXPROCS goroutines (one for a short list).
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+255)/256)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var panicked any
	for range workers {
		wg.Go(func() {
			// A panic goes back to the caller's goroutine, as if fn had run there.
			defer func() {
				if p := recover(); p != nil {
					once.Do(func() { panicked = p })
					next.Store(int64(n)) // the others stop at their next item
				}
			}()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}

// awaitsValidation reports whether a tool in this state has a definition not validated
// yet: discovery validates it (services/toolstate's automatic path).
func awaitsValidation(status string) bool {
	return status == ToolDiscovered || status == ToolUpdating
}

// storedHashes is which of the tools ids already have a version with the definition
// hash of the same index in hashes, as "<tool id> <hash>".
func storedHashes(ctx context.Context, tx pgx.Tx, ids, hashes []string) (map[string]bool, error) {
	out := make(map[string]bool)
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `/* registry.ApplyDiscovery.storedHashes */
		SELECT c.id::text || ' ' || c.hash FROM unnest($1::text[]::uuid[], $2::text[]) AS c(id, hash)
		WHERE EXISTS (SELECT 1 FROM tool_schemas s WHERE s.tool_id = c.id AND s.definition_hash = c.hash)`, ids, hashes)
	if err != nil {
		return nil, err
	}
	var key string
	_, err = pgx.ForEachRow(rows, []any{&key}, func() error { out[key] = true; return nil })
	return out, err
}

// readDefinitions fills in the stored definitions of the tools with the given ids.
func readDefinitions(ctx context.Context, tx pgx.Tx, ids []string, byName map[string]*storedTool) error {
	if len(ids) == 0 {
		return nil
	}
	// Locked, in id order as every change of several tools locks them, and their
	// status read again: a person's enable or disable committed since the list was
	// loaded is what the change starts from, and one arriving now waits for it.
	rows, err := tx.Query(ctx, `/* registry.ApplyDiscovery.definitions */
		SELECT name, status, title, description, input_schema, output_schema, annotations,
			-- a template tool's behaviour (DefinitionHash, Diff), the rest of the listing not read
			CASE WHEN definition->'_meta' ? '`+template.SpecMeta+`' THEN jsonb_build_object('_meta',
				jsonb_build_object('`+template.SpecMeta+`', definition->'_meta'->'`+template.SpecMeta+`')) END FROM mcp_tools
		WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`, ids)
	if err != nil {
		return err
	}
	var name, status string
	var def ToolDef
	_, err = pgx.ForEachRow(rows, []any{&name, &status, &def.Title, &def.Description, &def.InputSchema, &def.OutputSchema, &def.Annotations, &def.Raw}, func() error {
		if t := byName[name]; t != nil {
			t.Status = status
			t.def = ToolDef{Name: name, Title: def.Title, Description: def.Description, InputSchema: def.InputSchema,
				OutputSchema: def.OutputSchema, Annotations: def.Annotations, Raw: def.Raw}
		}
		def = ToolDef{}
		return nil
	})
	return err
}

// uuidArg is an id as pgx encodes a uuid column without first failing on its text form.
func uuidArg(id string) any {
	u, err := uuid.Parse(id)
	if err != nil {
		return id
	}
	return pgtype.UUID{Bytes: u, Valid: true}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// RecordDiscoveryFailure stores a discovery that could not complete. No tool changes:
// a partial list must never make tools look removed.
func (s *Service) RecordDiscoveryFailure(ctx context.Context, serverID string, d Discovery, cause error) (int64, error) {
	if !uuidtext.Canonical(serverID) {
		return 0, ErrNotFound
	}
	var id int64
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) (err error) {
		id, err = insertFailedRun(ctx, tx, serverID, d, ClipError(cause.Error()))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("registry: record failed discovery of %s: %w", serverID, err)
	}
	return id, nil
}

// insertFailedRun stores discovery d of server serverID as a failed run with error msg
// and announces it, in tx.
func insertFailedRun(ctx context.Context, tx pgx.Tx, serverID string, d Discovery, msg string) (int64, error) {
	var id int64
	var name string
	if err := tx.QueryRow(ctx, `/* registry.RecordDiscoveryFailure */
		INSERT INTO discovery_runs (server_id, trigger, actor, status, pages, error, started_at)
		VALUES ($1, $2, $3, 'failed', $4, $5, $6) RETURNING id, (SELECT name FROM mcp_servers WHERE id = $1)`,
		serverID, d.Trigger, d.Actor.Name, d.Pages, msg, d.StartedAt).Scan(&id, &name); err != nil {
		return 0, err
	}
	_, err := events.DiscoveryFailed.Publish(ctx, tx, ServersTopic, events.DiscoveryFailure{ServerID: serverID,
		Server: name, Trigger: d.Trigger, RunID: id, Error: msg})
	return id, err
}

// MaxLeftOutNames bounds the names of tools left out that a run keeps.
const MaxLeftOutNames = 5

// leftOutNames is what a run keeps of d's tools left out: the first few, never nil
// (the column is NOT NULL).
func leftOutNames(d Discovery) []string {
	return append([]string{}, d.LeftOutNames[:min(len(d.LeftOutNames), MaxLeftOutNames)]...)
}

// DiscoveryRun is a stored discovery.
type DiscoveryRun struct {
	ID         int64     `db:"id" json:"id"`
	Trigger    string    `db:"trigger" json:"trigger"`
	Actor      string    `db:"actor" json:"actor"`
	Status     string    `db:"status" json:"status"`
	Pages      int       `db:"pages" json:"pages"`
	Added      int       `db:"added" json:"added"`
	Updated    int       `db:"updated" json:"updated"`
	Unchanged  int       `db:"unchanged" json:"unchanged"`
	Removed    int       `db:"removed" json:"removed"`
	Error      *string   `db:"error" json:"error"`
	StartedAt  time.Time `db:"started_at" json:"started_at"`
	FinishedAt time.Time `db:"finished_at" json:"finished_at"`
	// LeftOut counts the listed tools that could not be stored; LeftOutNames are the
	// first few, as "name: why".
	LeftOut      int      `db:"left_out" json:"left_out"`
	LeftOutNames []string `db:"left_out_names" json:"left_out_names"`
}

// Duration is how long the run took.
func (r DiscoveryRun) Duration() time.Duration { return r.FinishedAt.Sub(r.StartedAt) }

// DiscoveryRuns returns the latest discovery runs of a server, newest first.
func (s *Service) DiscoveryRuns(ctx context.Context, serverID string, limit int) ([]DiscoveryRun, error) {
	return db.All[DiscoveryRun](ctx, s.pool, "registry: discovery runs", `/* registry.DiscoveryRuns */
		SELECT id, trigger, actor, status, pages, added, updated, unchanged, removed, error, started_at, finished_at,
		       left_out, left_out_names
		FROM discovery_runs WHERE server_id = $1 ORDER BY id DESC LIMIT $2`, serverID, limit)
}

// ServerTools returns the tools of one server by name, available ones first.
func (s *Service) ServerTools(ctx context.Context, serverID string) ([]Tool, error) {
	return db.All[Tool](ctx, s.pool, "registry: server tools", `/* registry.ServerTools */ SELECT `+toolColumns+`
		FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
		WHERE t.server_id = $1 ORDER BY NOT t.available, t.name`, serverID)
}

// ServerToolsPage's limit: at most and by default as the other lists of tools.
const (
	MaxServerToolsPage     = tools.MaxLimit
	DefaultServerToolsPage = tools.DefaultLimit
)

// ToolPage is one page of a server's tools.
type ToolPage struct {
	Tools      []Tool
	Total      int    // the server's tools, all pages
	NextCursor string // "" on the last page
}

// serverToolsCursor is the position after a page's last tool, in ServerTools' order.
type serverToolsCursor struct {
	Unavailable bool   `json:"u"`
	Name        string `json:"n"`
}

// ServerToolsPage returns up to limit (1 to MaxServerToolsPage) tools of one server in
// ServerTools' order, after cursor (a NextCursor it gave; "" for the first page), and
// how many the server has: a server may list thousands, and a page shows a few.
func (s *Service) ServerToolsPage(ctx context.Context, serverID string, limit int, cursor string) (ToolPage, error) {
	var ve verr.Error
	if limit < 1 || limit > MaxServerToolsPage {
		ve.Add("limit", fmt.Sprintf("must be between 1 and %d", MaxServerToolsPage))
	}
	var after serverToolsCursor
	// Cursors are the caller's to send: text PostgreSQL refuses must not reach it.
	if cursor != "" && (!db.DecodeCursor(cursor, &after) || textcheck.Bad(after.Name) != "") {
		ve.Add("cursor", "is not a cursor this list gave out; start from the first page")
	}
	if err := ve.Err(); err != nil {
		return ToolPage{}, err
	}
	args := []any{serverID, limit + 1}
	cond := ""
	if cursor != "" {
		cond = ` AND (NOT t.available, t.name) > ($3, $4)`
		args = append(args, after.Unavailable, after.Name)
	}
	// The count is an uncorrelated subquery, computed once, over the (server_id, name)
	// index; the page's rows alone are read whole.
	type row struct {
		Tool
		Total int `db:"total"`
	}
	rows, err := db.All[row](ctx, s.pool, "registry: server tools page", `/* registry.ServerToolsPage */ SELECT `+toolColumns+`,
		(SELECT count(*) FROM mcp_tools c WHERE c.server_id = $1)::int AS total
		FROM mcp_tools t JOIN mcp_servers s ON s.id = t.server_id
		WHERE t.server_id = $1`+cond+` ORDER BY NOT t.available, t.name LIMIT $2`, args...)
	if err != nil {
		return ToolPage{}, err
	}
	p := ToolPage{Tools: make([]Tool, len(rows))}
	for i, r := range rows {
		p.Tools[i], p.Total = r.Tool, r.Total
	}
	if len(rows) == 0 && cursor != "" { // past the last tool: no row carried the count
		if err := s.pool.QueryRow(ctx, `/* registry.ServerToolsPage count */ SELECT count(*) FROM mcp_tools WHERE server_id = $1`,
			serverID).Scan(&p.Total); err != nil {
			return ToolPage{}, fmt.Errorf("registry: count server tools: %w", err)
		}
	}
	p.Tools, p.NextCursor = db.NextPage(p.Tools, limit, func(last Tool) any {
		return serverToolsCursor{Unavailable: !last.Available, Name: last.Name}
	})
	return p, nil
}

// ToolVersion is one stored definition of a tool. Listings leave Definition nil:
// ToolDefinition reads it for the versions shown.
type ToolVersion struct {
	VersionMajor   int             `db:"version_major" json:"-"`
	VersionMinor   int             `db:"version_minor" json:"-"`
	DefinitionHash string          `db:"definition_hash" json:"definition_hash"`
	Breaking       bool            `db:"breaking" json:"breaking"`
	Changes        []Change        `db:"changes" json:"changes"`
	Definition     json.RawMessage `db:"definition" json:"definition"`
	CreatedAt      time.Time       `db:"created_at" json:"created_at"`
}

// MaxToolVersions is the most versions of a tool one listing returns: tool_schemas is
// append-only, and a server flipping between two definitions adds thousands a day.
const MaxToolVersions = 100

// ErrToolVersionNotFound: the tool has no stored version with that number.
var ErrToolVersionNotFound = fault.NotFound("tool version")

// toolVersionColumns are a version's columns without its definition.
var toolVersionColumns = `version_major, version_minor, definition_hash, breaking, ` + boundedChanges("changes") + ` AS changes,
	NULL::jsonb AS definition, created_at`

// boundedChanges is the SQL of the change list col read as ClipChanges would leave it
// (near enough: ClipChanges has the last word), when it is large: rows stored before Diff
// bounded its changes hold megabytes of them, and the pages would read them whole.
func boundedChanges(col string) string {
	col = "(" + col + ")"
	return `CASE WHEN jsonb_typeof(` + col + `) = 'array' AND octet_length(` + col + `::text) > 65536 THEN (
		SELECT coalesce(jsonb_agg(jsonb_build_object('kind', c->>'kind', 'path', left(c->>'path', ` + strconv.Itoa(MaxChangeName+1) + `),
				'message', left(c->>'message', ` + strconv.Itoa(MaxChangeMessage) + `), 'breaking', c->'breaking') ORDER BY i)
				FILTER (WHERE i <= ` + strconv.Itoa(MaxChanges) + ` OR i = ` + strconv.Itoa(MaxChanges+1) + ` AND c->>'kind' = 'more'), '[]'::jsonb)
			-- a list Diff bounded already ends with its own count of the rest, kept above
			|| CASE WHEN count(*) > ` + strconv.Itoa(MaxChanges) + ` AND NOT bool_or(i = ` + strconv.Itoa(MaxChanges+1) + ` AND c->>'kind' = 'more')
				THEN jsonb_build_array(jsonb_build_object('kind', 'more',
				'message', format('and %s more change%s', count(*) - ` + strconv.Itoa(MaxChanges) + `, CASE WHEN count(*) - ` + strconv.Itoa(MaxChanges) + ` > 1 THEN 's' ELSE '' END),
				'breaking', coalesce(bool_or(c->>'breaking' = 'true') FILTER (WHERE i > ` + strconv.Itoa(MaxChanges) + `), false)))
			ELSE '[]'::jsonb END
		FROM jsonb_array_elements(` + col + `) WITH ORDINALITY AS e(c, i)) ELSE ` + col + ` END`
}

// ToolVersions returns the newest MaxToolVersions stored versions of a tool, newest
// first, without their definitions.
func (s *Service) ToolVersions(ctx context.Context, toolID string) ([]ToolVersion, error) {
	vs, _, err := s.ToolVersionsPage(ctx, toolID, MaxToolVersions)
	return vs, err
}

// ToolVersionsPage returns the newest limit (1 to MaxToolVersions; otherwise
// MaxToolVersions) stored versions of a tool, newest first, without their definitions,
// and whether older ones exist.
func (s *Service) ToolVersionsPage(ctx context.Context, toolID string, limit int) ([]ToolVersion, bool, error) {
	if limit <= 0 || limit > MaxToolVersions {
		limit = MaxToolVersions
	}
	vs, err := db.All[ToolVersion](ctx, s.pool, "registry: tool versions", `/* registry.ToolVersions */
		SELECT `+toolVersionColumns+` FROM tool_schemas WHERE tool_id = $1
		ORDER BY version_major DESC, version_minor DESC LIMIT $2`, toolID, limit+1)
	if err != nil || len(vs) <= limit {
		return vs, false, err
	}
	return vs[:limit], true, nil
}

// ToolVersionOf returns the newest stored version of a tool with the definition hash,
// without its definition; found is false when the tool never had that definition. It
// finds a version too old for ToolVersionsPage (a link from the tool's history).
func (s *Service) ToolVersionOf(ctx context.Context, toolID, hash string) (v ToolVersion, found bool, err error) {
	vs, err := db.All[ToolVersion](ctx, s.pool, "registry: tool version of hash", `/* registry.ToolVersionOf */
		SELECT `+toolVersionColumns+` FROM tool_schemas WHERE tool_id = $1 AND definition_hash = $2
		ORDER BY version_major DESC, version_minor DESC LIMIT 1`, toolID, hash)
	if err != nil || len(vs) == 0 {
		return ToolVersion{}, false, err
	}
	return vs[0], true, nil
}

// ToolDefinition returns the stored definition of version major.minor of a tool
// (ErrToolVersionNotFound when it has none).
func (s *Service) ToolDefinition(ctx context.Context, toolID string, major, minor int) (json.RawMessage, error) {
	var def json.RawMessage
	// A version stored without its definition has that of the tool's version with the
	// same hash that stored it (applyTools).
	err := s.pool.QueryRow(ctx, `/* registry.ToolDefinition */
		SELECT coalesce(v.definition, (SELECT o.definition FROM tool_schemas o
			WHERE o.tool_id = v.tool_id AND o.definition_hash = v.definition_hash AND o.definition IS NOT NULL ORDER BY o.id LIMIT 1))
		FROM tool_schemas v WHERE v.tool_id = $1 AND v.version_major = $2 AND v.version_minor = $3`,
		toolID, major, minor).Scan(&def)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrToolVersionNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("registry: tool definition %s v%d.%d: %w", toolID, major, minor, err)
	}
	return def, nil
}

// ToolStateChange is one row of a tool's state history.
type ToolStateChange struct {
	ID        int64           `db:"id" json:"-"`
	From      *string         `db:"from_status" json:"from"`
	To        string          `db:"to_status" json:"to"`
	Reason    string          `db:"reason" json:"reason"`
	Actor     string          `db:"actor" json:"actor"`
	Metadata  json.RawMessage `db:"metadata" json:"metadata"`
	CreatedAt time.Time       `db:"created_at" json:"created_at"`
}

// ToolHistory returns a tool's state transitions, newest first.
func (s *Service) ToolHistory(ctx context.Context, toolID string) ([]ToolStateChange, error) {
	rows, _, err := s.ToolHistoryPage(ctx, toolID, 0, 0)
	return rows, err
}

// ToolHistoryPage returns up to limit (0: every) of a tool's state transitions older
// than the one with id before (0: the newest), newest first, and the id to ask before
// for the next page (0 when there is none): a tool whose server changes it often has
// thousands.
func (s *Service) ToolHistoryPage(ctx context.Context, toolID string, before int64, limit int) ([]ToolStateChange, int64, error) {
	n := int64(limit) + 1
	if limit <= 0 {
		n = -1
	}
	if before <= 0 {
		before = math.MaxInt64 // one condition, which the (tool_id, id) index bounds
	}
	rows, err := db.All[ToolStateChange](ctx, s.pool, "registry: tool history", `/* registry.ToolHistory */
		SELECT id, from_status, to_status, reason, actor,
			CASE WHEN jsonb_typeof(metadata->'changes') = 'array' AND octet_length(metadata::text) > 65536
				THEN jsonb_set(metadata, '{changes}', `+boundedChanges("metadata->'changes'")+`) ELSE metadata END AS metadata,
			created_at FROM tool_state_history
		WHERE tool_id = $1 AND id < $2::bigint ORDER BY id DESC LIMIT CASE WHEN $3::bigint < 0 THEN NULL ELSE $3::bigint END`, toolID, before, n)
	if err != nil || limit <= 0 || len(rows) <= limit {
		return rows, 0, err
	}
	return rows[:limit], rows[limit-1].ID, nil
}

// DiscoveryProgress announces how far a running discovery has got (pages and tools
// fetched so far), so a long one shows progress live. Nothing is stored.
func (s *Service) DiscoveryProgress(ctx context.Context, serverID, trigger string, pages, tools int) error {
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		_, err := events.DiscoveryProgress.Publish(ctx, tx, ServersTopic, events.DiscoverySoFar{ServerID: serverID,
			Trigger: trigger, Pages: pages, Tools: tools})
		return err
	})
}
