package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// Sentences. When a prompt is not written in the grammar, Rules reads it as plain
// words: each step ("then", ";" or a new line between steps, outside quotes; at most
// maxSteps) is matched to the tool whose name and description share the most words
// with it, and its arguments are filled from the tool's input schema: key=value pairs
// as in the grammar, quoted strings to string parameters in order, numbers to number
// parameters in order, a word naming one of a parameter's enum values to that
// parameter, URLs and paths to parameters named for them, and, for a tool with one
// required string left empty, the words left over. "echo 'hello'" and "add 17 and 25"
// become plans. Two tools that fit equally are named, with the words each matched, and
// nothing is chosen; a sentence no tool fits says what was understood of it; a step
// that says not to do something is refused.

// literal is a value written in a sentence.
type literal struct {
	kind string // "string" (quoted), "number", "url", "path", "word"
	text string
	used bool
}

// sentence is one step's words and values.
type sentence struct {
	words    []string          // lower-case words, in order (stop words included)
	raw      []string          // the same words as written
	literals []*literal        // quoted strings, numbers, URLs, paths, in order
	explicit []string          // keys of key=value pairs, in order
	values   map[string]string // key=value pairs as written
}

var (
	tokenRE  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[A-Za-z_][\w.-]*\s*=\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S+)|[a-z][a-z0-9+.-]*://\S+|[~.]?/\S*|-?\d+(?:\.\d+)?\b|[\pL\pN_][\pL\pN_.'-]*`)
	keyValRE = regexp.MustCompile(`^([A-Za-z_][\w.-]*)\s*=\s*(.*)$`)
)

func readSentence(s string) sentence {
	out := sentence{values: map[string]string{}}
	for _, tok := range tokenRE.FindAllString(s, -1) {
		switch c := tok[0]; {
		case c == '"' || c == '\'':
			out.literals = append(out.literals, &literal{kind: "string", text: unquote(tok)})
		case keyValRE.MatchString(tok) && !strings.Contains(tok, "://"):
			m := keyValRE.FindStringSubmatch(tok)
			v := m[2]
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
				v = unquote(v)
			}
			if _, dup := out.values[m[1]]; !dup {
				out.explicit = append(out.explicit, m[1])
			}
			out.values[m[1]] = v
		case strings.Contains(tok, "://"):
			out.literals = append(out.literals, &literal{kind: "url", text: strings.TrimRight(tok, ".,)")})
		case c == '/' || c == '~' || c == '.' && len(tok) > 1 && tok[1] == '/':
			out.literals = append(out.literals, &literal{kind: "path", text: strings.TrimRight(tok, ".,)")})
		case (c == '-' || c >= '0' && c <= '9') && numberRE.MatchString(tok):
			out.literals = append(out.literals, &literal{kind: "number", text: tok})
		default:
			w := strings.Trim(tok, ".'-")
			if w == "" {
				continue
			}
			out.words = append(out.words, strings.ToLower(w))
			out.raw = append(out.raw, w)
		}
	}
	return out
}

// unquote is a quoted token's text: the quotes removed, \" \' \\ \n \t understood.
func unquote(tok string) string {
	body := tok[1 : len(tok)-1]
	if !strings.Contains(body, `\`) {
		return body
	}
	r := strings.NewReplacer(`\"`, `"`, `\'`, `'`, `\\`, `\`, `\n`, "\n", `\t`, "\t")
	return r.Replace(body)
}

// stopWords carry no meaning for choosing a tool.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or of to in on for with from by at into please call run use using tool tools
		me my i you it its this that these those is are be was do does can could would should will shall want need
		some any all what which how as then also just now up out via about named called value values number numbers
		string text let us our your their them s`) {
		stopWords[w] = true
	}
}

// negators are words that say not to do something. The words of a step are a bag, not
// a parse: what a negation governs cannot be told, and dropping it would plan the
// opposite of what was asked ("don't write 'hi' to /tmp/x"), so a step that has one
// outside its quoted text is not planned.
var negators = map[string]bool{}

func init() {
	// The second line: contractions written without their apostrophe. The third: words
	// that negate by what they name, which left in would also be taken as the value of
	// a path or content ("delete nothing", "write none to /tmp/x"). The fourth: words
	// that say to leave a step out ("skip: delete /tmp/b").
	for _, w := range strings.Fields(`not no never without nor neither cannot
		dont doesnt didnt cant wont shouldnt mustnt isnt arent wasnt werent hasnt havent hadnt wouldnt couldnt neednt shant aint
		nothing none nobody noone no-one nowhere
		skip skipping avoid avoiding except excepting unless refrain exclude excluding`) {
		negators[w] = true
	}
}

// apostrophes are the letters written for an apostrophe, each read as ' when a word is
// looked up among the negators: being letters (U+02B9, U+02BB, U+02BC, U+02BD, and
// saltillo U+A78C), they keep "donʼt" one word. Other marks (’ ＇ `) end a word, and
// "don" then "t" is read as "don't" below. Only words are looked up, never a quoted
// value, and no word's text is changed.
var apostrophes = strings.NewReplacer("\u02B9", "'", "\u02BB", "'", "\u02BC", "'", "\u02BD", "'", "\uA78C", "'")

// negation is the word, as written, by which sentence s says not to do something, or "".
func negation(s sentence) string {
	for k, w := range s.words {
		// An apostrophe-like letter before or after a word ("ʻnoneʼ") is a quote mark.
		w = strings.Trim(apostrophes.Replace(w), "'")
		switch {
		case negators[w], strings.HasSuffix(w, "n't"):
			return s.raw[k]
		case w == "t" && k > 0 && strings.HasSuffix(s.words[k-1], "n"):
			return s.raw[k-1] + "’t" // don’t, read as "don" and "t"
		}
	}
	return ""
}

// synonyms map words to the word tools are usually named with.
var synonyms = map[string]string{}

func init() {
	for canon, words := range map[string]string{
		"add":      "sum plus addition total adding added",
		"subtract": "minus difference subtraction",
		"multiply": "times product multiplication",
		"divide":   "division quotient",
		"echo":     "repeat say print",
		"read":     "show cat open view display",
		"write":    "save store put",
		"create":   "make new",
		"list":     "ls enumerate",
		"delete":   "remove rm erase drop",
		"search":   "find grep look lookup query",
		"get":      "fetch retrieve obtain",
		"weather":  "forecast temperature",
		"rename":   "move mv",
		"copy":     "cp duplicate",
		"time":     "clock date",
	} {
		for _, w := range strings.Fields(words) {
			synonyms[w] = canon
		}
	}
}

// norm is the form words are compared in: lower case, a plural or verb ending
// dropped, a synonym replaced by its usual word.
func norm(w string) string {
	w = strings.ToLower(w)
	if c, ok := synonyms[w]; ok {
		return c
	}
	for _, suf := range []string{"ing", "es", "ed", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			stem := strings.TrimSuffix(w, suf)
			if c, ok := synonyms[stem]; ok {
				return c
			}
			if suf == "s" || suf == "es" {
				return stem
			}
		}
	}
	return w
}

// sentenceResult is a sentence plan's outcome: fitted says whether a tool fitted some
// step (a refusal is then about that tool, or a later step); stands, that the refusal
// is the sentence reading's own (a step negated, too many steps) and is what to show.
type sentenceResult struct {
	plan   Plan
	err    error
	fitted bool
	stands bool
}

// toolFit is how well a tool fits a sentence, and why.
type toolFit struct {
	tool    int
	score   int
	matched []string // the sentence's words the tool's name or description has
	args    *object  // built for the chosen tool only
	problem string   // why the arguments cannot be filled ("" when they can)
}

// stepWords is a step's words as fit and fill compare them, read once per step rather
// than once per tool.
type stepWords struct {
	norms  []string         // each word's norm, "" for a stop word or one already seen
	joined string           // the words joined by "_", a tool's name written out
	has    map[string]bool  // the words themselves
	stop   []bool           // whether each word is a stop word
	rawAt  map[string][]int // where each word, as written, is
	enums  map[string]enumWord
}

// enumWord is where a word, or two words joined, that could name an enum value first is.
type enumWord struct {
	rank   int  // 3 × the word's position, +0 for "a_b", +1 for "a-b", +2 for the word alone
	joined bool // it has "_" or "-", and so uses the next word too
}

func readStepWords(s sentence) *stepWords {
	sw := &stepWords{norms: make([]string, len(s.words)), joined: strings.Join(s.words, "_"), has: map[string]bool{},
		stop: make([]bool, len(s.words)), rawAt: map[string][]int{}}
	seen := map[string]bool{}
	for k, w := range s.words {
		sw.has[w] = true
		sw.rawAt[s.raw[k]] = append(sw.rawAt[s.raw[k]], k)
		if stopWords[w] {
			sw.stop[k] = true
			continue
		}
		if n := norm(w); !seen[n] {
			seen[n] = true
			sw.norms[k] = n
		}
	}
	return sw
}

// enumWords maps the fold key of each word, and of each two words joined by "_" or "-",
// to where it first is; built on first use, as few steps name an enum value.
func (sw *stepWords) enumWords(s sentence) map[string]enumWord {
	if sw.enums != nil {
		return sw.enums
	}
	sw.enums = map[string]enumWord{}
	var buf []byte
	put := func(rank int) {
		if _, ok := sw.enums[string(buf)]; !ok {
			sw.enums[string(buf)] = enumWord{rank: rank, joined: bytes.ContainsAny(buf, "_-")}
		}
	}
	for k, w := range s.words {
		if k+1 < len(s.words) {
			for d, sep := range []byte("_-") {
				buf = foldKey(append(foldKey(buf[:0], w), sep), s.words[k+1])
				put(3*k + d)
			}
		}
		buf = foldKey(buf[:0], w)
		put(3*k + 2)
	}
	return sw.enums
}

// enumIn is the index in enum of the value the step's words name (-1 for none), and the
// word naming it: the first word, or two words joined, equal to a value but for case
// (strings.EqualFold), the first such value.
func (sw *stepWords) enumIn(s sentence, enum []string) (j int, at enumWord) {
	words := sw.enumWords(s)
	j = -1
	var buf []byte
	for i, e := range enum {
		buf = foldKey(buf[:0], e)
		if w, ok := words[string(buf)]; ok && (j < 0 || w.rank < at.rank) {
			j, at = i, w
		}
	}
	return j, at
}

// foldKey appends s with each rune replaced by the least rune it folds to, so two
// strings have the same key exactly when strings.EqualFold holds for them.
func foldKey(buf []byte, s string) []byte {
	for _, r := range s { // an invalid byte is utf8.RuneError, as for EqualFold
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			buf = append(buf, byte(r))
			continue
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		buf = utf8.AppendRune(buf, least)
	}
	return buf
}

// fit scores tool i against s: a word of its name 3, of its server 1, of its
// description 1 (three at most), its whole name as a word 5 more; filling its
// arguments from the sentence breaks ties.
func (c *catalog) fit(i int, s sentence, sw *stepWords) toolFit {
	tw := c.wordsOf(i)
	f := toolFit{tool: i}
	desc := 0
	for k, n := range sw.norms {
		switch {
		case n == "":
			continue
		case tw.name[n]:
			f.score += 3
		case tw.server[n]:
			f.score++
		case tw.desc[n] && desc < 3:
			f.score++
			desc++
		default:
			continue
		}
		f.matched = append(f.matched, s.raw[k])
	}
	if sw.joined == tw.lower || sw.has[tw.lower] {
		f.score += 5
	}
	return f
}

// sentencePlan reads a prompt that is not in the grammar as sentences.
func (c *catalog) sentencePlan(ctx context.Context, prompt string) sentenceResult {
	sp := splitSteps(prompt)
	rest := func(at int) string { return strings.TrimRightFunc(prompt[at:], unicode.IsSpace) }
	switch {
	case sp.open >= 0:
		// Where the quoted text ends, and so where the next step starts, would be a guess.
		return sentenceResult{err: NotUnderstood{Message: fmt.Sprintf("The quote at byte %d is not closed, so where its text ends and the next step starts is not clear. Close it, as in: echo 'hello' then echo 'world'", sp.open),
			Fragment: rest(sp.open), Offset: sp.open}.err()}
	case sp.again >= 0:
		return sentenceResult{err: NotUnderstood{Message: "A plan has one rollback clause, at its end; join the steps to undo with \"then\".",
			Fragment: rest(sp.again), Offset: sp.again}.err()}
	}
	for k, steps := range [][]span{sp.run, sp.undo} {
		if len(steps) > maxSteps {
			return sentenceResult{stands: true, err: NotUnderstood{Message: fmt.Sprintf("The prompt has %d steps %s; a plan has at most %d. Split it into several plans.", len(steps), []string{"to run", "to undo"}[k], maxSteps),
				Fragment: steps[maxSteps].text, Offset: steps[maxSteps].at}.err()}
		}
	}
	var r sentenceResult
	steps, err := c.sentenceSteps(ctx, sp.run, &r)
	if err != nil {
		r.err = err
		return r
	}
	r.plan = Plan{Steps: steps}
	if sp.undoAt >= 0 {
		if r.plan.Rollback, err = c.sentenceSteps(ctx, sp.undo, &r); err != nil {
			return sentenceResult{err: err, fitted: r.fitted, stands: r.stands}
		}
	}
	return r
}

func (c *catalog) sentenceSteps(ctx context.Context, parts []span, r *sentenceResult) ([]Step, error) {
	var steps []Step
	for _, part := range parts {
		s := readSentence(part.text)
		if w := negation(s); w != "" {
			r.stands = true
			return nil, NotUnderstood{Message: fmt.Sprintf("%s says %q, and I do not plan what I am told not to do. Write only the steps to run; text meant as is goes in quotes, as in: echo 'do not disturb'",
				quoteFragment(part.text), w), Fragment: part.text, Offset: part.at}.err()
		}
		st, fit, err := c.sentenceStep(ctx, part, s)
		r.fitted = r.fitted || fit
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, NotUnderstood{Message: "The prompt names nothing to do. Say what to run, for example: echo 'hello', or: " + example, Offset: -1}.err()
	}
	return steps, nil
}

// minFit is the least score a tool needs to be chosen: one word of its name.
const minFit = 3

// sentenceStep reads one step, s; fit says whether some tool fitted it.
func (c *catalog) sentenceStep(ctx context.Context, part span, s sentence) (st Step, fit bool, err error) {
	frag, at := part.text, part.at
	sw := readStepWords(s)
	var fits []toolFit
	for i := range c.tools {
		// A step of many words that many tools fit is long to read.
		if err := ctx.Err(); err != nil {
			return Step{}, false, fmt.Errorf("planner: %w", err)
		}
		if _, dup := c.byName[c.tools[i].Name]; !dup || c.byName[c.tools[i].Name] != i {
			continue
		}
		f := c.fit(i, s, sw)
		if f.score < minFit {
			continue
		}
		_, f.problem = c.fill(i, s, sw, f.matched, false)
		if f.problem == "" {
			f.score++ // the sentence gives what the tool needs
		}
		fits = append(fits, f)
	}
	if len(fits) == 0 {
		return Step{}, false, NotUnderstood{Message: c.understood(s, frag), Fragment: frag, Offset: at}.err()
	}
	slices.SortStableFunc(fits, func(a, b toolFit) int { return b.score - a.score })
	best := fits[0]
	if len(fits) > 1 && fits[1].score == best.score {
		var why []string
		for _, f := range fits {
			if f.score != best.score {
				break
			}
			why = append(why, fmt.Sprintf("%s (it matches %s)", c.tools[f.tool].Name, quoteWords(f.matched)))
		}
		return Step{}, true, NotUnderstood{Message: fmt.Sprintf("Several tools fit %s equally: %s. Name the one to use, for example: call %s …",
			quoteFragment(frag), strings.Join(why, " and "), c.tools[best.tool].Name), Fragment: frag, Offset: at}.err()
	}
	if best.problem != "" {
		return Step{}, true, NotUnderstood{Message: fmt.Sprintf("%s fits %s (it matches %s), but %s. For example: %s",
			c.tools[best.tool].Name, quoteFragment(frag), quoteWords(best.matched), best.problem, c.exampleFor(best.tool)),
			Fragment: frag, Offset: at}.err()
	}
	best.args, _ = c.fill(best.tool, s, sw, best.matched, true)
	return Step{Tool: c.tools[best.tool].Name, Arguments: best.args.json()}, true, nil
}

// maxSuggestWords is how many of a step's words are looked up among the tools' names
// when no tool fits it.
const maxSuggestWords = 5

// understood says what was read of a sentence no tool fits.
func (c *catalog) understood(s sentence, frag string) string {
	var parts []string
	var words []string
	for k, w := range s.words {
		if !stopWords[w] {
			words = append(words, s.raw[k])
		}
	}
	if len(words) > 0 {
		parts = append(parts, "the words "+quoteWords(words))
	}
	for _, l := range s.literals {
		switch l.kind {
		case "string":
			parts = append(parts, "the text "+quoteFragment(l.text))
		default:
			parts = append(parts, "the "+l.kind+" "+l.text)
		}
	}
	for _, k := range s.explicit {
		parts = append(parts, k+"="+s.values[k])
	}
	msg := fmt.Sprintf("No tool fits %s.", quoteFragment(frag))
	if len(parts) > 0 {
		msg += " I read " + strings.Join(parts, ", ") + "."
	}
	if len(c.tools) == 0 {
		return msg + " No tools are available to you (a tool must be enabled and you must be allowed to use it)."
	}
	// Each word is compared with every tool's name; the first few say enough.
	for _, w := range words[:min(len(words), maxSuggestWords)] {
		if s := c.suggest(w, 3); len(s) > 0 {
			return msg + fmt.Sprintf(" Tools with a similar name: %s. Name the tool, for example: %s", strings.Join(s, ", "), example)
		}
	}
	return msg + " Name the tool to call, for example: " + example
}

func quoteWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = fmt.Sprintf("%q", w)
	}
	return strings.Join(q, ", ")
}

// param is one property of a tool's input schema.
type param struct {
	name     string
	types    []string
	enum     []string
	required bool
}

// params are tool i's parameters, required ones first, each group in the schema's
// order. They are shared with other prompts: read only.
func (c *catalog) params(i int) []param { return c.schema(i).params }

// readParams reads a schema's parameters; types are its properties' (readTypes).
func readParams(schema []byte, types map[string][]string) []param {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(s.Properties))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []param
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return out
		}
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return out
		}
		name, _ := k.(string)
		p := param{name: name, types: types[name], required: slices.Contains(s.Required, name)}
		var e struct {
			Enum []any `json:"enum"`
		}
		if json.Unmarshal(raw, &e) == nil {
			for _, v := range e.Enum {
				if sv, ok := v.(string); ok {
					p.enum = append(p.enum, sv)
				}
			}
		}
		out = append(out, p)
	}
	// Required parameters are filled first, each group in the schema's order.
	slices.SortStableFunc(out, func(a, b param) int {
		switch {
		case a.required == b.required:
			return 0
		case a.required:
			return -1
		}
		return 1
	})
	return out
}

func (p param) takes(t string) bool { return len(p.types) == 0 || slices.Contains(p.types, t) }

func (p param) hinted(words ...string) bool {
	for _, w := range textcheck.NameWords(p.name) {
		if slices.Contains(words, w) {
			return true
		}
	}
	return false
}

// fill builds tool i's arguments from sentence s; problem says what is missing or
// left over. Unless build, only problem is found: every tool that fits is filled, and
// the arguments are wanted of one.
func (c *catalog) fill(i int, s sentence, sw *stepWords, matched []string, build bool) (*object, string) {
	params := c.params(i)
	obj := &object{}
	set := map[string]json.RawMessage{}
	types := c.propTypes(i)
	for _, k := range s.explicit {
		v, msg := typed(s.values[k], types[k])
		if msg != "" {
			return nil, fmt.Sprintf("%s must be %s", k, msg)
		}
		set[k] = v
	}
	for _, l := range s.literals {
		l.used = false
	}
	// One more than the words: a joined word marks the next one too.
	usedWord := make([]bool, len(s.raw)+1)
	copy(usedWord, sw.stop)
	for _, w := range matched {
		for _, k := range sw.rawAt[w] {
			usedWord[k] = true
		}
	}
	// Enum values named by a word, or by two words joined (read file → read_file).
	for _, p := range params {
		if _, ok := set[p.name]; ok || len(p.enum) == 0 {
			continue
		}
		if j, at := sw.enumIn(s, p.enum); j >= 0 {
			set[p.name] = jsonString(p.enum[j])
			usedWord[at.rank/3] = true
			if at.joined {
				usedWord[at.rank/3+1] = true
			}
		}
	}
	// take is the first unused literal of the first kind that has one.
	take := func(kinds ...string) *literal {
		for _, k := range kinds {
			for _, l := range s.literals {
				if !l.used && l.kind == k {
					l.used = true
					return l
				}
			}
		}
		return nil
	}
	// URLs and paths to the parameters named for them, then quoted strings in order.
	for _, p := range params {
		if _, ok := set[p.name]; ok || !p.takes("string") {
			continue
		}
		var l *literal
		switch {
		case p.hinted("url", "uri", "link", "endpoint"):
			l = take("url", "string")
		case p.hinted("path", "file", "dir", "directory", "folder", "filename"):
			l = take("path", "string")
		}
		if l != nil {
			set[p.name] = jsonString(l.text)
		}
	}
	for _, p := range params {
		if _, ok := set[p.name]; ok || !p.takes("string") {
			continue
		}
		if l := take("string"); l != nil {
			set[p.name] = jsonString(l.text)
		}
	}
	for _, p := range params {
		if _, ok := set[p.name]; ok {
			continue
		}
		switch {
		case p.takes("integer") && !slices.Contains(p.types, "number"):
			for _, l := range s.literals {
				if !l.used && l.kind == "number" && isInteger(l.text) {
					l.used = true
					set[p.name] = json.RawMessage(l.text)
					break
				}
			}
		case p.takes("number") && len(p.types) > 0:
			if l := take("number"); l != nil {
				set[p.name] = json.RawMessage(l.text)
			}
		}
	}
	// A required string still empty takes the words left over ("echo hello world"),
	// or a URL or path nobody took.
	for _, p := range params {
		if _, ok := set[p.name]; ok || !p.required || !p.takes("string") {
			continue
		}
		switch {
		case !slices.Contains(usedWord[:len(s.raw)], false):
			if l := take("url", "path"); l != nil {
				set[p.name] = jsonString(l.text)
			}
		case !build:
			set[p.name] = nil // the words are joined for the chosen tool only
		default:
			var rest []string
			for k, w := range s.raw {
				if !usedWord[k] {
					rest = append(rest, w)
				}
			}
			set[p.name] = jsonString(strings.Join(rest, " "))
		}
		break
	}
	var missing []string
	for _, p := range params {
		if _, ok := set[p.name]; !ok && p.required {
			missing = append(missing, p.name+" ("+typeWords(p.types)+")")
		}
	}
	var left []string
	for _, l := range s.literals {
		if !l.used {
			left = append(left, l.text)
		}
	}
	switch {
	case len(missing) > 0:
		return nil, "nothing in it gives " + strings.Join(missing, ", ")
	case len(left) > 0:
		return nil, "it does not take " + quoteWords(left)
	case !build:
		return nil, ""
	}
	// Arguments in the schema's order, then explicit keys the schema does not list.
	for _, p := range c.schemaOrder(params) {
		if v, ok := set[p]; ok {
			obj.add(p, v)
		}
	}
	for _, k := range s.explicit {
		obj.add(k, set[k])
	}
	return obj, ""
}

// schemaOrder is the parameters' names in the schema's own order.
func (c *catalog) schemaOrder(params []param) []string {
	req, opt := []string{}, []string{}
	for _, p := range params {
		if p.required {
			req = append(req, p.name)
		} else {
			opt = append(opt, p.name)
		}
	}
	return append(req, opt...)
}

func typeWords(ts []string) string {
	if len(ts) == 0 {
		return "a value"
	}
	return strings.Join(ts, " or ")
}

// exampleFor is a call of tool i in the grammar, with its required parameters.
func (c *catalog) exampleFor(i int) string {
	var b strings.Builder
	b.WriteString("call " + c.tools[i].Name)
	for _, p := range c.params(i) {
		if !p.required {
			continue
		}
		switch {
		case len(p.enum) > 0:
			b.WriteString(" " + p.name + "=" + p.enum[0])
		case p.takes("string"):
			b.WriteString(" " + p.name + `="…"`)
		default:
			b.WriteString(" " + p.name + "=1")
		}
	}
	return b.String()
}
