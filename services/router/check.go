package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/verr"
)

// pinned refuses a call whose tool, or its server's connection, is no longer what
// was approved.
func (r *Router) pinned(ctx context.Context, e *entry, p *Pin) error {
	if p == nil {
		return nil
	}
	t := e.t
	switch {
	case t.ID == p.ToolID && !r.mcp.IdentityMatches(ctx, t.ServerID, p.ServerIdentity):
		return fail(CodeStale, "the connection settings of server %s (its command, environment, URL or credentials) changed since %s was approved; plan and approve it again",
			t.Server, t.QualifiedName())
	case t.ID != p.ToolID:
		return fail(CodeStale, "%s is no longer the tool that was approved", t.QualifiedName())
	case t.DefinitionHash != p.DefinitionHash:
		return fail(CodeStale, "%s changed its definition since it was approved (now version %s); plan and approve it again",
			t.QualifiedName(), t.Version())
	case t.ConfigVersion != p.ConfigVersion:
		return fail(CodeStale, "%s's configuration changed since it was approved (version %d, approved %d); plan and approve it again",
			t.QualifiedName(), t.ConfigVersion, p.ConfigVersion)
	}
	return nil
}

// Prepared is a call checked as far as it can be without running it: the tool it
// names, the arguments it would send (configured values merged, secret ones masked)
// and its risk. Plans are made of prepared calls.
type Prepared struct {
	Pin
	Tool      string          `json:"tool"` // qualified name
	Server    string          `json:"server"`
	Arguments json.RawMessage `json:"arguments"` // as given (plus a dotted name's operation)
	// Effective are the arguments the server would get; configured secret values
	// show as "••••••".
	Effective json.RawMessage `json:"effective_arguments"`
	Risk      risk.Decision   `json:"risk"`
}

// SameConnection reports whether identity (a Pin's ServerIdentity) is the connection
// identity of tool's server under any key the keyring holds: the same settings, pinned
// before a key rotation or on a replica that read the new key first.
func (r *Router) SameConnection(ctx context.Context, tool, identity string) bool {
	res, err := r.resolve(ctx, tool)
	return err == nil && res.e != nil && r.mcp.IdentityMatches(ctx, res.e.t.ServerID, identity)
}

// MaxConversationID is the longest conversation id a call may name (in characters).
const MaxConversationID = 200

// MaskedSecret stands for a configured secret value in Prepared.Effective.
const MaskedSecret = "••••••"

// Prepare resolves, admits, merges and validates c like Call, without approval, rate
// limits, records or running it. Errors are *Error with Call's codes.
func (r *Router) Prepare(ctx context.Context, c Call) (*Prepared, error) {
	e, args, err := r.check(ctx, c)
	if err != nil {
		return nil, err
	}
	if c.Preflight {
		if re := r.preflight(ctx, e, c, "", args.merged); re != nil {
			return nil, re
		}
	}
	given, err := json.Marshal(args.given)
	if err != nil {
		return nil, err
	}
	masked := maps.Clone(args.values)
	for name := range e.secrets {
		if _, ok := masked[name]; ok {
			masked[name], _ = json.Marshal(MaskedSecret)
		}
	}
	effective, err := json.Marshal(masked)
	if err != nil {
		return nil, err
	}
	t := e.t
	return &Prepared{Pin: Pin{ToolID: t.ID, DefinitionHash: t.DefinitionHash, ConfigVersion: t.ConfigVersion, ServerIdentity: r.mcp.Identity(ctx, t.ServerID)},
		Tool: t.QualifiedName(), Server: t.Server, Arguments: given, Effective: effective, Risk: e.risk}, nil
}

// checkedArgs are a call's arguments once checked: as given (plus a dotted name's
// operation), with configured values merged, and that merge as JSON.
type checkedArgs struct {
	given, values map[string]json.RawMessage
	merged        json.RawMessage
	// withOperation is given as JSON when a dotted name added its operation (nil
	// otherwise): what the call is recorded with, as its server gets it.
	withOperation json.RawMessage
}

// recorded is what a call with raw arguments is recorded with: its arguments with the
// operation its dotted name named.
func (a checkedArgs) recorded(raw json.RawMessage) json.RawMessage {
	if a.withOperation != nil {
		return a.withOperation
	}
	return raw
}

// check is what Call and Prepare share: resolve, parse, pin, admit, merge and
// validate. The entry is nil when the name did not resolve; an error with an entry
// is a refusal of that tool. The name is resolved first (it never depends on the
// arguments), so arguments that are not a JSON object are a refusal of the tool named,
// recorded as one; but only once the caller may call it: a caller the tool is
// forbidden to is told so (and audited as such) whatever its arguments.
func (r *Router) check(ctx context.Context, c Call) (*entry, checkedArgs, error) {
	res, err := r.resolve(ctx, c.Tool)
	if err != nil {
		return nil, checkedArgs{}, err
	}
	e := res.e
	args, argsErr := parseArguments(c.Arguments)
	if err := r.pinned(ctx, e, c.Pin); err != nil {
		return e, checkedArgs{}, err
	}
	var failed checkedArgs // what a refusal is recorded with
	if argsErr == nil && res.addOperation(args) {
		failed.withOperation, _ = json.Marshal(args)
	}
	if err := r.admit(ctx, e, c); err != nil {
		return e, failed, err
	}
	if argsErr != nil {
		return e, checkedArgs{}, argsErr
	}
	if utf8.RuneCountInString(c.ConversationID) > MaxConversationID {
		// Conversations, grants and executions keep it: too long is refused whatever the tool.
		return e, failed, errorOf(CodeInvalidArguments, fmt.Sprintf("conversation_id is longer than %d characters; use a shorter one", MaxConversationID)).
			with([]verr.Field{{Field: "/conversation_id", Message: fmt.Sprintf("is longer than %d characters", MaxConversationID), Kind: verr.KindValue}})
	}
	if reservedConversation(c.ConversationID, c.Actor) {
		// A person's default conversation is theirs alone: named by someone else first,
		// it would be theirs, and every call of its person without one refused.
		return e, failed, errorOf(CodeInvalidArguments, "conversation_id "+c.ConversationID+" is another person's default conversation; leave it out to use your own, or name another").
			with([]verr.Field{{Field: "/conversation_id", Message: "is another person's default conversation", Kind: verr.KindValue}})
	}
	merged, err := e.resolved.Merge(args)
	if err != nil {
		return e, failed, invalid(err)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return e, failed, err
	}
	// What is sent, configured values included, must not name one parameter twice: a
	// server matching names ignoring case would bind an unchecked "ſql" in place of "sql".
	if p := sameNames(raw); p != nil {
		return e, failed, invalid(hideSecrets(p.fields(), e.secrets))
	}
	if err := schema.ValidateArguments(e.input, json.RawMessage(raw)); err != nil {
		return e, failed, invalid(hideSecrets(err, e.secrets))
	}
	e = r.argumentRisk(e, raw)
	return e, checkedArgs{given: args, values: merged, merged: raw, withOperation: failed.withOperation}, nil
}

func parseArguments(raw json.RawMessage) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return args, nil
	}
	if !strings.HasPrefix(s, "{") {
		return nil, errorOf(CodeInvalidArguments, "arguments must be a JSON object").
			with([]verr.Field{{Field: "", Message: "must be a JSON object", Kind: verr.KindType}})
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, errorOf(CodeInvalidArguments, "arguments are not valid JSON: "+err.Error()).
			with([]verr.Field{{Field: "", Message: "is not valid JSON", Kind: verr.KindType}})
	}
	// json.Unmarshal reads invalid UTF-8 and lone surrogate escapes as U+FFFD, so the
	// schema would check a string other than the one sent on (raw, as given).
	if !utf8.Valid(raw) || maySurrogate(raw) {
		w := argsWalk{d: raw, text: true}
		if p := w.value(); p != nil {
			return nil, invalidFields(p.fields())
		}
	}
	return args, nil
}

// invalid turns field errors into invalid_arguments naming every bad parameter.
func invalid(err error) error {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return err
	}
	return invalidFields(ve)
}

// invalidFields is invalid_arguments naming every field of ve.
func invalidFields(ve *verr.Error) *Error {
	parts := make([]string, len(ve.Fields))
	for i, f := range ve.Fields {
		where := strings.TrimPrefix(f.Field, "/")
		if where == "" {
			where = "arguments"
		}
		parts[i] = where + " " + f.Message
	}
	return errorOf(CodeInvalidArguments, strings.Join(parts, "; ")).with(ve.Fields)
}

// hideSecrets rewrites what validation says about configured secret values: its
// messages may quote the value (a pattern it does not match).
func hideSecrets(err error, secrets map[string]bool) error {
	var ve *verr.Error
	if len(secrets) == 0 || !errors.As(err, &ve) {
		return err
	}
	for i, f := range ve.Fields {
		name, _, _ := strings.Cut(strings.TrimPrefix(f.Field, "/"), "/")
		if secrets[name] {
			ve.Fields[i].Message = "the configured secret value is not accepted by the tool's schema; an administrator must set it again"
		}
	}
	return ve
}

// admit checks the tool may be called now and by this caller.
func (r *Router) admit(ctx context.Context, e *entry, c Call) error {
	t := e.t
	name := t.QualifiedName()
	switch {
	case !t.ServerEnabled:
		return fail(CodeToolDisabled, "%s cannot be called: its server %s is disabled", name, t.Server)
	case !t.Available:
		return fail(CodeToolDisabled, "%s cannot be called: its server no longer offers it", name)
	case t.Status == "enabled":
	case c.Test && Testable(t.Status):
	case c.Test:
		return fail(CodeToolDisabled, "%s cannot be tested while it is %s", name, t.Status)
	default:
		return fail(CodeToolDisabled, "%s is %s; an administrator must enable it before it can be called", name, t.Status)
	}
	if e.inputErr != nil {
		return fail(CodeToolDisabled, "%s cannot be called: its input schema is not usable (%v)", name, e.inputErr)
	}
	ok, err := r.MayUse(ctx, c.Actor, c.Role, t.ID)
	if err != nil {
		return err
	}
	if !ok {
		return fail(CodeForbidden, "you may not use %s; ask an administrator for access", name)
	}
	return nil
}

// argumentRisk is e with its risk as this call's arguments make it: the operation's own
// level in place of one derived from annotations (Options.OperationRisk), then raised
// to what the arguments carry (Options.ArgumentRisk). e itself, shared by every call,
// is not changed.
func (r *Router) argumentRisk(e *entry, args json.RawMessage) *entry {
	d := e.risk
	if r.opts.OperationRisk != nil && d.Source == risk.SourceAnnotations {
		if level, why, ok := r.opts.OperationRisk(e.t.ServerID, e.t.QualifiedName(), args); ok {
			d = risk.Decision{Level: level, Source: risk.SourceOperation, Why: why}
		}
	}
	if r.opts.ArgumentRisk != nil {
		if level, why, ok := r.opts.ArgumentRisk(e.t.QualifiedName(), args); ok && risk.Max(d.Level, level) != d.Level {
			d = risk.Decision{Level: level, Source: risk.SourceArguments, Why: why}
		}
	}
	if d == e.risk {
		return e
	}
	rated := *e
	rated.risk = d
	return &rated
}

// RiskOf is the level a call of tool (an id or a name) with args gets, as the router
// rates the call: with the tool's configured values merged in, whether or not the
// arguments are complete yet. The test panel shows it and asks for what it needs
// before a run.
func (r *Router) RiskOf(ctx context.Context, tool string, args json.RawMessage) (risk.Decision, error) {
	res, err := r.resolve(ctx, tool)
	if err != nil {
		return risk.Decision{}, err
	}
	rated := args
	if given, err := parseArguments(args); err == nil {
		res.addOperation(given)
		// Arguments that set a fixed parameter are refused at the run; rate them as given.
		if merged, err := res.e.resolved.Merge(given); err == nil {
			if b, err := json.Marshal(merged); err == nil {
				rated = b
			}
		}
	}
	return r.argumentRisk(res.e, rated).risk, nil
}

// preflight asks Options.Preflight whether c (checked as e, with merged args) could run
// at all, and is the refusal to answer with instead of asking anyone to approve it, or
// nil. When the check itself fails (the database), the call goes on: the tool checks
// again when it runs.
func (r *Router) preflight(ctx context.Context, e *entry, c Call, callID string, args json.RawMessage) *Error {
	if r.opts.Preflight == nil {
		return nil
	}
	err := r.opts.Preflight(ctx, e.t.QualifiedName(), metaOf(c, callID), args)
	if err == nil {
		return nil
	}
	if ve := (*verr.Error)(nil); errors.As(err, &ve) {
		return invalidFields(ve)
	}
	if f, ok := fault.As(err); ok && f.Kind == fault.KindForbidden {
		return fail(CodeForbidden, "%s", f.Message).with(f.Details)
	}
	r.log.Warn("router: the check before approval failed; the call goes on", "tool", e.t.QualifiedName(), "err", err)
	return nil
}

// argsProblem is a place in a call's arguments that a server could read otherwise than
// Toolwarden checked it: its JSON pointer's segments, innermost first as the walk
// unwinds, and what is wrong there.
type argsProblem struct {
	segments []string
	message  string
}

func (p *argsProblem) in(segment string) *argsProblem {
	p.segments = append(p.segments, segment)
	return p
}

var pointerEscapes = strings.NewReplacer("~", "~0", "/", "~1")

// fields is p as an argument error naming its JSON pointer.
func (p *argsProblem) fields() *verr.Error {
	var b strings.Builder
	for i := len(p.segments) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(pointerEscapes.Replace(p.segments[i]))
	}
	return &verr.Error{Fields: []verr.Field{{Field: b.String(), Message: p.message, Kind: verr.KindValue}}}
}

// sameNames finds, in the arguments as sent (valid JSON), two names of one object, at
// any depth, that are equal but for letter case: servers that match names ignoring case
// (Go's encoding/json, .NET with case-insensitive options) bind either one, and the
// schema checked only the one it names. Case is folded as strings.EqualFold does.
func sameNames(args []byte) *argsProblem {
	w := argsWalk{d: args, fold: true}
	return w.value()
}

// maySurrogate reports whether raw may hold a \uD800-\uDFFF escape (an escaped backslash
// followed by "ud8.." is a false alarm the walk then clears).
func maySurrogate(raw []byte) bool {
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i+1 < len(raw) && raw[i]|0x20 == 'd' && (raw[i+1] >= '8' && raw[i+1] <= '9' || raw[i+1]|0x20 >= 'a' && raw[i+1]|0x20 <= 'f') {
			return true
		}
	}
}

// argsWalk walks the JSON of a call's arguments (valid: json.Unmarshal read it or
// json.Marshal wrote it) for what a server could read otherwise than it was checked.
type argsWalk struct {
	d    []byte
	i    int
	fold bool // names of one object equal but for case
	text bool // strings that are not UTF-8 text: invalid bytes, lone surrogate escapes
}

// keySpan is a name of an object: where its text lies between its quotes, and the hash
// of its case fold.
type keySpan struct {
	start, end int
	hash       uint64
}

func malformed() *argsProblem { return &argsProblem{message: "is not valid JSON"} }

func (w *argsWalk) space() {
	for w.i < len(w.d) {
		switch w.d[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *argsWalk) value() *argsProblem {
	w.space()
	if w.i >= len(w.d) {
		return malformed()
	}
	switch w.d[w.i] {
	case '{':
		return w.object()
	case '[':
		return w.array()
	case '"':
		_, _, p := w.str()
		return p
	}
	from := w.i
	for w.i < len(w.d) {
		switch w.d[w.i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			if w.i == from {
				return malformed()
			}
			return nil
		}
		w.i++
	}
	return nil
}

func (w *argsWalk) object() *argsProblem {
	w.i++
	var held [8]keySpan // most objects have few names: no allocation for them
	keys := held[:0]
	for {
		w.space()
		if w.i >= len(w.d) {
			return malformed()
		}
		switch w.d[w.i] {
		case '}':
			w.i++
			if len(keys) > 1 {
				return w.sameButCase(keys)
			}
			return nil
		case ',':
			w.i++
			continue
		case '"':
		default:
			return malformed()
		}
		start, end, p := w.str()
		if p != nil {
			return p.in(w.name(start, end))
		}
		if w.fold {
			keys = append(keys, keySpan{start: start, end: end})
		}
		w.space()
		if w.i >= len(w.d) || w.d[w.i] != ':' {
			return malformed()
		}
		w.i++
		if p := w.value(); p != nil {
			return p.in(w.name(start, end))
		}
	}
}

func (w *argsWalk) array() *argsProblem {
	w.i++
	for n := 0; ; {
		w.space()
		if w.i >= len(w.d) {
			return malformed()
		}
		switch w.d[w.i] {
		case ']':
			w.i++
			return nil
		case ',':
			w.i++
			n++
			continue
		}
		if p := w.value(); p != nil {
			return p.in(strconv.Itoa(n))
		}
	}
}

// str reads the string at w.i and says where its text starts and ends, and the first
// thing in it that is not text.
func (w *argsWalk) str() (start, end int, p *argsProblem) {
	d := w.d
	w.i++
	start = w.i
	for w.i < len(d) {
		if !w.text {
			// Only quotes and escapes matter: jump to the next of either.
			q := bytes.IndexByte(d[w.i:], '"')
			if q < 0 {
				break
			}
			if b := bytes.IndexByte(d[w.i:w.i+q], '\\'); b >= 0 {
				q = b
			}
			w.i += q
		}
		c := d[w.i]
		switch {
		case c == '"':
			w.i++
			return start, w.i - 1, p
		case c == '\\':
			if w.i+1 >= len(d) {
				return start, len(d), malformed()
			}
			if d[w.i+1] != 'u' {
				w.i += 2
				continue
			}
			r, ok := hex4(d, w.i+2)
			if !ok {
				return start, w.i, malformed()
			}
			if w.text && utf16.IsSurrogate(r) {
				if pairedSurrogate(d, w.i, r) {
					w.i += 12
					continue
				}
				if p == nil {
					p = &argsProblem{message: fmt.Sprintf(`holds \u%04x, half of a UTF-16 surrogate pair without its other half, which is not text`, r)}
				}
			}
			w.i += 6
		case c < utf8.RuneSelf || !w.text:
			w.i++
		default:
			r, size := utf8.DecodeRune(d[w.i:])
			if r == utf8.RuneError && size == 1 && p == nil {
				p = &argsProblem{message: "is not valid UTF-8 text"}
			}
			w.i += size
		}
	}
	return start, len(d), malformed()
}

// name is the name whose text is d[start:end], unescaped.
func (w *argsWalk) name(start, end int) string {
	var s string
	if end >= len(w.d) || json.Unmarshal(w.d[start-1:end+1], &s) != nil {
		return string(w.d[start:end])
	}
	return s
}

// sameButCase finds the first name of keys (one object's, more than one) equal but for
// case to a name before it.
func (w *argsWalk) sameButCase(keys []keySpan) *argsProblem {
	first, second := -1, -1
	if len(keys) <= 16 {
		for k := range keys {
			keys[k].hash = foldHash(w.d[keys[k].start:keys[k].end])
		}
		for j := 1; j < len(keys) && second < 0; j++ {
			for i := range j {
				if keys[i].hash == keys[j].hash && w.foldEqual(keys[i], keys[j]) {
					first, second = i, j
					break
				}
			}
		}
	} else {
		// The folded names in a map (Go's map hashing is seeded, so no crafted set of
		// names collides: 2^17 spellings of one name cost linear time, not quadratic),
		// the first repeat in the order they were written.
		seen := make(map[string]int, len(keys))
		var buf []byte
		for j := range keys {
			buf = w.folded(buf[:0], keys[j])
			if i, ok := seen[string(buf)]; ok {
				first, second = i, j
				break
			}
			seen[string(buf)] = j
		}
	}
	if second < 0 {
		return nil
	}
	a, b := w.name(keys[first].start, keys[first].end), w.name(keys[second].start, keys[second].end)
	msg := fmt.Sprintf("is %q again but for letter case; servers that match names ignoring case could read either, so send it once", a)
	if a == b {
		msg = "is given more than once; servers could read either, so send it once"
	}
	return &argsProblem{segments: []string{b}, message: msg}
}

// folded appends the case fold of name k's text (foldRune of each rune) to buf.
func (w *argsWalk) folded(buf []byte, k keySpan) []byte {
	name := w.d[k.start:k.end]
	for i := 0; i < len(name); {
		var r rune
		r, i = nameRune(name, i)
		buf = utf8.AppendRune(buf, foldRune(r))
	}
	return buf
}

func (w *argsWalk) foldEqual(x, y keySpan) bool {
	a, b := w.d[x.start:x.end], w.d[y.start:y.end]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb rune
		ra, i = nameRune(a, i)
		rb, j = nameRune(b, j)
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
	}
	return i == len(a) && j == len(b)
}

// foldHash is the FNV-1a hash of the case fold of a name's text.
func foldHash(name []byte) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf && c != '\\' { // most names are plain ASCII
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			h = (h ^ uint64(c)) * 1099511628211
			i++
			continue
		}
		var r rune
		r, i = nameRune(name, i)
		h = (h ^ uint64(foldRune(r))) * 1099511628211
	}
	return h
}

// foldRune is the smallest rune of r's simple case folding orbit: two runes are equal
// under strings.EqualFold exactly when their foldRunes are.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// nameRune decodes the rune of a JSON string's text s at i (escapes read as
// encoding/json reads them: a lone surrogate as U+FFFD) and says where the next starts.
func nameRune(s []byte, i int) (rune, int) {
	c := s[i]
	if c != '\\' {
		if c < utf8.RuneSelf {
			return rune(c), i + 1
		}
		r, n := utf8.DecodeRune(s[i:])
		return r, i + n
	}
	if i+1 >= len(s) {
		return utf8.RuneError, len(s)
	}
	switch s[i+1] {
	case 'u':
		r, ok := hex4(s, i+2)
		if !ok {
			return utf8.RuneError, len(s)
		}
		if utf16.IsSurrogate(r) {
			if pairedSurrogate(s, i, r) {
				r2, _ := hex4(s, i+8)
				return utf16.DecodeRune(r, r2), i + 12
			}
			return utf8.RuneError, i + 6
		}
		return r, i + 6
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	}
	return rune(s[i+1]), i + 2 // \" \\ \/
}

// pairedSurrogate reports whether the escape \u of r at s[i:] (a surrogate) is a high
// surrogate followed by an escaped low one.
func pairedSurrogate(s []byte, i int, r rune) bool {
	if r >= 0xdc00 || i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
		return false
	}
	r2, ok := hex4(s, i+8)
	return ok && 0xdc00 <= r2 && r2 <= 0xdfff
}

// hex4 reads the four hex digits at s[i:].
func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			c = (c | 0x20) - 'a' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
