package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Parameter setting modes.
const (
	ModeNone    = ""        // the caller decides (the tool's own default applies)
	ModeDefault = "default" // used when the caller gives no value
	ModeFixed   = "fixed"   // always used; a caller may not give another value
)

// Mask stands for a stored secret value wherever configuration is shown or sent back: an
// API client that sends it back keeps the stored value.
const Mask = "********"

// Setting is what one parameter is given by the tool's configuration.
type Setting struct {
	Mode   string          `json:"mode"`             // default or fixed
	Value  json.RawMessage `json:"value,omitempty"`  // the JSON value (not secret)
	Secret string          `json:"secret,omitempty"` // the JSON value encrypted (secret parameters)
}

// Configuration is a tool's per-parameter settings (mcp_tools.configuration).
type Configuration struct {
	Params map[string]Setting `json:"params,omitempty"`
}

// Declared is c without the settings of parameters inputSchema does not have (a new
// definition dropped or renamed them): calls are not sent them, nor held to them.
func (c Configuration) Declared(inputSchema json.RawMessage) Configuration {
	if len(c.Params) == 0 {
		return c // nothing to look up: the schema is not read
	}
	pr := props(inputSchema)
	var out Configuration
	for name, st := range c.Params {
		if _, ok := pr[name]; !ok {
			continue
		}
		if out.Params == nil {
			out.Params = map[string]Setting{}
		}
		out.Params[name] = st
	}
	return out
}

// CodeFixedParamDropped is the code of the finding that a tool's configuration fixes
// parameters its definition no longer has (droppedFixedFinding).
const CodeFixedParamDropped = "fixed_param_dropped"

// droppedFixed lists, sorted, the parameters c fixes that inputSchema does not have:
// calls are no longer given those values (Declared), so the restriction a person chose
// is gone.
func (c Configuration) droppedFixed(inputSchema json.RawMessage) []string {
	var fixed []string
	for name, st := range c.Params {
		if st.Mode == ModeFixed {
			fixed = append(fixed, name)
		}
	}
	if len(fixed) == 0 {
		return nil // nothing to look up: the schema is not read
	}
	pr := props(inputSchema)
	fixed = slices.DeleteFunc(fixed, func(name string) bool { _, ok := pr[name]; return ok })
	slices.Sort(fixed)
	return fixed
}

// droppedFixedFinding is the warning that c fixes the parameters dropped
// (droppedFixed), naming each with its value (not a secret's). A warning, so a person
// may still enable the tool; auto-enable policies leave it to a person (autoEnable).
func droppedFixedFinding(c Configuration, dropped []string) schema.Finding {
	const listed = 10 // the message names at most this many; the rest are counted
	parts := make([]string, 0, min(len(dropped), listed)+1)
	for i, name := range dropped {
		if i == listed {
			parts = append(parts, fmt.Sprintf("%d more", len(dropped)-listed))
			break
		}
		st := c.Params[name]
		v := "a secret value"
		if st.Secret == "" {
			v = textcheck.Clip(string(st.Value), 64, "…")
		}
		parts = append(parts, fmt.Sprintf("%s to %s", textcheck.Clip(name, 64, "…"), v))
	}
	list := strings.Join(parts, ", ")
	if n := len(parts); n > 1 {
		list = strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	it, value, made, settings := "that parameter", "value", "restriction it made no longer holds", "the setting"
	if len(dropped) > 1 {
		it, value, made, settings = "those parameters", "values", "restrictions they made no longer hold", "these settings"
	}
	msg := "The tool's configuration fixes " + list + ", but this definition no longer has " + it +
		": calls are not given the fixed " + value + ", so the " + made + ". Review the configuration and save it " +
		"(saving drops " + settings + "), then validate the tool again. Auto-enable policies do not enable the tool while this is reported."
	return schema.Finding{Path: "/inputSchema/properties", Code: CodeFixedParamDropped, Severity: schema.SeverityWarning, Message: msg}
}

func parseConfiguration(raw []byte) Configuration {
	var c Configuration
	_ = json.Unmarshal(raw, &c) // a row written by an older version may hold anything: start empty
	if c.Params == nil {
		c.Params = map[string]Setting{}
	}
	return c
}

// ParamInput is the new setting of one parameter.
type ParamInput struct {
	Mode string // ModeNone, ModeDefault or ModeFixed
	// Value is the JSON value. For a secret parameter nil (or the JSON string Mask)
	// keeps the stored value.
	Value json.RawMessage
	// Text is what a form field held; used when Value is nil, converted by the
	// parameter's type ("3" is the number 3 for an integer parameter).
	Text *string
	// Secret stores the value encrypted whatever the parameter's name or the value's
	// look: a configuration file that says `secret:` is believed.
	Secret bool
}

// ConfigParam is one top-level parameter of a tool with its current setting, for the
// form generated from the input schema.
type ConfigParam struct {
	schema.Param
	Secret bool   // the value is encrypted and never shown
	Mode   string // ModeNone, ModeDefault, ModeFixed
	// Value is the configured value as JSON text ("" for none, and for secrets).
	Value string
	// Text is the value as a form input shows it: strings without quotes.
	Text string
	// Kind is the input a form should use: text, number, integer, boolean, enum, json.
	Kind string
	// Stored reports whether a secret value is stored.
	Stored bool
}

// props returns the top-level parameters of an input schema, each as its resolved schema.
func props(inputSchema json.RawMessage) map[string]map[string]any {
	return schema.PropertySchemas(inputSchema)
}

// TypedSecret reports whether text typed for a parameter of form input kind (ConfigParam.Kind)
// carries a credential (secrets.HoldsSecret), read as saving reads it: a text
// parameter's as it is, another's as JSON. Such a value is stored encrypted, and a form
// shown again does not carry it back.
func TypedSecret(text, kind string) bool {
	var v any = text
	if kind != "text" {
		if json.Unmarshal([]byte(text), &v) != nil {
			v = text
		}
	}
	return secrets.HoldsSecret(v)
}

// IsSecretParam reports whether a parameter holds a secret: by its name (api_key,
// password, token...), or because its schema says format "password" or writeOnly. It sees
// the property only; SecretParams also sees secrets marked deeper.
func IsSecretParam(name string, prop map[string]any) bool {
	if secrets.LooksSecretName(name) {
		return true
	}
	if f, _ := prop["format"].(string); f == "password" {
		return true
	}
	if w, _ := prop["writeOnly"].(bool); w {
		return true
	}
	return false
}

// SecretParams reads the input schema once and returns whether its top-level parameter
// name (prop: its resolved schema, as props gives it) holds a secret: by IsSecretParam,
// or because the schema marks a secret anywhere in its value (SecretArgNames: a $ref,
// anyOf/oneOf/allOf, a nested member or array item), as call arguments are masked.
func SecretParams(inputSchema json.RawMessage) func(name string, prop map[string]any) bool {
	tops := map[string]bool{} // first tokens, escaped; anyItem: members the schema names by no property
	for _, n := range SecretArgNames(inputSchema) {
		if !strings.HasPrefix(n, "/") {
			tops[escapeToken(n)] = true
			continue
		}
		tok, _, _ := strings.Cut(n[1:], "/")
		tops[tok] = true
	}
	// A secret under additionalProperties or patternProperties is one place for every
	// member (anyItem), which masks call arguments safely but would hide every setting.
	// A setting is a declared property, which additionalProperties never covers: only a
	// patternProperties key matching its name may (any such key, whatever it marks).
	var patterns []*regexp.Regexp
	all := false // the source cannot be told (a composed root, a pattern Go cannot read): every setting
	if tops[anyItem] {
		var root map[string]json.RawMessage
		_ = json.Unmarshal(inputSchema, &root)
		for _, k := range []string{"$ref", "allOf", "anyOf", "oneOf"} {
			if _, ok := root[k]; ok {
				all = true
			}
		}
		var pp map[string]json.RawMessage
		_ = json.Unmarshal(root["patternProperties"], &pp)
		for k := range pp {
			re, err := regexp.Compile(k)
			if err != nil {
				all = true
				continue
			}
			patterns = append(patterns, re)
		}
	}
	return func(name string, prop map[string]any) bool {
		return all || IsSecretParam(name, prop) || tops[escapeToken(name)] ||
			slices.ContainsFunc(patterns, func(re *regexp.Regexp) bool { return re.MatchString(name) })
	}
}

// types lists a property's JSON types ("type" as a string or a list).
func types(prop map[string]any) []string {
	switch t := prop["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// kind picks the form input for a property.
func kind(prop map[string]any) string {
	if e, ok := prop["enum"].([]any); ok && len(e) > 0 {
		return "enum"
	}
	ts := slices.DeleteFunc(types(prop), func(t string) bool { return t == "null" })
	if len(ts) == 1 {
		switch ts[0] {
		case "string":
			return "text"
		case "number", "integer", "boolean":
			return ts[0]
		}
	}
	return "json"
}

// ConfigParams lists the tool's top-level parameters with their settings, in the order
// of the schema, secrets masked.
func ConfigParams(t Item, c Configuration) []ConfigParam {
	pr, isSecret := props(t.InputSchema), SecretParams(t.InputSchema)
	var out []ConfigParam
	for _, p := range schema.Parameters(t.InputSchema) {
		prop := pr[p.Name]
		cp := ConfigParam{Param: p, Secret: isSecret(p.Name, prop), Kind: kind(prop)}
		if st, ok := c.Params[p.Name]; ok {
			cp.Mode = st.Mode
			cp.Secret = cp.Secret || st.Secret != ""
			if cp.Secret || st.Secret != "" {
				cp.Stored = st.Secret != ""
			} else {
				cp.Value = string(st.Value)
				cp.Text = textOf(st.Value)
			}
		}
		out = append(out, cp)
	}
	return out
}

// textOf shows a JSON value as a form field holds it: strings bare, the rest as JSON.
func textOf(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// maxNumberText bounds a number typed into a setting (PostgreSQL's numeric holds at most
// 16,383 decimals, and reading a long decimal exactly costs more than linear time).
const maxNumberText = 1000

var (
	wholeNumber  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	plainDecimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)
)

// fromText converts what a form field held to the JSON value the property's type wants.
func fromText(text string, prop map[string]any) (json.RawMessage, string) {
	ts := types(prop)
	has := func(t string) bool { return slices.Contains(ts, t) }
	trimmed := strings.TrimSpace(text)
	if e, ok := prop["enum"].([]any); ok {
		for _, v := range e {
			b, _ := json.Marshal(v)
			if textOf(b) == text {
				return b, ""
			}
		}
		return nil, "must be one of the listed values"
	}
	switch {
	case (has("integer") || has("number")) && !has("string") && len(trimmed) > maxNumberText:
		return nil, fmt.Sprintf("is longer than %d characters: no number needs that many digits", maxNumberText)
	case has("integer") && !has("string"):
		// An id past 2^63 is a whole number too, kept as typed.
		if !wholeNumber.MatchString(trimmed) {
			return nil, "must be a whole number"
		}
		return json.RawMessage(trimmed), ""
	case has("number") && !has("string"):
		f, err := strconv.ParseFloat(trimmed, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, "must be a number"
		}
		if plainDecimal.MatchString(trimmed) {
			// Digits a float64 cannot hold are kept as typed (0.1000000000000000055 is not 0.1).
			if r, ok := new(big.Rat).SetString(trimmed); ok && r.Cmp(new(big.Rat).SetFloat64(f)) != 0 {
				return json.RawMessage(trimmed), ""
			}
		}
		return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64)), ""
	case has("boolean") && !has("string"):
		switch trimmed {
		case "true", "on", "1":
			return json.RawMessage("true"), ""
		case "false", "off", "0":
			return json.RawMessage("false"), ""
		}
		return nil, "must be true or false"
	case has("string") || len(ts) == 0 && prop["properties"] == nil && prop["items"] == nil:
		if len(ts) == 0 && json.Valid([]byte(trimmed)) && trimmed != "" {
			if problem := textcheck.Problem([]byte(trimmed)); problem != "" {
				return nil, problem
			}
			return json.RawMessage(trimmed), "" // an untyped parameter given JSON
		}
		b, _ := json.Marshal(text)
		return b, ""
	}
	if !json.Valid([]byte(trimmed)) {
		return nil, "must be JSON (for example [\"a\", \"b\"] or {\"key\": \"value\"})"
	}
	if problem := textcheck.Problem([]byte(trimmed)); problem != "" {
		return nil, problem // PostgreSQL would refuse it where the settings are stored
	}
	return json.RawMessage(trimmed), ""
}

// applyParams computes the new parameter configuration from inputs (nil: unchanged), with
// secrets encrypted bound to the tool and parameter. Errors name "params.<name>".
// CheckParams checks in as Update would apply it to tool id's parameters, changing
// nothing: a verr.Error names each parameter it would refuse.
func (s *Service) CheckParams(ctx context.Context, id string, in map[string]ParamInput) error {
	t, err := getItem(ctx, s.pool, id, false)
	if err != nil {
		return err
	}
	var raw []byte
	if err := s.pool.QueryRow(ctx, `/* tools.CheckParams */ SELECT configuration FROM mcp_tools WHERE id = $1`, id).Scan(&raw); err != nil {
		return fmt.Errorf("tools: configuration: %w", err)
	}
	e := &verr.Error{}
	if _, err := s.applyParams(t, parseConfiguration(raw), in, e); err != nil {
		return err
	}
	return e.Err()
}

func (s *Service) applyParams(t Item, cur Configuration, in map[string]ParamInput, e *verr.Error) (Configuration, error) {
	if in == nil {
		return cur, nil
	}
	pr, isSecret := props(t.InputSchema), SecretParams(t.InputSchema)
	next := Configuration{Params: map[string]Setting{}}
	values := map[string]any{}
	hidden := map[string]bool{} // parameters whose values are stored encrypted: never shown
	for _, name := range slices.Sorted(maps.Keys(in)) {
		pi := in[name]
		field := "params." + name
		if pi.Mode == ModeNone || pi.Mode == "none" {
			continue
		}
		if pi.Mode != ModeDefault && pi.Mode != ModeFixed {
			e.Add(field, "mode must be default or fixed")
			continue
		}
		prop, ok := pr[name]
		if !ok {
			e.Add(field, fmt.Sprintf("the tool has no parameter %q", name))
			continue
		}
		// A value stored encrypted (the parameter is secret, or its value looked like a
		// credential) stays secret: blank keeps it, and it is never shown again.
		secret := pi.Secret || isSecret(name, prop) || cur.Params[name].Secret != ""
		hidden[name] = secret
		val := pi.Value
		if val == nil && pi.Text != nil && !(secret && *pi.Text == "") {
			v, msg := fromText(*pi.Text, prop)
			if msg != "" {
				e.Add(field, msg)
				continue
			}
			val = v
		}
		if secret && (val == nil || bytes.Equal(bytes.TrimSpace(val), []byte(`"`+Mask+`"`))) {
			switch old, ok := cur.Params[name]; {
			case ok && old.Secret != "":
				next.Params[name] = Setting{Mode: pi.Mode, Secret: old.Secret}
				if plain, err := s.keys.Decrypt(old.Secret, configAAD(t.ID, name)); err == nil {
					values[name] = decodeAny(plain)
				}
				continue
			case ok && old.Value != nil:
				// Stored in clear before its parameter was known to be secret (a secret
				// marked deeper in its schema): the form hid it, and saving encrypts it.
				val = old.Value
			default:
				e.Add(field, "enter a value: this secret parameter has none stored")
				continue
			}
		}
		if val == nil || !json.Valid(val) {
			e.Add(field, "enter a value")
			continue
		}
		values[name] = decodeAny(val)
		if secret || secrets.HoldsSecret(values[name]) {
			hidden[name] = true
			c, err := s.keys.Encrypt(val, configAAD(t.ID, name))
			if err != nil {
				return cur, fmt.Errorf("tools: encrypt %s: %w", name, err)
			}
			next.Params[name] = Setting{Mode: pi.Mode, Secret: c}
			continue
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, val)
		next.Params[name] = Setting{Mode: pi.Mode, Value: compact.Bytes()}
	}
	checkValues(t.InputSchema, values, hidden, e)
	return next, nil
}

// checkValues validates configured values against the input schema: each must be a value
// the parameter accepts (the call as a whole may still need other arguments).
func checkValues(inputSchema json.RawMessage, values map[string]any, hidden map[string]bool, e *verr.Error) {
	if len(values) == 0 {
		return
	}
	sch, err := schema.CompileSchema(inputSchema)
	if err != nil {
		return // the definition's own findings say why; the values cannot be checked
	}
	err = schema.ValidateArgumentsHiding(sch, values, hidden)
	ve, ok := err.(*verr.Error)
	if !ok {
		return
	}
	for _, f := range ve.Fields {
		token, _, _ := strings.Cut(strings.TrimPrefix(f.Field, "/"), "/")
		name := pointerUnescape.Replace(token) // "a~1b" is the parameter "a/b"
		if _, set := values[name]; set && f.Field != "" && !(f.Message == "is required" && f.Field == "/"+token) {
			// A secret's value is never shown again: validation quoted none of it.
			e.Add("params."+name, strings.TrimSpace(strings.TrimPrefix(f.Field, "/"+token)+" "+f.Message))
		}
	}
}

// pointerUnescape reads one JSON pointer token (RFC 6901: "~1" is "/", "~0" is "~").
var pointerUnescape = strings.NewReplacer("~1", "/", "~0", "~")

func decodeAny(raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	_ = dec.Decode(&v)
	return v
}

// configAAD binds a secret configuration value to its tool and parameter.
func configAAD(toolID, param string) string { return "mcp_tools/" + toolID + "/configuration/" + param }

// Resolved are a tool's configured values, decrypted, as the router merges them.
type Resolved struct {
	Defaults map[string]json.RawMessage
	Fixed    map[string]json.RawMessage
	// Secret names the fixed values stored encrypted: a caller may not send one even
	// when it is the same, or the answer would tell whether a guess was right.
	Secret map[string]bool
}

// Resolve decrypts a tool's configuration for a call.
func (s *Service) Resolve(toolID string, c Configuration) (Resolved, error) {
	r := Resolved{Defaults: map[string]json.RawMessage{}, Fixed: map[string]json.RawMessage{}, Secret: map[string]bool{}}
	for name, st := range c.Params {
		v := st.Value
		if st.Secret != "" {
			plain, err := s.keys.Decrypt(st.Secret, configAAD(toolID, name))
			if err != nil {
				return r, fmt.Errorf("tools: decrypt %s: %w", name, err)
			}
			v = plain
		}
		if st.Mode == ModeFixed {
			r.Fixed[name], r.Secret[name] = v, st.Secret != ""
		} else {
			r.Defaults[name] = v
		}
	}
	return r, nil
}

// Merge applies configured values to a call's arguments: defaults fill parameters the
// caller left out; fixed values are always used, and a caller that gives a different
// value for one gets an error naming it (rather than a silently changed call); for a
// secret one, any value it gives; for a key that differs from a fixed name only in
// case, any value.
func (r Resolved) Merge(args map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(args)+len(r.Defaults)+len(r.Fixed))
	maps.Copy(out, args)
	e := &verr.Error{}
	for _, name := range slices.Sorted(maps.Keys(r.Fixed)) {
		v := r.Fixed[name]
		// A key that differs only in case reaches the server beside the fixed one, and a
		// server binding with encoding/json (case-insensitive, last key wins) may take it.
		// strings.EqualFold folds as encoding/json does (Unicode simple folding: K, ſ).
		for _, key := range slices.Sorted(maps.Keys(args)) {
			if key != name && strings.EqualFold(key, name) {
				e.Add("/"+key, fmt.Sprintf("is the parameter %q, which is fixed by the tool's configuration and cannot be set by the caller", name))
			}
		}
		if given, ok := args[name]; ok && (r.Secret[name] || !jsonSame(given, v)) {
			e.Add("/"+name, "is fixed by the tool's configuration and cannot be set by the caller")
			continue
		}
		out[name] = v
	}
	for name, v := range r.Defaults {
		if _, ok := out[name]; !ok {
			out[name] = v
		}
	}
	return out, e.Err()
}

func jsonSame(a, b json.RawMessage) bool {
	x, _ := json.Marshal(decodeAny(a))
	y, _ := json.Marshal(decodeAny(b))
	return bytes.Equal(x, y)
}

// SecretIn returns whether c's setting of a parameter is to be treated as a secret
// wherever it leaves the server: stored encrypted, or stored in clear under a parameter
// inputSchema (the tool's current definition) marks secret (SecretParams, a secret
// nested in its value included). A value saved before a new definition marked it
// secret is encrypted by the discovery that stores the definition (SealNowSecret), or
// by the next save (applyParams), and must not be shown before. The schema is read only
// when a clear value needs it.
func (c Configuration) SecretIn(inputSchema json.RawMessage) func(name string) bool {
	var pr map[string]map[string]any
	var isSecret func(string, map[string]any) bool
	return func(name string) bool {
		if c.Params[name].Secret != "" {
			return true
		}
		if isSecret == nil {
			pr, isSecret = props(inputSchema), SecretParams(inputSchema)
		}
		return isSecret(name, pr[name])
	}
}

// masked is a configuration as people and audit rows may see it: secret values masked,
// as the tool's current input schema decides them too (SecretIn).
func (c Configuration) masked(inputSchema json.RawMessage) map[string]any {
	out := map[string]any{}
	secret := c.SecretIn(inputSchema)
	for name, st := range c.Params {
		m := map[string]any{"mode": st.Mode}
		if secret(name) {
			m["value"] = Mask
			m["secret"] = true
		} else {
			m["value"] = st.Value
		}
		out[name] = m
	}
	return out
}

// FixedParams are the parameters the configuration fixes, sorted, with their values as
// JSON text ("" for a secret one, whose value is never shown: stored encrypted, or one the
// tool's current schema, inputSchema, marks secret though stored in clear; SecretIn).
func (c Configuration) FixedParams(inputSchema json.RawMessage) (names, values []string) {
	secret := c.SecretIn(inputSchema)
	for _, name := range slices.Sorted(maps.Keys(c.Params)) {
		st := c.Params[name]
		if st.Mode != ModeFixed {
			continue
		}
		v := string(st.Value)
		if secret(name) {
			v = ""
		}
		names, values = append(names, name), append(values, v)
	}
	return names, values
}

// CallerSchema is input without the top-level parameters in fixed: what a caller may
// still give (the router adds the fixed values, and refuses another value for one).
// Parameters of inline allOf parts are top-level parameters too; a $ref'd definition is
// left as it is, as it may serve elsewhere. input is returned as it is when it fixes
// nothing or is not an object schema.
func CallerSchema(input json.RawMessage, fixed []string) json.RawMessage {
	if len(fixed) == 0 {
		return input
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(input, &top) != nil || top == nil {
		return input
	}
	withoutFixed(top, fixed)
	var parts []json.RawMessage
	if raw, ok := top["allOf"]; ok && json.Unmarshal(raw, &parts) == nil {
		for i, raw := range parts {
			var part map[string]json.RawMessage
			if json.Unmarshal(raw, &part) == nil && part != nil {
				withoutFixed(part, fixed)
				parts[i], _ = json.Marshal(part)
			}
		}
		top["allOf"], _ = json.Marshal(parts)
	}
	out, err := json.Marshal(top)
	if err != nil {
		return input
	}
	return out
}

// withoutFixed takes the names in fixed out of an object schema's properties and
// required list.
func withoutFixed(obj map[string]json.RawMessage, fixed []string) {
	var props map[string]json.RawMessage
	if raw, ok := obj["properties"]; ok && json.Unmarshal(raw, &props) == nil && props != nil {
		for _, name := range fixed {
			delete(props, name)
		}
		obj["properties"], _ = json.Marshal(props)
	}
	var required []string
	if raw, ok := obj["required"]; ok && json.Unmarshal(raw, &required) == nil {
		required = slices.DeleteFunc(required, func(n string) bool { return slices.Contains(fixed, n) })
		if len(required) == 0 {
			delete(obj, "required") // an empty list is invalid in draft-04 schemas
		} else {
			obj["required"], _ = json.Marshal(required)
		}
	}
}

// APIView is the configuration in the public shape: {"defaults":{...},"fixed":{...}},
// secret values as Mask, as inputSchema (the tool's current definition) decides them
// too (SecretIn). A client that sends Mask back keeps the stored value (applyParams).
func (c Configuration) APIView(inputSchema json.RawMessage) map[string]map[string]json.RawMessage {
	out := map[string]map[string]json.RawMessage{"defaults": {}, "fixed": {}}
	secret := c.SecretIn(inputSchema)
	for name, st := range c.Params {
		v := st.Value
		if secret(name) {
			v = json.RawMessage(`"` + Mask + `"`)
		}
		if st.Mode == ModeFixed {
			out["fixed"][name] = v
		} else {
			out["defaults"][name] = v
		}
	}
	return out
}

// ParamInputs reads a configuration as the inputs of an update. The public shape
// ({"defaults":{...},"fixed":{...}}) replaces the whole parameter configuration; a flat
// map of default values ({"units":"metric"}, the shape DESIGN §1 leaves open and seed
// 004 uses) sets those defaults and keeps the rest (merge, Patch.MergeParams). A map
// mixing the two is refused rather than guessed at.
func ParamInputs(raw json.RawMessage) (inputs map[string]ParamInput, merge bool, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, false, verr.New("configuration", `must be an object: {"defaults": {...}, "fixed": {...}} or {"<parameter>": <default value>, ...}`)
	}
	shaped := 0
	for k := range top {
		if k == "defaults" || k == "fixed" {
			shaped++
		}
	}
	if shaped == 0 && len(top) > 0 { // {} is the public shape with nothing set: it clears
		out := make(map[string]ParamInput, len(top))
		for name, val := range top {
			out[name] = ParamInput{Mode: ModeDefault, Value: val}
		}
		return out, true, nil
	}
	if shaped != len(top) {
		return nil, false, verr.New("configuration", `mixes "defaults"/"fixed" with parameter names: send {"defaults": {...}, "fixed": {...}} `+
			`(a tool with a parameter named defaults or fixed needs this form) or a flat map of default values`)
	}
	var v struct {
		Defaults map[string]json.RawMessage `json:"defaults"`
		Fixed    map[string]json.RawMessage `json:"fixed"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, verr.New("configuration", `"defaults" and "fixed" must each be an object of parameter values `+
			`(for a parameter named defaults or fixed: {"defaults": {"defaults": …}}): `+err.Error())
	}
	out := map[string]ParamInput{}
	e := &verr.Error{}
	for name, val := range v.Defaults {
		out[name] = ParamInput{Mode: ModeDefault, Value: val}
	}
	for name, val := range v.Fixed {
		if _, dup := out[name]; dup {
			e.Add("params."+name, "is both a default and fixed; choose one")
		}
		out[name] = ParamInput{Mode: ModeFixed, Value: val}
	}
	return out, false, e.Err()
}
