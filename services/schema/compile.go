package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ErrRemoteRef is wrapped by CompileSchema's error when a schema refers to
// anything outside itself: Toolwarden never loads schemas from the network or
// from files, because a tool definition comes from a server it does not trust.
var ErrRemoteRef = errors.New("schema: only references inside the schema itself are allowed")

// baseURL names the schema being compiled. It is hierarchical (unlike a urn),
// so a relative "$ref": "other.json" resolves to a URL that the loader then
// refuses, instead of resolving to something odd that silently compiles.
const baseURL = "toolwarden:///schema.json"

// refusingLoader replaces the library's default loader, which reads files.
// The standard meta-schemas are built into the library and never reach it.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) { return nil, ErrRemoteRef }

// lenientRegexp compiles patterns with Go's regexp and, when that fails,
// returns a pattern that matches everything. Many servers build schemas with
// JavaScript libraries (zod's email pattern uses lookahead), which RE2 cannot
// run; refusing those schemas would make the tools unusable, and the server
// enforces its own pattern anyway. ValidateTool reports each such pattern as
// pattern_unsupported so nobody is misled. A compiled pattern refuses inputs too
// long to match within maxMatchWork (boundedRegexp).
func lenientRegexp(s string) (jsonschema.Regexp, error) {
	if re, err := regexp.Compile(s); err == nil {
		return &boundedRegexp{re: re, insts: patternInsts(s)}, nil
	}
	return anything(s), nil
}

// regexpEngine is lenientRegexp while the schema compiles, and regexValue once done
// (done set): the library calls the same engine for every string validated under
// format "regex" (assertive in drafts 4 to 7), where compiling an argument such as
// "\pL{1000}" over and over would cost seconds and gigabytes a call.
func regexpEngine(done *atomic.Bool) jsonschema.RegexpEngine {
	return func(s string) (jsonschema.Regexp, error) {
		if !done.Load() {
			return lenientRegexp(s)
		}
		return regexValue(s)
	}
}

// errNotRegex is format "regex"'s reason for a value that no dialect accepts.
var errNotRegex = errors.New("unbalanced parentheses or a trailing backslash")

// regexValue checks a value under format "regex" without compiling it: in one pass, it
// refuses only what both ECMA-262 (the format's dialect) and Go refuse, parentheses that
// do not balance and a trailing backslash, read with either dialect's character classes
// (a "]" first in a class closes it in ECMA, "[^]", and is literal in Go, "[]a]"). Any
// other value passes, as lenientRegexp lets patterns Go cannot run through.
func regexValue(s string) (jsonschema.Regexp, error) {
	if !regexShape(s, false) && !regexShape(s, true) {
		return nil, errNotRegex
	}
	return anything(s), nil
}

// regexShape reports whether s's parentheses balance outside character classes and
// nothing ends in a lone backslash; goStyle reads classes and \Q…\E as Go does.
func regexShape(s string, goStyle bool) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return false
			}
			if goStyle && s[i+1] == 'Q' { // quoted up to \E or the end
				end := strings.Index(s[i+2:], `\E`)
				if end < 0 {
					return depth == 0
				}
				i += 2 + end + 1
				continue
			}
			i++
		case '[':
			j := i + 1
			if j < len(s) && s[j] == '^' {
				j++
			}
			if goStyle && j < len(s) && s[j] == ']' {
				j++
			}
			for ; j < len(s) && s[j] != ']'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return false // the class is not closed
			}
			i = j
		case '(':
			depth++
		case ')':
			if depth--; depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

type anything string

func (a anything) MatchString(string) bool { return true }
func (a anything) String() string          { return string(a) }

// CompileSchema compiles a JSON Schema. Schemas without "$schema" are read as
// draft 2020-12 (the MCP default); draft-07 and 2019-09 schemas that say so
// are honoured. References must stay inside the schema ("#/$defs/Name");
// anything else fails with an error wrapping ErrRemoteRef. A schema nested more than
// maxDepth levels deep, holding more than maxSchemaNodes objects and booleans or an enum
// or const of more than maxEnumValues values (checkShape), or that would
// make validating one value apply its subschemas more than maxEvaluations times,
// that has a pattern compiling to over maxPatternInsts instructions, or that holds a
// number too long or with too large an exponent (numberProblem), fails with an
// error wrapping ErrTooComplex.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	s, _, err := compile(raw)
	return s, err
}

// compile is CompileSchema that also returns, on failure, a JSON pointer into
// the schema near the fault ("" for the whole schema).
func compile(raw json.RawMessage) (*jsonschema.Schema, string, error) {
	if !present(raw) {
		return nil, "", errors.New("schema: no schema given")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, "", fmt.Errorf("schema: not valid JSON: %w", err)
	}
	return compileDoc(doc)
}

// compileDoc compiles a schema already decoded as jsonschema.UnmarshalJSON
// decodes (maps, slices, json.Number).
func compileDoc(doc any) (*jsonschema.Schema, string, error) {
	if ptr, err := checkShape(doc); err != nil { // before the library's compiler, which has no bounds
		return nil, ptr, err
	}
	if ptr, err := checkNumbers(doc); err != nil {
		return nil, ptr, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	var done atomic.Bool
	defer done.Store(true) // the schemas compiled, later calls check values (findAnchors compiles too)
	c.UseRegexpEngine(regexpEngine(&done))
	if err := c.AddResource(baseURL, doc); err != nil {
		return nil, "", fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(baseURL)
	if err != nil {
		ptr, err := compileError(err)
		return nil, ptr, err
	}
	ptr, evals, err := checkComplexity(c, s, doc)
	if err != nil {
		return nil, ptr, err
	}
	evals = weighKeywords(c, s, doc, evals)
	ptr, load, err := checkPatterns(c, s, doc)
	if err != nil {
		return nil, ptr, err
	}
	// Below that, MaxValues bounds the evaluations already.
	secret := secretProperties(doc)
	if load > 0 || evals*MaxValues > maxEvaluationWork || secret != nil {
		remember(s, facts{load: load, evals: evals, secret: secret})
	}
	return s, "", nil
}

// compileError turns the library's long, multi-line errors into one line and
// a pointer to the place in the schema.
func compileError(err error) (string, error) {
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) {
		ref := strings.TrimPrefix(le.URL, "toolwarden:///")
		return "", fmt.Errorf("%w: cannot resolve %q; use a local reference such as \"#/$defs/Name\" (Toolwarden never loads schemas from the network or files)", ErrRemoteRef, ref)
	}
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			ls := leaves(ve)
			return PtrJoin("", ls[0].InstanceLocation...), fmt.Errorf("schema: not a valid JSON Schema: %s", strings.Join(leafMessages(ls, 3), "; "))
		}
	}
	msg := strings.ReplaceAll(err.Error(), baseURL, "schema")
	return "", fmt.Errorf("schema: %s", msg)
}

// leafMessages lists up to limit "at <pointer>: <reason>" lines from the most
// specific causes of a validation error.
func leafMessages(ls []*jsonschema.ValidationError, limit int) []string {
	var out, seen []string
	for _, l := range ls {
		loc := PtrJoin("", l.InstanceLocation...)
		if slices.Contains(seen, loc) {
			continue // the other branches of an anyOf say the same thing worse
		}
		seen = append(seen, loc)
		where := "the root"
		if len(l.InstanceLocation) > 0 {
			where = strconv.Quote(loc)
		}
		out = append(out, fmt.Sprintf("at %s: %s", where, leafString(l)))
		if len(out) == limit {
			break
		}
	}
	return out
}

func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// leafString is the English message for a leaf error without the library's
// "jsonschema validation failed with ..." header.
func leafString(ve *jsonschema.ValidationError) string {
	if u := ve.BasicOutput(); u.Error != nil {
		return u.Error.String()
	}
	return "is not valid"
}

// maxLeafMessage bounds, in characters, what one problem says: the library quotes a
// value that fails its pattern or format in full (a 4 MB argument, a 16 MiB output).
const maxLeafMessage = 512

// leafMessage is leafString with the value that fails a pattern or a format quoted when
// at most 100 characters long, and left out when longer or when it may be a credential (secret: under a parameter the
// schema marks secret or a name on its path such as "api_key"; or by its look): the
// message reaches the audit log and the usage records. Any message is cut to
// maxLeafMessage.
func leafMessage(ve *jsonschema.ValidationError, secret bool) string {
	value := func(v any) string {
		text := fmt.Sprint(v)
		// A string longer than the cut is left out rather than cut: the router masks
		// configured secrets in the message, and a part of one is not found.
		if secret || secrets.HoldsSecret(v) || utf8.RuneCountInString(text) > 100 {
			return "the value"
		}
		return "'" + text + "'"
	}
	msg := ""
	switch k := ve.ErrorKind.(type) {
	case *kind.Pattern:
		msg = value(k.Got) + " does not match pattern '" + clipRunes(k.Want, 300) + "'"
	case *kind.Format:
		msg = value(k.Got) + " is not valid " + k.Want
	case *kind.Minimum, *kind.Maximum, *kind.ExclusiveMinimum, *kind.ExclusiveMaximum, *kind.MultipleOf:
		// "maximum: got 12345, want 9999": a secret number (a PIN) is left out. This
		// parses the library's "kw: got X, want Y" wording; other wording is kept whole.
		msg = leafString(ve)
		if secret {
			if kw, rest, ok := strings.Cut(msg, ": got "); ok {
				if _, want, ok := strings.Cut(rest, ", want "); ok {
					msg = kw + ": want " + want + " (the value given is not shown)"
				}
			}
		}
	default:
		msg = leafString(ve)
	}
	return clipRunes(msg, maxLeafMessage)
}

// given is "; got <value as JSON>" for an enum or const error: the library names the
// allowed values but not the one given, and a caller who sent "Read" where "read" is
// allowed should see both. It is "" for an object or array, and for a value that may
// be a credential (secret, as for leafMessage, or by its look): the message reaches
// the audit log and the usage records, which keep no secret. A scalar longer than 60
// characters as JSON is left out too, not cut: the router masks configured secrets in
// the message, and could not find one cut in two.
func given(ve *jsonschema.ValidationError, secret bool) string {
	var v any
	switch k := ve.ErrorKind.(type) {
	case *kind.Enum:
		v = k.Got
	case *kind.Const:
		v = k.Got
	default:
		return ""
	}
	switch v.(type) {
	case []any, map[string]any:
		return ""
	}
	if secret || secrets.HoldsSecret(v) {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	if utf8.RuneCount(b) > 60 {
		return "" // not cut: a configured secret cut in two escapes the router's masking
	}
	return gotSep + string(b)
}

// secretProperties are the top-level properties a schema document marks secret
// anywhere within (writeOnly, or format password, at any depth, or where a $ref in them
// leads: {"$ref": "#/properties/pw"} is as secret as pw): what validation says about
// their values quotes none. Erring wide costs only a quoted value in an error: a ref this
// cannot follow counts as leading to a mark when the document marks anything. The
// compiled schema keeps no unknown format's name.
func secretProperties(doc any) map[string]bool {
	root, _ := doc.(map[string]any)
	if !marksSecretWithin(root, 0) {
		return nil // no reference leads out of the document (refusingLoader)
	}
	r := &secretRefs{root: root, found: map[string]bool{}, work: maxSecretRefWork}
	dialect, _ := root["$schema"].(string)
	for _, v := range root {
		// An embedded resource ($id, draft-04's id) resolves "#/..." against itself.
		r.wide = r.wide || anyWithin(v, 1, func(m map[string]any) bool {
			_, id := m["$id"].(string)
			_, oldID := m["id"].(string)
			return id || oldID && strings.Contains(dialect, "draft-04")
		})
	}
	props, _ := root["properties"].(map[string]any)
	rest := map[string]any{}
	for k, v := range root {
		if k != "properties" && k != "$defs" && k != "definitions" {
			rest[k] = v
		}
	}
	if r.leadsToMark(rest) {
		// Marked where the root's allOf, anyOf or $ref lead, beside its properties:
		// every argument is taken for secret.
		return map[string]bool{allSecret: true}
	}
	var out map[string]bool
	for name, v := range props {
		if r.leadsToMark(v) {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// allSecret is secretProperties' key for every top-level property: no argument's name
// holds a NUL (the text checks refuse one before validation).
const allSecret = "\x00all"

// maxSecretRefWork bounds the schema objects secretProperties looks at through
// references (each property's are looked at again); past it, every reference is taken
// to lead to a mark.
const maxSecretRefWork = 200_000

// secretRefs follows the local references of a document that marks something secret.
type secretRefs struct {
	root  map[string]any
	wide  bool            // "#/..." may not be relative to the root: every ref leads to a mark
	found map[string]bool // refs known to lead to a mark
	work  int
}

// leadsToMark reports whether v, a decoded schema, marks its values secret at any depth
// or holds a reference that leads to a schema that does (followed on, through refs).
func (r *secretRefs) leadsToMark(v any) bool {
	return r.within(v, map[string]bool{}, 0)
}

// within is leadsToMark; visiting holds the refs this question has followed already
// (a ref met again adds nothing: its first visit looks at all it leads to).
func (r *secretRefs) within(v any, visiting map[string]bool, depth int) bool {
	return anyWithin(v, depth, func(m map[string]any) bool {
		if r.work--; r.work < 0 || marksSecret(m) {
			return true
		}
		for _, k := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
			if ref, ok := m[k]; ok && r.refLeads(k, ref, visiting) {
				return true
			}
		}
		return false
	})
}

func (r *secretRefs) refLeads(k string, ref any, visiting map[string]bool) bool {
	s, ok := ref.(string)
	switch {
	case !ok: // the compiler refuses it
		return false
	case k != "$ref" || r.wide: // found at run time, or relative to an embedded $id
		return true
	case r.found[s]:
		return true
	case visiting[s]:
		return false
	}
	target, ok := refTarget(r.root, s)
	if !ok { // an $anchor, a $id's URL: not followed
		return true
	}
	visiting[s] = true
	if r.within(target, visiting, 0) {
		r.found[s] = true
		return true
	}
	return false
}

// refTarget is what a "#" or "#/json/pointer" reference names in the decoded document.
func refTarget(root map[string]any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	return Lookup(root, frag)
}

// marksSecretWithin reports whether v, a decoded schema, or one nested in it marks its
// values secret (MarksSecret's rule).
func marksSecretWithin(v any, depth int) bool {
	return anyWithin(v, depth, marksSecret)
}

// marksSecret is MarksSecret for a schema object as jsonschema.UnmarshalJSON decodes it.
func marksSecret(m map[string]any) bool {
	f, _ := m["format"].(string)
	w, _ := m["writeOnly"].(bool)
	return f == "password" || w
}

// anyWithin reports whether an object in v, at any depth, is one match says: true past a
// depth the compiler allows anyway (saying secret, or a $ref, rather than look on).
func anyWithin(v any, depth int, match func(map[string]any) bool) bool {
	if depth > 64 {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		if match(x) {
			return true
		}
		for _, c := range x {
			if anyWithin(c, depth+1, match) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if anyWithin(c, depth+1, match) {
				return true
			}
		}
	}
	return false
}

// gotSep starts the part of an argument error that shows the value given.
const gotSep = "; got "

// ValidateArguments checks call arguments against a compiled input schema.
// It returns nil when they are valid and otherwise a *verr.Error with one
// field per problem, each named by a JSON pointer into the arguments
// ("/message"), which is the "details" shape of the API's invalid_arguments
// error. args may be a decoded value or raw JSON (json.RawMessage or []byte).
// Arguments too large to check against the schema's patterns (CheckSize), holding
// more than MaxValues values the schema reaches, or more than the schema's evaluations
// allow, are refused with one field-less problem; a reached number too long or with too
// large an exponent for the validator (numberProblem), with a problem at its place.
func ValidateArguments(s *jsonschema.Schema, args any) error {
	return validateArguments(s, args, nil)
}

// ValidateArgumentsHiding is ValidateArguments whose problems quote no value of the
// top-level arguments hidden names (secret by their settings, not by the schema: a
// configured secret's stored value).
func ValidateArgumentsHiding(s *jsonschema.Schema, args any, hidden map[string]bool) error {
	return validateArguments(s, args, hidden)
}

func validateArguments(s *jsonschema.Schema, args any, hidden map[string]bool) error {
	switch raw := args.(type) {
	case json.RawMessage:
		return validateArguments(s, []byte(raw), hidden)
	case []byte:
		if !present(raw) {
			args = map[string]any{}
			break
		}
		if err := CheckSize(s, len(raw)); err != nil {
			return tooLarge(err)
		}
		v, err := decodeChecked(s, raw, scan.refuse, "arguments are not valid JSON: ")
		if err != nil {
			return err
		}
		args = v
	case nil:
		args = map[string]any{}
	default:
		if factsOf(s).load > 0 { // measured as JSON, as raw arguments are
			b, _ := json.Marshal(args)
			if err := CheckSize(s, len(b)); err != nil {
				return tooLarge(err)
			}
		}
		if err := scanValue(newReach([]*jsonschema.Schema{s}), args).refuse(s); err != nil {
			return err
		}
	}
	return validate(s, args, hidden)
}

// ValidateOutput checks content a tool returned (raw JSON) against its compiled output
// schema, reading it once: content ValidateArguments would refuse unchecked is an error
// wrapping ErrUnchecked, content that does not match (or is not
// JSON) a *verr.Error as ValidateArguments returns. CheckSize is the caller's.
func ValidateOutput(s *jsonschema.Schema, raw []byte) error {
	v, err := decodeChecked(s, raw, scan.unchecked, "not valid JSON: ")
	if err != nil {
		return err
	}
	return validate(s, v, nil)
}

// decodeChecked scans raw for the limits (refused says why a document is not checked)
// and decodes it, only after the scan allowed it (jsontext reads what it can without
// decoding); JSON it cannot read is a field-less problem starting notJSON.
func decodeChecked(s *jsonschema.Schema, raw []byte, refused func(scan, *jsonschema.Schema) error, notJSON string) (any, error) {
	sc, v, err := scanBytes(s, raw)
	if err != nil {
		return nil, verr.New("", notJSON+err.Error())
	}
	if err := refused(sc, s); err != nil {
		return nil, err
	}
	if v == nil {
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err != nil {
			return nil, verr.New("", notJSON+err.Error())
		}
	}
	return v, nil
}

// validate checks a decoded document the limits allow against s, naming each problem;
// what it says of the top-level properties s marks secret, or hidden names, quotes no
// value.
func validate(s *jsonschema.Schema, doc any, hidden map[string]bool) error {
	err := s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return verr.New("", err.Error())
	}
	out := &verr.Error{}
	marked := factsOf(s).secret
	seen := map[string]bool{} // path and message: the branches of an anyOf repeat each other
	listed := map[string]bool{}
	more := 0
	add := func(loc, k, msg string) {
		switch key := loc + "\x00" + msg; {
		case seen[key]:
		case len(out.Fields) >= MaxFieldErrors:
			more++
		default:
			seen[key], listed[loc] = true, true
			out.AddKind(loc, k, msg)
		}
	}
	for _, l := range leaves(ve) {
		loc := PtrJoin("", l.InstanceLocation...)
		req, isReq := l.ErrorKind.(*kind.Required)
		if len(out.Fields) >= MaxFieldErrors {
			// Only counted: formatting each message is the costly part.
			switch {
			case isReq:
				more += len(req.Missing)
			case !listed[loc]:
				more++
			}
			continue
		}
		if isReq {
			for _, name := range req.Missing {
				add(PtrJoin(loc, name), verr.KindMissing, "is required")
			}
			continue
		}
		k := verr.KindValue
		if _, ok := l.ErrorKind.(*kind.Type); ok {
			k = verr.KindType
		}
		secret := len(l.InstanceLocation) > 0 && (marked[allSecret] || marked[l.InstanceLocation[0]] || hidden[l.InstanceLocation[0]]) ||
			slices.ContainsFunc(l.InstanceLocation, secrets.LooksSecretName)
		add(loc, k, leafMessage(l, secret)+given(l, secret))
	}
	if more > 0 {
		out.Add("", fmt.Sprintf("and %d more problems not listed", more))
	}
	return out
}

// MaxFieldErrors bounds the problems ValidateArguments names one by one: a body of a
// few megabytes can break a schema in millions of places (one per array item), and
// naming them all would cost more than the call. The rest are counted in one last field.
const MaxFieldErrors = 100

// surelyCompiles reports whether a decoded schema (Decode's form) is certain to compile,
// so that ValidateTool can skip compileDoc, which costs about a hundred times more (a
// new compiler, the schema checked against the draft 2020-12 meta-schema, every
// subschema compiled) and whose result it does not keep. It answers true only for an
// object schema made of the common keywords with values of the type the meta-schema
// requires, no references, identifiers or $schema, and no number compileDoc refuses
// (numberProblem): nothing in such a schema can fail to compile. Anything else (an
// unknown keyword included) answers false and is compiled.
// TestSurelyCompiles holds it to that against the compiler. Without references, validation
// applies each subschema at most once to a value, so one with at most maxEvaluations
// subschemas cannot be too complex (ErrTooComplex) either; a larger one is compiled.
func surelyCompiles(v any) bool {
	o, ok := v.(*Object)
	n := 0
	if !ok || !plainSchema(o, 0, &n) || n > maxEvaluations {
		return false
	}
	if _, err := checkShape(v); err != nil { // an enum too large: compileDoc refuses it
		return false
	}
	_, err := checkNumbers(v) // compileDoc refuses a number the validator must not be given
	return err == nil
}

var simpleTypes = map[string]bool{"array": true, "boolean": true, "integer": true, "null": true, "number": true,
	"object": true, "string": true}

func plainSchema(v any, depth int, n *int) bool {
	if *n++; depth > maxDepth {
		return false
	}
	switch t := v.(type) {
	case bool:
		return true
	case *Object:
		for _, k := range t.keys {
			if !plainKeyword(k, t.m[k], depth, n) {
				return false
			}
		}
		return true
	}
	return false
}

func plainKeyword(k string, v any, depth int, n *int) bool {
	switch k {
	case "type":
		switch t := v.(type) {
		case string:
			return simpleTypes[t]
		case []any:
			return len(t) > 0 && uniqueStrings(t, func(s string) bool { return simpleTypes[s] })
		}
		return false
	case "title", "description", "format":
		_, ok := v.(string)
		return ok
	case "pattern":
		// The compiler's regexp engine (lenientRegexp) accepts every pattern, but
		// compileDoc refuses one with too big a program.
		p, ok := v.(string)
		return ok && patternInsts(p) <= maxPatternInsts
	case "default", "const":
		return true
	case "enum", "examples":
		_, ok := v.([]any)
		return ok
	case "deprecated", "readOnly", "writeOnly", "uniqueItems":
		_, ok := v.(bool)
		return ok
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		_, ok := finite(v)
		return ok
	case "multipleOf":
		f, ok := finite(v)
		return ok && f > 0
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		n, ok := v.(json.Number)
		if !ok || len(n) == 0 || len(n) > 15 {
			return false
		}
		for _, c := range []byte(n) {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	case "required":
		a, ok := v.([]any)
		return ok && uniqueStrings(a, func(string) bool { return true })
	case "properties":
		p, ok := v.(*Object)
		if !ok {
			return false
		}
		for _, name := range p.keys {
			if !plainSchema(p.m[name], depth+1, n) {
				return false
			}
		}
		return true
	case "items", "additionalProperties", "not":
		return plainSchema(v, depth+1, n)
	case "anyOf", "oneOf", "allOf":
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			return false
		}
		for _, e := range a {
			if !plainSchema(e, depth+1, n) {
				return false
			}
		}
		return true
	}
	return false
}

// finite is a JSON number that float64 holds without overflow or underflow to zero.
func finite(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

// uniqueStrings reports whether a holds only strings, each accepted by ok, none twice.
func uniqueStrings(a []any, ok func(string) bool) bool {
	seen := make(map[string]bool, len(a))
	for _, e := range a {
		s, isStr := e.(string)
		if !isStr || !ok(s) || seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}
