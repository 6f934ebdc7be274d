package planner

import (
	"context"
	"fmt"
	"strings"
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
	plan, err := p.plan()
	if err == nil {
		return plan, nil
	}
	// Not in the grammar: read it as sentences (words.go), unless it was plainly meant
	// as a call (a mistyped tool name must not turn into another tool). When sentences
	// fail too, the grammar's message stands for what looks like a call, the
	// sentence's otherwise (it says what it understood).
	look := p.looks()
	if look == meantAsCall {
		return Plan{}, err
	}
	sr := p.cat.sentencePlan(ctx, prompt)
	if sr.err == nil {
		return sr.plan, nil
	}
	if err := ctx.Err(); err != nil { // the reading was cut short
		return Plan{}, fmt.Errorf("planner: %w", err)
	}
	if look == callLike && !sr.fitted && !sr.stands {
		return Plan{}, err
	}
	return Plan{}, sr.err
}

// How a prompt the grammar refused looks.
const (
	prose       = iota // words: read it as sentences
	callLike           // starts with a tool's name, or has key=value: try sentences; unless a tool fitted a step, explain in the grammar's terms
	meantAsCall        // a rollback clause first, or "call"/"run" or a qualified name that is no tool's: a call gone wrong
)

func (p *parser) looks() int {
	q := &parser{src: p.src, cat: p.cat}
	q.skipSpace()
	if q.atRollback() {
		return meantAsCall
	}
	// A step that says "call" and then no tool's name was meant as a call.
	sp := splitSteps(p.src)
	for _, part := range append(sp.run, sp.undo...) {
		r := &parser{src: part.text, cat: p.cat}
		if kw := r.name(); strings.EqualFold(kw, "call") || strings.EqualFold(kw, "run") && r.eof() {
			r.skipHSpace()
			if _, rerr := p.cat.resolve(r.name()); rerr != nil {
				return meantAsCall
			}
		}
	}
	name := q.name()
	if kw := strings.ToLower(name); kw == "call" || kw == "run" {
		q.skipHSpace()
		if n := q.name(); n != "" {
			name = n
		}
	}
	_, rerr := p.cat.resolve(name)
	switch {
	case name == "":
		return prose
	case rerr != nil && strings.Contains(name, "__"):
		return meantAsCall
	case rerr == nil:
		return callLike
	}
	if keyValRE.MatchString(strings.TrimSpace(p.src)) || strings.Contains(p.src, "=") {
		return callLike
	}
	return prose
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
