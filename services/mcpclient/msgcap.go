package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sjson "github.com/segmentio/encoding/json"

	"github.com/toolwarden/toolwarden/internal/loglimit"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/registry"
)

// DefaultMaxMessageBytes is the default of Options.MaxMessageBytes: 16 MiB, the limit the
// Go SDK itself applies to a stdio line and an SSE event, so a server that works with
// other SDK clients works here too. It holds a tools/list page of thousands of tools or a
// sizeable file, while a handful of answers of that size in flight (each is held a few
// times over: our reader, the SDK's decoding, the caller's copy) still fit in a small
// machine's memory.
const DefaultMaxMessageBytes = 16 << 20

// maxMessageValues bounds the JSON values of one message, counted as the '{', '[' and
// ',' outside its strings; a message with more is oversized whatever its bytes. The SDK
// decodes schemas, structured content, _meta and log data into Go maps and slices of 20
// to 270 bytes a value: 16 MiB of "{}," or "[]," would take 0.35 to 1 GiB, a message
// within this bound at most about 270 MiB. An ordinary tool list has a value every 12
// to 25 bytes, a text or a file a few in all.
const maxMessageValues = 1 << 20

// CodeResultTooLarge is the JSON-RPC error code of the response Toolwarden hands the SDK
// in place of a response that was larger than the cap. It is in the range JSON-RPC
// leaves to implementations (-32000 to -32099) and not one the SDK or MCP uses.
const CodeResultTooLarge = -32090

// CodeMalformedResponse is the JSON-RPC error code of the response Toolwarden hands the
// SDK in place of a response to one of its requests that the SDK could not decode
// (readable): dropped, it would leave the call waiting for its timeout. Next to
// CodeResultTooLarge, in the same range.
const CodeMalformedResponse = -32091

// ErrResultTooLarge marks a call whose answer was larger than Options.MaxMessageBytes:
// the server is healthy and the session still works, only this answer was dropped.
var ErrResultTooLarge = errors.New("result too large")

// tooLargeError is a call's ErrResultTooLarge with the text that says what to do.
type tooLargeError struct{ msg string }

// Error implements error.
func (e *tooLargeError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrResultTooLarge) hold.
func (e *tooLargeError) Is(target error) bool { return target == ErrResultTooLarge }

// msgLimit is what every transport of one server needs to cap its messages, and the
// SDK's logger for the connection.
type msgLimit struct {
	max    int    // bytes one message may have
	server string // the server's name, for the error text and the log
	log    *slog.Logger
	// sdk is the SDK's logger for the connection (sdkLogger), its client's and its
	// transport's, one budget between them; nil, the SDK's default (lines dropped).
	sdk *slog.Logger
	// For what the server sends that is not a message (notJSON): clean masks and cuts
	// its text for the log, strays is the log's budget for them (nil: no bound), and
	// stderr (stdio only) is where the server page shows them.
	clean  func(string) string
	strays *loglimit.Budget
	stderr *lineBuffer
	// reads bounds the large messages read at once (nil: no bound).
	reads *largeReads
}

// msgLimit returns the cap for a connection to server cfg.
func (m *Manager) msgLimit(cfg registry.Connection) msgLimit {
	l := msgLimit{max: m.opts.MaxMessageBytes, server: cfg.Name, log: m.log,
		clean: logCleaner(cfg), strays: loglimit.New(sdkLogEvery, sdkLogBurst), reads: m.largeReads}
	if m.log != nil {
		l.sdk = sdkLogger(m.log, cfg)
	}
	return l
}

// sdkMaxDepth is the deepest nesting the SDK decodes (third_party/go-sdk/internal/json):
// past it a message fails there as one that is not JSON does.
const sdkMaxDepth = 1000

// readable reports whether msg, one value s scanned to its end, is a message the SDK
// can decode (jsonrpc2.DecodeMessage): valid JSON nested no deeper than the SDK takes, an
// object whose "jsonrpc" is "2.0", whose "id", "method" and "error" have the types the
// SDK decodes (refused), and a response with an id. The SDK's reader stops at the first
// message it cannot decode, ending the session and failing every call in flight, so
// anything else (a banner, a log line on standard output) is dropped instead, as the
// TypeScript and Python SDKs skip it. A batch is not one message: see isBatch.
//
// The check is segmentio's Valid, the parser the SDK decodes with, so the two agree on
// what is valid. BenchmarkReaders, back to back: stdio/big 1.1–1.4 GB/s
// without a check, 0.7–0.8 with it, 0.3 with encoding/json's Valid; small messages
// 200–230 ns each, 270–340, 835. The depth is checked first: its parser recurses once
// per level. An "error" object, or an id too long to check here, is rare enough to be
// left to the SDK's own decoding, which also checks its "code" and "message".
func readable(msg []byte, s *scanner) bool {
	if s.broken || s.top != '{' || !s.version2() || s.maxDepth > sdkMaxDepth {
		return false
	}
	if !sjson.Valid(msg) {
		s.invalid = true
		return false
	}
	if s.refused() {
		return false
	}
	if s.errorObject || s.idNumber() && s.id.long {
		_, err := jsonrpc.DecodeMessage(msg)
		s.decodeFailed = err != nil
		return err == nil
	}
	return true
}

// isBatch reports whether msg, one value s scanned to its end, is a batch the readers
// split into its messages (splitBatch): a valid JSON array nested no deeper than the
// SDK takes. The SDK ends the session on a batch where it cannot decode every element
// (or an empty one, or one whose calls' ids repeat) on stdio, and on any batch over
// HTTP; each element on its own is decoded as any other message.
func isBatch(msg []byte, s *scanner) bool {
	return s.top == '[' && !s.broken && s.done && s.maxDepth <= sdkMaxDepth && sjson.Valid(msg)
}

// splitBatch returns the messages that take the place of batch (isBatch): each element
// the SDK can decode (readable), in order, and the malformed-response error for each
// response to one of our requests among the others (unreadable), the errors no more
// than the cap in all: a batch of 16 MiB may hold half a million refused responses, and
// their errors would be ten times its size. What is left out is noted once for the
// batch (notJSON), an empty batch as a whole.
func (l msgLimit) splitBatch(batch []byte) [][]byte {
	var (
		out      [][]byte
		s        scanner
		first    []byte // the first element left out, for the note
		left     int64  // bytes of the elements left out
		answers  int    // bytes of the errors so far
		answered []byte // the ids answered, comma-separated, for the note
		elements int
	)
	for i := 1; ; {
		for i < len(batch) && (isSpace(batch[i]) || batch[i] == ',') {
			i++
		}
		if i >= len(batch) || batch[i] == ']' {
			break
		}
		s.reset()
		n, _ := s.feed(batch[i:])
		elem := batch[i : i+n]
		i += n
		elements++
		if readable(elem, &s) {
			out = append(out, elem)
			continue
		}
		if first == nil {
			first = elem
		}
		left += int64(len(elem))
		if r := l.unreadable(&s); r != nil && answers+len(r) <= l.max {
			out = append(out, r)
			answers += len(r)
			switch id := s.id.bytes(); {
			case len(answered)+len(id) < strayShown:
				if len(answered) > 0 {
					answered = append(answered, ',')
				}
				answered = append(answered, id...)
			case !bytes.HasSuffix(answered, []byte("…")):
				answered = append(answered, ",…"...)
			}
		}
	}
	if elements == 0 {
		first, left = batch, int64(len(batch))
	}
	if first != nil {
		if len(answered) == 0 {
			answered = nil
		}
		l.notJSON(first[:min(len(first), strayKeep)], left, answered)
	}
	return out
}

// strayShown bounds how much of a dropped piece of output that is not a message is
// shown on the server page and logged; strayKeep is how much of it is kept until it
// is masked (see secretSlack).
const (
	strayShown = 512
	strayKeep  = strayShown + secretSlack
)

// strayMark begins the line of a stdio server's standard error that says what of its
// standard output was dropped.
const strayMark = "[toolwarden] dropped from standard output, not a JSON-RPC message: "

// notJSON reports output of the server that is not a message the SDK can decode
// (readable), which was dropped: start is its first bytes (up to strayKeep), seen its
// length, answered the id of the call it was answered for (unreadable), if any. For a
// stdio server it goes to its standard error as the server page shows it, so the page
// says why the server misbehaves; and to the log, as many as strays allows: unlike an
// oversized message, such a line costs the server a few bytes.
func (l msgLimit) notJSON(start []byte, seen int64, answered []byte) {
	cut := seen > int64(len(start))
	if l.stderr != nil {
		l.stderr.note(strayMark, start, cut)
	}
	left := 0
	if l.strays != nil {
		ok, n := l.strays.Take()
		if !ok {
			return
		}
		left = n
	}
	text := strings.ToValidUTF8(string(start), "\uFFFD")
	if l.clean != nil {
		text = l.clean(text)
	}
	text = textcheck.Clip(text, strayShown, registry.CutMark)
	args := []any{"server", l.server, "bytes", seen, "start", text}
	if answered != nil {
		args = append(args, "answered_id", string(answered))
	}
	if left > 0 {
		args = append(args, "lines_left_out_before", left)
	}
	l.log.Warn("mcpclient: dropped output of the server that is not a JSON-RPC message", args...)
}

// sdkSlack is added to the cap where the SDK's own limits are set: a message that passes
// our reader arrives with a newline or an SSE "data: " prefix around it, and the SDK's
// limit is only a second fence, never the one that decides.
const sdkSlack = 4096

// tooLargeText is the error message of a dropped answer.
func (l msgLimit) tooLargeText() string {
	return fmt.Sprintf("result too large: %s sent more than %s; raise --max-message-size or ask for less",
		l.server, formatSize(int64(l.max)))
}

// tooManyText is the error message of an answer dropped for its values.
func (l msgLimit) tooManyText() string {
	return fmt.Sprintf("result too large: %s sent more than %d JSON values in one message; ask for less",
		l.server, maxMessageValues)
}

// malformedText is the error message of an answer the SDK could not decode, s its scan.
func (l msgLimit) malformedText(s *scanner) string {
	why := "not valid JSON"
	switch {
	case s.maxDepth > sdkMaxDepth:
		why = fmt.Sprintf("nested deeper than %d levels", sdkMaxDepth)
	case s.broken || !s.done || s.invalid:
	case s.top == '[':
		why = "a batch, where one message was due" // only a JSON body (jsonBody) is refused so
	case s.top != '{':
	case s.hasVersion && !s.version2():
		why = `its "jsonrpc" is not "2.0"`
	case !s.hasVersion:
	case s.idRefused():
		why = `its "id" is not a number, a string or null`
	case s.hasMethod && s.methodRefused():
		why = `its "method" is not a string`
	case !s.hasMethod && (s.idKind == 0 || s.idKind == 'n'):
		why = `a response without an "id"`
	case s.errorBad || s.errorObject && s.decodeFailed:
		why = `its "error" is not a JSON-RPC error object`
	}
	return fmt.Sprintf("malformed response: %s sent an answer that is not a JSON-RPC message the client can read (%s)",
		l.server, why)
}

// unreadable returns the error response that takes the place of a message the SDK
// could not decode (readable), s its scan, when it was a response to one of our
// requests: dropped, it would leave its call waiting for the call's timeout, though its
// id says which call it is. Only a message that says it is one (its "jsonrpc" key)
// counts: a log line in JSON may well have an "id" of its own. Otherwise nil.
func (l msgLimit) unreadable(s *scanner) []byte {
	if !s.hasVersion {
		return nil
	}
	id, ok := s.responseID()
	if !ok {
		return nil
	}
	return l.errorCode(id, CodeMalformedResponse, l.malformedText(s))
}

// errorResponse is the JSON-RPC error response for request id (raw JSON) that takes the
// place of an oversized response.
func (l msgLimit) errorResponse(id []byte) []byte { return l.errorWith(id, l.tooLargeText()) }

// errorWith is errorResponse with the message text.
func (l msgLimit) errorWith(id []byte, text string) []byte {
	return l.errorCode(id, CodeResultTooLarge, text)
}

// errorCode is the JSON-RPC error response for request id with code and text.
func (l msgLimit) errorCode(id []byte, code int64, text string) []byte {
	msg, _ := json.Marshal(text)
	out := make([]byte, 0, 96+len(id)+len(msg))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":{"code":`...)
	out = strconv.AppendInt(out, code, 10)
	out = append(out, `,"message":`...)
	out = append(out, msg...)
	return append(out, "}}"...)
}

// dropped decides what replaces an oversized message that s scanned (at least seen bytes
// long): the error response when it was a response to one of our requests, else nothing.
// It logs either way.
func (l msgLimit) dropped(s *scanner, seen int64) []byte {
	if id, ok := s.responseID(); ok {
		return l.replaced(id, seen, s.tooMany())
	}
	what := "unknown"
	if s.method.set {
		what = string(s.method.bytes())
	}
	l.log.Warn("mcpclient: dropped an oversized message from the server", "server", l.server, "method", what,
		"bytes_at_least", seen, "max_bytes", l.max, "too_many_values", s.tooMany())
	return nil
}

// replaced logs an oversized response to request id (too many values, or too many
// bytes) and returns its replacement.
func (l msgLimit) replaced(id []byte, seen int64, values bool) []byte {
	l.log.Warn("mcpclient: answered an oversized response with result_too_large", "server", l.server,
		"id", string(id), "bytes_at_least", seen, "max_bytes", l.max, "too_many_values", values)
	if values {
		return l.errorWith(id, l.tooManyText())
	}
	return l.errorResponse(id)
}

// formatSize writes n bytes the way --max-message-size takes them.
func formatSize(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// growTo makes room for n more bytes in b without letting its capacity pass limit (the
// caller never asks for more than that): append's own growth could overshoot the cap by
// a quarter.
func growTo(b []byte, n, limit int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	c := min(max(2*cap(b), need, 512), limit)
	nb := make([]byte, len(b), max(c, need))
	copy(nb, b)
	return nb
}

// scanner follows one JSON value byte by byte without building it: far enough to tell
// where the value ends (strings, escapes and nesting), to count its values and to pick
// out the top-level "id" and "method" of a JSON-RPC message. It does not validate:
// readable checks a message within the cap before it is passed on, and an oversized one
// is not passed on. Memory is a few hundred bytes whatever the value's size or depth.
type scanner struct {
	started  bool
	done     bool
	depth    int
	top      byte // the value's first byte: '{', '[', '"' or the start of a bare token
	inStr    bool
	esc      bool
	inBare   bool // in a number or literal (true, false, null)
	values   int  // '{', '[' and ',' so far: about the values inside the top one
	maxDepth int  // the deepest nesting so far

	// In the top-level object (depth 1, top '{'):
	wantKey   bool // the next string is a key
	inKey     bool // the current string is a key
	key       capture
	lastKey   keyKind
	wantValue keyKind // after ':': whose value comes next
	capt      *capture
	id        capture
	method    capture
	hasMethod bool
	// hasVersion says the top-level object has a "jsonrpc" key: without one it is no
	// message (the SDK refuses it), a structured log line written to standard output.
	hasVersion bool
	// The SDK takes a message only when its "jsonrpc" decodes to exactly "2.0"
	// (jsonrpc2.DecodeMessage): the last string given wins, a null leaves the one before,
	// any other value fails the decoding. versionOK says the last string was "2.0",
	// versionBad that a value of another type came.
	version    capture
	versionOK  bool
	versionBad bool
	// What else the SDK's decoding refuses (refused), by the first byte of each value:
	// idKind and methodKind are those of the last "id" and "method" (0: none), the last
	// one being the one decoded; errorBad says an "error" was neither an object nor
	// null, errorObject that one was an object, whose "code" and "message" the SDK's own
	// decoding checks (readable), decodeFailed that it refused the message.
	idKind       byte
	methodKind   byte
	errorBad     bool
	errorObject  bool
	decodeFailed bool
	invalid      bool // readable found the value not valid JSON

	// A line break inside the value where it cannot go on (expect, objects), or inside
	// a string, ends it there, broken: stdio messages are one a line, and a malformed one
	// whose braces do not balance would otherwise take the next lines, messages of their
	// own, with it. Pretty-printed valid JSON always goes on, so it stays one value.
	expect expectKind
	strKey bool // the current string is a key, at any depth
	nl     bool // a newline came since the value's last byte that is not whitespace
	broken bool // the value ended at a line break: not JSON, whatever came before
	// objects has bit d set when the container at depth d is an object.
	objects [syntaxDepth / 64]uint64
}

// syntaxDepth is how deep the scanner tells objects from arrays (expect); deeper, a
// comma is taken as followed by anything. Past sdkMaxDepth the value is refused anyway.
const syntaxDepth = 1024

// expectKind is what may follow the last byte of a value that is not whitespace.
type expectKind uint8

const (
	expAny          expectKind = iota // not known: at the top level, or past syntaxDepth
	expKeyOrClose                     // after '{'
	expKey                            // after ',' in an object
	expValueOrClose                   // after '['
	expValue                          // after ':', or ',' in an array
	expColon                          // after a key
	expAfter                          // after a value inside a container: ',' or a closer
)

// continues reports whether c, the first byte after a line break that is not
// whitespace, may follow what came before it in valid JSON. It is lenient where that is
// cheaper: it never refuses what valid JSON has there.
func (s *scanner) continues(c byte) bool {
	switch s.expect {
	case expKeyOrClose:
		return c == '"' || c == '}'
	case expKey:
		return c == '"'
	case expValueOrClose:
		return c == ']' || startsValue(c)
	case expValue:
		return startsValue(c)
	case expColon:
		return c == ':'
	case expAfter:
		return c == ',' || c == '}' || c == ']'
	}
	return true
}

// startsValue reports whether a value may begin with c, leniently.
func startsValue(c byte) bool { return c != ',' && c != ':' && c != '}' && c != ']' }

// setObject notes whether the container just opened at s.depth is an object.
func (s *scanner) setObject(obj bool) {
	d := s.depth
	if d >= syntaxDepth {
		return
	}
	if obj {
		s.objects[d/64] |= 1 << (d % 64)
	} else {
		s.objects[d/64] &^= 1 << (d % 64)
	}
}

// afterComma is what may follow a comma in the container at s.depth.
func (s *scanner) afterComma() expectKind {
	d := s.depth
	switch {
	case d >= syntaxDepth:
		return expAny
	case s.objects[d/64]&(1<<(d%64)) != 0:
		return expKey
	}
	return expValue
}

// version2 reports whether the SDK takes the top-level object's "jsonrpc".
func (s *scanner) version2() bool { return s.hasVersion && s.versionOK && !s.versionBad }

// refused reports what jsonrpc2.DecodeMessage refuses in a valid top-level object, as
// far as the scan tells: an "id" it cannot make an ID of (idRefused), a "method" that
// is not a string or null, an "error" that is not an object or null, a response (no
// "method") without an id or with a null one.
func (s *scanner) refused() bool {
	if s.idRefused() || s.errorBad {
		return true
	}
	if s.hasMethod {
		return s.methodRefused()
	}
	return s.idKind == 0 || s.idKind == 'n'
}

// methodRefused reports whether the last "method" decodes into no string.
func (s *scanner) methodRefused() bool { return s.methodKind != '"' && s.methodKind != 'n' }

// idNumber reports whether the last "id" is a number.
func (s *scanner) idNumber() bool { return s.idKind == '-' || s.idKind >= '0' && s.idKind <= '9' }

// idRefused reports whether the SDK makes no ID of the last "id" (jsonrpc2.MakeID): true,
// false, an object, an array, or a number past float64's range (1e400). A number too
// long to capture is left to readable.
func (s *scanner) idRefused() bool {
	switch s.idKind {
	case 't', 'f', '{', '[':
		return true
	}
	return s.idNumber() && !s.id.long && !floatID(s.id.bytes())
}

// floatID reports whether id, a number, decodes into the float64 the SDK makes of it;
// only one with an exponent can be out of range within a capture's length.
func floatID(id []byte) bool {
	if bytes.IndexAny(id, "eE") < 0 {
		return true
	}
	var f float64
	return sjson.Unmarshal(id, &f) == nil
}

type keyKind uint8

const (
	keyOther keyKind = iota
	keyID
	keyMethod
	keyVersion
	keyError
)

// capture keeps the first bytes of a short token (a key, an id, a method name).
type capture struct {
	b    [128]byte
	n    int
	long bool // more than fits: not an id we sent, not a key we look for
	set  bool // the token ended
}

func (c *capture) reset() { *c = capture{} }

func (c *capture) add(p []byte) {
	if c.long {
		return
	}
	if c.n+len(p) > len(c.b) {
		c.long = true
		return
	}
	c.n += copy(c.b[c.n:], p)
}

func (c *capture) bytes() []byte { return c.b[:c.n] }

func (s *scanner) reset() { *s = scanner{} }

// tooMany reports whether the value holds more than maxMessageValues values so far.
func (s *scanner) tooMany() bool { return s.values > maxMessageValues }

// responseID returns the raw JSON id of a scanned response: a top-level object with an
// id and no method.
func (s *scanner) responseID() ([]byte, bool) {
	if s.hasMethod {
		return nil, false
	}
	return s.topID()
}

// topID returns the raw JSON id of a scanned top-level object when it is a number or a
// string, the kinds of ids the SDK sends.
func (s *scanner) topID() ([]byte, bool) {
	if s.top != '{' || !s.id.set || s.id.long || s.id.n == 0 {
		return nil, false
	}
	id := s.id.bytes()
	if c := id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return nil, false // null, true, false: not an id of ours
	}
	// The scanner does not validate: an id like 7x, "a\q" or 1e400 in a malformed
	// message would make the error response for it one the SDK cannot decode either.
	if !sjson.Valid(id) || id[0] != '"' && !floatID(id) {
		return nil, false
	}
	return id, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isDelim reports whether c ends a bare token.
func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// feed scans p, a continuation of the value. It returns how many bytes of p belong to
// the value and whether the value ended there. A bare token at the top level ends at the
// first byte after it, which is not consumed.
func (s *scanner) feed(p []byte) (int, bool) {
	if s.done {
		return 0, true
	}
	// Positions of the next quote and of the next backslash before it, found with
	// IndexByte and kept until passed: each byte of a string is looked at about once,
	// however many escapes it holds, and never past the string's end.
	quote, slash, nl := -1, -1, -1
	for i := 0; i < len(p); i++ {
		if s.inStr {
			if s.esc {
				if p[i] == '\n' {
					return s.breakAt(i)
				}
				s.esc = false
				s.keep(p[i : i+1])
				continue
			}
			if quote < i {
				quote = nextIndex(p, i, '"')
			}
			if slash < i {
				slash = nextIndex(p[:quote], i, '\\') // quote when there is none before it
			}
			if nl < i {
				nl = nextIndex(p, i, '\n') // a raw newline is no string's: the line ended
			}
			j := min(quote, slash, nl)
			s.keep(p[i:j])
			if j == len(p) {
				return len(p), false
			}
			i = j
			if p[j] == '\n' {
				return s.breakAt(j)
			}
			if p[j] == '\\' {
				s.esc = true
				s.keep(p[j : j+1])
				continue
			}
			s.keep(p[j : j+1])
			s.inStr = false
			s.endString()
			if s.depth == 0 {
				return s.finish(i + 1)
			}
			if s.strKey {
				s.expect = expColon
			} else {
				s.expect = expAfter
			}
			continue
		}
		c := p[i]
		if s.inBare {
			if !isDelim(c) {
				s.keep(p[i : i+1])
				continue
			}
			s.inBare = false
			s.endToken()
			if s.depth == 0 {
				return s.finish(i)
			}
			s.expect = expAfter
		}
		if isSpace(c) {
			if c == '\n' && s.depth > 0 {
				s.nl = true
			}
			continue
		}
		if s.nl {
			s.nl = false
			if !s.continues(c) {
				// Not consumed: it begins the next line.
				return s.breakAt(i)
			}
		}
		if !s.started {
			s.started, s.top = true, c
		}
		switch c {
		case '"':
			s.startValue(c)
			s.inStr = true
			s.strKey = s.expect == expKey || s.expect == expKeyOrClose
			if s.depth == 1 && s.top == '{' && s.wantKey {
				s.inKey, s.wantKey = true, false
				s.key.reset()
			}
			s.keep(p[i : i+1])
		case '{', '[':
			s.startValue(c)
			s.values++
			s.depth++
			s.maxDepth = max(s.maxDepth, s.depth)
			if s.depth == 1 {
				s.wantKey = c == '{'
			}
			s.setObject(c == '{')
			s.expect = expValueOrClose
			if c == '{' {
				s.expect = expKeyOrClose
			}
		case '}', ']':
			if s.depth <= 1 {
				// The value's end, or a stray closer: a one-byte value the SDK will refuse.
				return s.finish(i + 1)
			}
			s.depth--
			s.expect = expAfter
		case ',':
			if s.depth == 0 {
				return s.finish(i + 1)
			}
			s.values++
			if s.depth == 1 && s.top == '{' {
				s.wantKey = true
			}
			s.expect = s.afterComma()
		case ':':
			if s.depth == 0 {
				return s.finish(i + 1)
			}
			if s.depth == 1 && s.top == '{' {
				s.wantValue = s.lastKey
			}
			s.expect = expValue
		default:
			s.startValue(c)
			s.inBare = true
			s.keep(p[i : i+1])
		}
	}
	return len(p), false
}

func (s *scanner) finish(n int) (int, bool) {
	s.done = true
	return n, true
}

// breakAt ends the value, broken, before p[i]: a line ended inside it where valid JSON
// could not (scanner.broken).
func (s *scanner) breakAt(i int) (int, bool) {
	s.broken, s.inStr, s.inBare = true, false, false
	return s.finish(i)
}

// nextIndex is the index of c in p at or after i, or len(p).
func nextIndex(p []byte, i int, c byte) int {
	if j := bytes.IndexByte(p[i:], c); j >= 0 {
		return i + j
	}
	return len(p)
}

// startValue notes where a value of the top-level object begins, to capture it when it
// is the id or the method.
func (s *scanner) startValue(c byte) {
	if s.depth != 1 || s.top != '{' || s.wantValue == keyOther {
		return
	}
	which := s.wantValue
	s.wantValue = keyOther
	if which == keyVersion {
		s.version.reset()
		if c == '"' || c == 'n' {
			s.capt = &s.version
			return
		}
		s.versionBad = true // a number, an object...: not a string, and the SDK's decoding fails
		return
	}
	if which == keyError {
		switch c {
		case '{':
			s.errorObject = true
		case 'n':
		default:
			s.errorBad = true // each "error" is decoded: one of another type fails
		}
		return
	}
	if which == keyID {
		s.idKind = c
		s.id.reset() // the last "id" wins, as it does for encoding/json
		if c == '{' || c == '[' {
			s.id.long = true // not an id
			return
		}
		s.capt = &s.id
		return
	}
	s.methodKind = c
	s.method.reset()
	if c == '"' {
		s.capt = &s.method
	}
}

// keep hands scanned bytes to the key or value being captured.
func (s *scanner) keep(p []byte) {
	switch {
	case s.inKey:
		s.key.add(p)
	case s.capt != nil:
		s.capt.add(p)
	}
}

func (s *scanner) endString() {
	if s.inKey {
		s.inKey = false
		s.lastKey = classifyKey(s.key.bytes(), s.key.long)
		switch s.lastKey {
		case keyMethod:
			s.hasMethod = true
		case keyVersion:
			s.hasVersion = true
		}
		return
	}
	if s.capt == &s.method {
		// Keep the name without its quotes, for the log.
		s.method.n = copy(s.method.b[:], bytes.Trim(s.method.bytes(), `"`))
	}
	s.endToken()
}

func (s *scanner) endToken() {
	if s.capt == &s.version {
		s.judgeVersion()
	}
	if s.capt != nil {
		s.capt.set = true
		s.capt = nil
	}
}

// judgeVersion takes the "jsonrpc" value just captured (a string, or a token that
// begins with n) as the SDK's decoding would.
func (s *scanner) judgeVersion() {
	v := s.version.bytes()
	switch {
	case s.version.long:
		s.versionOK = false // a string that long is not "2.0"
	case len(v) > 0 && v[0] == 'n':
		// A null leaves the value before it, as decoding one into a string does.
		s.versionBad = s.versionBad || string(v) != "null"
	case bytes.IndexByte(v, '\\') < 0:
		s.versionOK = string(v) == `"2.0"`
	default:
		var str string
		s.versionOK = json.Unmarshal(v, &str) == nil && str == "2.0"
	}
}

// classifyKey recognises "id", "method", "jsonrpc" and "error", also when written with
// escapes.
func classifyKey(raw []byte, long bool) keyKind {
	if long || len(raw) < 2 {
		return keyOther
	}
	name := raw[1 : len(raw)-1] // without the quotes
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &s) != nil {
			return keyOther
		}
		name = []byte(s)
	}
	switch string(name) {
	case "id":
		return keyID
	case "method":
		return keyMethod
	case "jsonrpc":
		return keyVersion
	case "error":
		return keyError
	}
	return keyOther
}
