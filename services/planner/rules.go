package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Rules is the default planner: it needs no network and understands explicit tool calls
// written in plain text (the grammar is in the package documentation).
type Rules struct{}

// NewRules returns the rule-based planner.
func NewRules() *Rules { return &Rules{} }

// Name is "rules", as executions record it.
func (*Rules) Name() string { return "rules" }

// Plan reads the calls the prompt writes out. A prompt it cannot read gives a
// NotUnderstood fault saying where and how to write it instead.
func (*Rules) Plan(ctx context.Context, prompt string, tools []Tool) (Plan, error) {
	if err := ctx.Err(); err != nil {
		return Plan{}, fmt.Errorf("planner: %w", err)
	}
	if strings.TrimSpace(prompt) == "" {
		return Plan{}, NotUnderstood{Message: "The prompt is empty. Write the tool calls to run, for example: " + example, Offset: -1}.err()
	}
	p := &parser{src: prompt, cat: newCatalog(tools)}
	return p.plan()
}

// parser reads a prompt left to right; pos is a byte offset into src.
type parser struct {
	src string
	pos int
	cat *catalog
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) plan() (Plan, error) {
	p.skipSpace()
	if p.atRollback() {
		return Plan{}, p.fail(p.pos, p.segmentEnd(p.pos), "The prompt starts with a rollback clause; write the calls to run first, then \"rollback: call ...\". For example: "+example)
	}
	steps, err := p.calls()
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Steps: steps}
	if p.eof() {
		return plan, nil
	}
	// calls stops only at the end or at a rollback clause.
	start := p.pos
	p.consumeRollback()
	p.skipSpace()
	if p.eof() {
		return Plan{}, p.fail(start, len(p.src), "The rollback clause has no calls; write them after it, as in: rollback: call fs__delete_file path=/tmp/x")
	}
	if p.atRollback() {
		return Plan{}, p.fail(p.pos, p.segmentEnd(p.pos), "A plan has one rollback clause; join its calls with \"then\".")
	}
	if plan.Rollback, err = p.calls(); err != nil {
		return Plan{}, err
	}
	if !p.eof() {
		return Plan{}, p.fail(p.pos, p.segmentEnd(p.pos), "A plan has one rollback clause, at its end; join the calls to undo with \"then\".")
	}
	return plan, nil
}

// calls reads calls and the separators between them, up to the end of the prompt or a
// rollback clause.
func (p *parser) calls() ([]Step, error) {
	var steps []Step
	for {
		if p.atRollback() {
			return steps, nil
		}
		step, err := p.call()
		if err != nil {
			return nil, err
		}
		steps = append(steps, step)
		sep, then := p.separators()
		if p.eof() || p.atRollback() {
			if then >= 0 && p.eof() {
				return nil, p.fail(then, len(p.src), "\"then\" must be followed by another call, as in: "+example)
			}
			return steps, nil
		}
		if !sep {
			// call checks what follows it; this guards the loop should that change.
			return nil, p.notUnderstood(p.pos, "Calls are joined by \"then\", \";\" or a new line.")
		}
	}
}

// separators skips whitespace and the words and marks that join calls. sep reports
// whether any of them was seen; then is the offset of the last "then" (-1 if none).
func (p *parser) separators() (sep bool, then int) {
	then = -1
	for {
		if p.skipSpace() {
			sep = true
		}
		switch {
		case p.eof():
			return sep, then
		case p.src[p.pos] == ';':
			p.pos++
			sep = true
		case p.src[p.pos] == ',':
			p.pos++ // ", then"
		case p.word("then"):
			then = p.pos
			p.pos += len("then")
			sep = true
		case p.word("and"):
			save := p.pos
			p.pos += len("and")
			p.skipHSpace()
			if p.word("then") || p.word("call") || p.word("run") {
				then = save
				sep = true
				continue
			}
			p.pos = save
			return sep, then
		default:
			return sep, then
		}
	}
}

// call reads one call: an optional "call" or "run", a name, and its arguments.
func (p *parser) call() (Step, error) {
	start := p.pos
	nameAt := p.pos
	name := p.name()
	if kw := strings.ToLower(name); kw == "call" || kw == "run" {
		save := p.pos
		p.skipHSpace()
		// "run cmd=ls" calls a tool named run, if there is one.
		_, notTool := p.cat.resolve(name)
		if notTool == nil && (p.eof() || p.atKey() || strings.ContainsRune("\r\n;{", rune(p.src[p.pos])) || p.atRollback() || p.followedBySeparator()) {
			p.pos = save
		} else {
			nameAt = p.pos
			name = p.name()
		}
	}
	if name == "" {
		return Step{}, p.notUnderstood(p.pos, "A tool name was expected here, as in: "+example)
	}
	if p.atEquals() {
		return Step{}, p.fail(nameAt, p.segmentEnd(nameAt), fmt.Sprintf("%s looks like an argument, but a tool name was expected first, as in: %s", quoteFragment(p.src[nameAt:p.segmentEnd(nameAt)]), example))
	}
	res, rerr := p.cat.resolve(name)
	var types map[string][]string
	if rerr == nil {
		types = p.cat.propTypes(res.tool)
	}
	args, err := p.arguments(types)
	if err == nil && !p.followedBySeparator() {
		err = p.notUnderstood(p.pos, fmt.Sprintf("Arguments are written key=value (quote values with spaces: content=\"two words\") or as one JSON object after the tool name; calls are joined by \"then\". For example: %s", example))
	}
	if rerr != nil {
		if err != nil {
			end := p.segmentEnd(start)
			return Step{}, p.fail(start, end, fmt.Sprintf("Could not understand %s: it is not a tool call (%s is not a tool). Write tool calls like: %s", quoteFragment(p.src[start:end]), quoteFragment(name), example))
		}
		return Step{}, NotUnderstood{Message: rerr.msg(), Fragment: name, Offset: nameAt}.err()
	}
	if err != nil {
		return Step{}, err
	}
	if res.operation != "" && !args.has("operation") {
		args.prepend("operation", jsonString(res.operation))
	}
	return Step{Tool: p.cat.tools[res.tool].Name, Arguments: args.json()}, nil
}

// arguments reads one JSON object or any number of key=value pairs.
func (p *parser) arguments(types map[string][]string) (*object, error) {
	args := &object{}
	save := p.pos
	p.skipHSpace()
	if !p.eof() && p.src[p.pos] == '{' {
		at := p.pos
		raw, err := p.json("the arguments object")
		if err != nil {
			return nil, err
		}
		if err := args.fromJSON(raw); err != nil {
			return nil, p.fail(at, p.pos, fmt.Sprintf("The arguments object is not valid: %v.", err))
		}
		return args, nil
	}
	p.pos = save
	for {
		save := p.pos
		p.skipSpace() // a new line may continue the arguments
		if !p.atKey() {
			p.pos = save
			return args, nil
		}
		keyAt := p.pos
		key := p.key()
		p.skipHSpace()
		p.pos++ // "="
		p.skipHSpace()
		val, err := p.value(key, types[key])
		if err != nil {
			return nil, err
		}
		if !args.add(key, val) {
			return nil, p.fail(keyAt, keyAt+len(key), fmt.Sprintf("The argument %s is given twice; give it once.", key))
		}
		p.skipHSpace()
		if !p.eof() && p.src[p.pos] == ',' {
			p.pos++
		}
	}
}

// value reads the value of key; types are what the tool's schema accepts for it.
func (p *parser) value(key string, types []string) (json.RawMessage, error) {
	if p.eof() || strings.ContainsRune("\r\n;", rune(p.src[p.pos])) {
		return nil, p.fail(p.pos, p.pos, fmt.Sprintf("The argument %s has no value; write %s=\"\" for an empty string.", key, key))
	}
	at := p.pos
	switch c := p.src[p.pos]; {
	case c == '"' || c == '\'':
		s, err := p.quoted()
		if err != nil {
			return nil, err
		}
		if err := p.boundary(); err != nil {
			return nil, err
		}
		return jsonString(s), nil
	case (c == '{' || c == '[') && !onlyString(types):
		return p.json("the value of " + key)
	}
	word := p.bare()
	v, msg := typed(word, types)
	if msg != "" {
		return nil, p.fail(at, p.pos, fmt.Sprintf("The argument %s must be %s; got %s.", key, msg, quoteFragment(word)))
	}
	return v, nil
}

// json reads one JSON value, which must end where a value may end.
func (p *parser) json(what string) (json.RawMessage, error) {
	at := p.pos
	dec := json.NewDecoder(strings.NewReader(p.src[at:]))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		end := p.segmentEnd(at)
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, p.fail(at, end, fmt.Sprintf("%s is not valid JSON (%v at byte %d); write JSON, or quote a string.", upper(what), syn, at+int(syn.Offset)-1))
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return nil, p.fail(at, end, fmt.Sprintf("%s is JSON that is not closed; check its brackets and quotes.", upper(what)))
		}
		return nil, p.fail(at, end, fmt.Sprintf("%s is not valid JSON (%v).", upper(what), err))
	}
	p.pos = at + int(dec.InputOffset())
	if err := p.boundary(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, p.fail(at, p.pos, fmt.Sprintf("%s is not valid JSON (%v).", upper(what), err))
	}
	return buf.Bytes(), nil
}

// boundary checks that a quoted or JSON value is not followed directly by more text.
func (p *parser) boundary() error {
	if p.eof() || isSpace(p.src[p.pos]) || p.src[p.pos] == ';' || p.src[p.pos] == ',' {
		return nil
	}
	return p.notUnderstood(p.pos, "A value ends with its closing quote or bracket; put a space before the next argument.")
}

// quoted reads a single- or double-quoted string with backslash escapes.
func (p *parser) quoted() (string, error) {
	q := p.src[p.pos]
	open := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.src):
			p.pos += 2
			switch e := p.src[p.pos-1]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case '/', '\\', '"', '\'':
				b.WriteByte(e)
			case 'u':
				if r, n := p.unicodeEscape(); n > 0 {
					b.WriteRune(r)
					p.pos += n
				} else {
					b.WriteString(`\u`)
				}
			default:
				// Kept as written, so C:\dir means what it says.
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.fail(open, len(p.src), fmt.Sprintf("The quote at byte %d is not closed; end the value with %c.", open, q))
}

// unicodeEscape reads the XXXX of \uXXXX at pos (and a second \uXXXX completing a
// surrogate pair); n is the bytes read, 0 when they are not an escape.
func (p *parser) unicodeEscape() (rune, int) {
	hex4 := func(at int) (rune, bool) {
		if at+4 > len(p.src) {
			return 0, false
		}
		v, err := strconv.ParseUint(p.src[at:at+4], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex4(p.pos)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) && strings.HasPrefix(p.src[p.pos+4:], `\u`) {
		if r2, ok := hex4(p.pos + 6); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 10
			}
		}
	}
	return r, 4
}

// bare reads a word up to whitespace, ";" or a comma that ends it.
func (p *parser) bare() string {
	at := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if isSpace(c) || c == ';' || c == ',' && (p.pos+1 == len(p.src) || isSpace(p.src[p.pos+1])) {
			break
		}
		p.pos++
	}
	return p.src[at:p.pos]
}

// name reads a tool name (or a keyword in a name's place).
func (p *parser) name() string {
	at := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[at:p.pos]
}

func isNameByte(c byte) bool {
	return !isSpace(c) && !strings.ContainsRune(`=;,"'{}[]`, rune(c))
}

// atKey reports whether key=value starts at pos.
func (p *parser) atKey() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	return p.atEquals()
}

// atEquals reports whether "=" follows pos, after spaces.
func (p *parser) atEquals() bool {
	save := p.pos
	defer func() { p.pos = save }()
	p.skipHSpace()
	return !p.eof() && p.src[p.pos] == '='
}

func (p *parser) key() string { return p.name() }

// followedBySeparator reports whether what follows a call may: the end, a separator or a
// rollback clause. A call with no arguments may also be followed directly by ",".
func (p *parser) followedBySeparator() bool {
	save := p.pos
	defer func() { p.pos = save }()
	sep, _ := p.separators()
	return sep || p.eof() || p.atRollback()
}

// atRollback reports whether a rollback clause ("rollback:" or "undo:") starts at pos.
func (p *parser) atRollback() bool {
	save := p.pos
	defer func() { p.pos = save }()
	return p.consumeRollback()
}

func (p *parser) consumeRollback() bool {
	for _, kw := range []string{"rollback", "undo"} {
		if len(p.src)-p.pos >= len(kw) && strings.EqualFold(p.src[p.pos:p.pos+len(kw)], kw) {
			save := p.pos
			p.pos += len(kw)
			p.skipHSpace()
			if !p.eof() && p.src[p.pos] == ':' {
				p.pos++
				return true
			}
			p.pos = save
		}
	}
	return false
}

// word reports whether the keyword w (any case) starts at pos as a whole word.
func (p *parser) word(w string) bool {
	end := p.pos + len(w)
	if end > len(p.src) || !strings.EqualFold(p.src[p.pos:end], w) {
		return false
	}
	return end == len(p.src) || isSpace(p.src[end]) || p.src[end] == ';' || p.src[end] == ','
}

// skipSpace skips whitespace and reports whether it crossed a new line.
func (p *parser) skipSpace() bool {
	nl := false
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) {
		if p.src[p.pos] == '\n' {
			nl = true
		}
		p.pos++
	}
	return nl
}

// skipHSpace skips whitespace within a line.
func (p *parser) skipHSpace() {
	for p.pos < len(p.src) && isSpace(p.src[p.pos]) && p.src[p.pos] != '\n' {
		p.pos++
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// segmentEnd is where the call containing from ends: the next new line, ";" or "then",
// for quoting the part of the prompt at fault.
func (p *parser) segmentEnd(from int) int {
	end := len(p.src)
	for i := from; i < len(p.src); i++ {
		c := p.src[i]
		if c == '\n' || c == ';' {
			end = i
			break
		}
		if i > from && isSpace(p.src[i-1]) && len(p.src)-i >= 4 && strings.EqualFold(p.src[i:i+4], "then") &&
			(i+4 == len(p.src) || isSpace(p.src[i+4])) {
			end = i
			break
		}
	}
	for end > from && (isSpace(p.src[end-1]) || p.src[end-1] == ',') {
		end--
	}
	return end
}

// notUnderstood reports the text from at to the end of its call.
func (p *parser) notUnderstood(at int, how string) error {
	end := max(p.segmentEnd(at), at)
	if end == at {
		return p.fail(at, end, fmt.Sprintf("Something is missing at byte %d. %s", at, how))
	}
	return p.fail(at, end, fmt.Sprintf("Could not understand %s at byte %d. %s", quoteFragment(p.src[at:end]), at, how))
}

func (p *parser) fail(at, end int, msg string) error {
	if end < at {
		end = at
	}
	return NotUnderstood{Message: msg, Fragment: p.src[at:end], Offset: at}.err()
}

// quoteFragment quotes a piece of the prompt for a message, shortened when long.
func quoteFragment(s string) string {
	const limit = 80
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"`
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var (
	numberRE  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	integerRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
)

// typed turns a bare word into the JSON value the schema types call for; msg says what
// was expected when the word is none of them.
func typed(word string, types []string) (v json.RawMessage, msg string) {
	if len(types) == 0 || onlyString(types) {
		return jsonString(word), ""
	}
	has := func(t string) bool { return slices.Contains(types, t) }
	switch {
	case has("null") && word == "null":
		return json.RawMessage("null"), ""
	case has("integer") && isInteger(word):
		return json.RawMessage(word), ""
	case has("number") && numberRE.MatchString(word):
		return json.RawMessage(word), ""
	case has("boolean") && (strings.EqualFold(word, "true") || strings.EqualFold(word, "false")):
		return json.RawMessage(strings.ToLower(word)), ""
	case has("string") || !slices.ContainsFunc(types, known):
		return jsonString(word), ""
	}
	var want []string
	for _, t := range []string{"integer", "number", "boolean", "array", "object", "null"} {
		if has(t) {
			want = append(want, expected[t])
		}
	}
	return nil, strings.Join(want, " or ")
}

var expected = map[string]string{
	"integer": "an integer",
	"number":  "a number",
	"boolean": "true or false",
	"array":   `a JSON array, such as ["a","b"]`,
	"object":  `a JSON object, such as {"key":"value"}`,
	"null":    "null",
}

func known(t string) bool { _, ok := expected[t]; return ok || t == "string" }

// isInteger reports whether word is a JSON number with no fractional part (JSON Schema
// counts 1.0 and 1e3 as integers).
func isInteger(word string) bool {
	if integerRE.MatchString(word) {
		return true
	}
	if !numberRE.MatchString(word) {
		return false
	}
	f, _, err := big.ParseFloat(word, 10, 64, big.ToNearestEven)
	return err == nil && f.IsInt()
}

// onlyString reports whether a schema accepts only strings for a key, so a bare word
// starting with a bracket (a pattern like [a-z]+) is not read as JSON.
func onlyString(types []string) bool {
	return len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return t != "string" })
}

// jsonString encodes s as a JSON string without HTML escaping, so <, > and & stay readable.
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// object builds a compact JSON object, keys in the order written.
type object struct {
	keys    []string
	members []json.RawMessage // `"key":value`
}

func (o *object) has(key string) bool { return slices.Contains(o.keys, key) }

func (o *object) add(key string, v json.RawMessage) bool {
	if o.has(key) {
		return false
	}
	o.keys = append(o.keys, key)
	o.members = append(o.members, member(key, v))
	return true
}

func (o *object) prepend(key string, v json.RawMessage) {
	o.keys = slices.Insert(o.keys, 0, key)
	o.members = slices.Insert(o.members, 0, member(key, v))
}

func member(key string, v json.RawMessage) json.RawMessage {
	return append(append(jsonString(key), ':'), v...)
}

// fromJSON reads the members of a compact JSON object, keeping their order and text.
func (o *object) fromJSON(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if !o.add(key, v) {
			return fmt.Errorf("the key %q is given twice", key)
		}
	}
	return nil
}

func (o *object) json() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte('}')
	return b.Bytes()
}
