package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// capTransport caps what an HTTP server sends, in the http.Client the SDK's SSE and
// streamable transports read through: an SSE stream per event (streams live as long as
// the session), a JSON body as one message, and any other body (an error page) at the
// cap too, since the SDK reads those whole. Events and JSON bodies are also held to
// maxMessageValues.
type capTransport struct {
	base http.RoundTripper
	lim  msgLimit
	// life ends when the session's endpoint is cleaned up: every request still in
	// flight ends with it, and none starts after.
	life context.Context
	// replyTimeout (defaultReplyTimeout if 0) ends a request whose context is never
	// done: the SDK writes its replies to the server's requests so, and a server that
	// never answered them would hold a goroutine and a connection each for the rest of
	// the session. replySlots (if not nil) bounds how many are in flight at once.
	replyTimeout time.Duration
	replySlots   chan struct{}
}

// replyConns is the size of replySlots: the replies in flight at once to one server,
// each on a connection of its own while the server keeps it. The SDK handles at most
// as many of the server's requests at once (third_party/go-sdk/TOOLWARDEN.md).
const replyConns = 16

// defaultReplyTimeout is replyTimeout for a server with no call timeout of its own.
const defaultReplyTimeout = 30 * time.Second

// drainGrace is how long a response may still be read after its caller's context
// ended. The SDK hands a call its result as soon as the result's event arrives and reads
// the rest of the stream behind it, so the connection can carry the next call; the
// caller cancelling its context on return would cut that short and close the connection
// instead (a new TCP connection for about one call in four).
const drainGrace = time.Second

// RoundTrip implements http.RoundTripper: it wraps the response's body in the reader
// for its Content-Type. A caller that gives up before the response's headers arrive
// ends the request at once; once they arrived, its body may be read for drainGrace
// more (the server hears of it that much later; the SDK tells it of a cancelled call
// at once anyway).
func (t *capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	parent := r.Context()
	if t.life != nil && t.life.Err() != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, errSessionEnded
	}
	var endReply func()
	if parent.Done() == nil {
		var err error
		if parent, endReply, err = t.startReply(parent); err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, err
		}
	}
	ctx, cancelCtx := context.WithCancel(context.WithoutCancel(parent))
	cancel := cancelCtx
	if t.life != nil {
		endLife := context.AfterFunc(t.life, cancelCtx)
		// Unregistered once the request ends, so a long session does not collect them.
		cancel = func() {
			cancelCtx()
			endLife()
		}
	}
	if endReply != nil {
		endReq := cancel
		cancel = func() {
			endReq()
			endReply()
		}
	}
	var answered atomic.Bool
	var grace atomic.Pointer[time.Timer]
	startGrace := func() { grace.Store(time.AfterFunc(drainGrace, cancel)) }
	stop := context.AfterFunc(parent, func() {
		if answered.Load() {
			startGrace()
		} else {
			cancel()
		}
	})
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		stop()
		cancel()
		if err == nil && resp.Body == http.NoBody {
			resp.Body = t.emptyBody(r, resp)
		}
		return resp, err
	}
	answered.Store(true)
	if parent.Err() != nil && stop() {
		startGrace() // ended while the headers came: the grace starts now
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() {
		stop()
		cancel()
		if t := grace.Load(); t != nil {
			t.Stop() // the timer would keep the request's context for the rest of its second
		}
	}}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		e := newEventReader(resp.Body, t.lim)
		e.gate.ended = ctx.Done()
		resp.Body = e
	case "application/json":
		// Also with a declared size within the cap: its values must be counted.
		b := newJSONBody(resp.Body, t.lim, resp.ContentLength, requestID(r))
		b.gate.ended = ctx.Done()
		// The SDK decodes an error status's body only for its error, if any, and falls
		// back on the status (a 404 that ends the session among them): left as it is.
		b.answer = resp.StatusCode >= 200 && resp.StatusCode < 300
		resp.Body = b
	default:
		resp.Body = &limitedBody{src: resp.Body, lim: t.lim, left: int64(t.lim.max) + 1}
	}
	return resp, nil
}

// emptyBody is the body of a response that has none (http.NoBody: a Content-Length of
// 0). An application/json answer with a success status is decoded by the SDK all the
// same when it answers a call, and ends the session: it is answered as a body the SDK
// cannot decode is (jsonBody), for the request's id. Any other stays empty.
func (t *capTransport) emptyBody(r *http.Request, resp *http.Response) io.ReadCloser {
	if resp.StatusCode < 200 || resp.StatusCode >= 300 || mediaType(resp.Header.Get("Content-Type")) != "application/json" {
		return http.NoBody
	}
	b := newJSONBody(http.NoBody, t.lim, 0, requestID(r))
	b.answer = true
	return b
}

// startReply gives a request whose context is never done a deadline and, once one is
// free, one of replySlots; end releases both, and may be called more than once.
func (t *capTransport) startReply(never context.Context) (ctx context.Context, end func(), err error) {
	timeout := t.replyTimeout
	if timeout <= 0 {
		timeout = defaultReplyTimeout
	}
	ctx, cancel := context.WithTimeout(never, timeout)
	if t.replySlots == nil {
		return ctx, cancel, nil
	}
	var life <-chan struct{}
	if t.life != nil {
		life = t.life.Done()
	}
	select {
	case t.replySlots <- struct{}{}:
		return ctx, sync.OnceFunc(func() {
			<-t.replySlots
			cancel()
		}), nil
	case <-ctx.Done():
		cancel()
		return nil, nil, fmt.Errorf("mcpclient: %d replies to the server's requests were still unanswered after %s: %w",
			replyConns, timeout, ctx.Err())
	case <-life:
		cancel()
		return nil, nil, errSessionEnded
	}
}

// errSessionEnded refuses a request made after its session's endpoint was cleaned up.
var errSessionEnded = errors.New("mcpclient: the session has ended")

// releasingBody ends its request's context once it is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base transport.
func (t *capTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// mediaType is a Content-Type without its parameters, lower case.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// requestID returns how to find the JSON-RPC id of the request r carries, or nil. The
// SDK's requests have bodies net/http can replay (GetBody), so the id costs nothing
// unless an answer turns out too large.
func requestID(r *http.Request) func() []byte {
	if r.GetBody == nil {
		return nil
	}
	return func() []byte {
		body, err := r.GetBody()
		if err != nil {
			return nil
		}
		defer body.Close()
		var s scanner
		buf := make([]byte, 4096)
		for {
			n, err := body.Read(buf)
			if _, done := s.feed(buf[:n]); done || err != nil {
				break
			}
		}
		id, _ := s.topID()
		return bytes.Clone(id)
	}
}

// jsonBody holds a JSON response body, at most lim.max bytes of it, scanning it as it
// comes, and hands it on when it ends within the cap and maxMessageValues. A longer one
// (or one of more values) is replaced by the error response for the request's id; the
// rest of it is never read. With answer set, a body the SDK could not decode (decodable)
// is replaced by the malformed-response error for the request's id, as the stdio and
// SSE readers answer one.
type jsonBody struct {
	src   io.ReadCloser
	lim   msgLimit
	size  int64 // Content-Length, or -1
	reqID func() []byte
	buf   []byte
	scan  scanner // of buf, and of what is read past it when there is no request id
	out   []byte
	read  bool // buf is filled (or replaced)
	err   error
	peak  int // the largest capacity buf reached, for tests
	// answer says the body answers a call with a success status: the SDK decodes it as
	// the call's response and ends the session if it cannot.
	answer bool
	end    int // bytes of buf the scanner took: the body's first value and the space before it
	gate   bodyGate
}

func newJSONBody(src io.ReadCloser, lim msgLimit, size int64, reqID func() []byte) *jsonBody {
	return &jsonBody{src: src, lim: lim, size: size, reqID: reqID, gate: newBodyGate(lim)}
}

// Read implements io.Reader.
func (b *jsonBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		b.fill()
	}
	if len(b.out) == 0 {
		b.gate.hold.drop()
		return 0, b.err
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	if len(b.out) == 0 {
		b.gate.hold.drop()
	}
	return n, nil
}

// Close implements io.Closer.
func (b *jsonBody) Close() error {
	b.gate.close()
	return b.src.Close()
}

func (b *jsonBody) fill() {
	if b.size > int64(b.lim.max) {
		b.tooLarge(b.size)
		return
	}
	// A declared size is all net/http reads, and one byte more of room sees the end.
	limit := b.lim.max + 1
	if b.size >= 0 {
		limit = int(b.size) + 1
	}
	for len(b.buf) <= b.lim.max {
		if len(b.buf) >= largeReadFloor && !b.gate.take() {
			b.givenUp()
			return
		}
		b.buf = growTo(b.buf, min(32<<10, limit-len(b.buf)), limit)
		b.peak = max(b.peak, cap(b.buf))
		n, err := b.src.Read(b.buf[len(b.buf):min(cap(b.buf), limit)])
		took, _ := b.scan.feed(b.buf[len(b.buf) : len(b.buf)+n])
		b.end += took
		b.buf = b.buf[:len(b.buf)+n]
		if b.scan.tooMany() {
			b.tooLarge(int64(len(b.buf)))
			return
		}
		if errors.Is(err, io.EOF) {
			b.out, b.err = b.buf, io.EOF
			if b.answer && !b.decodable() {
				b.malformed()
			}
			return
		}
		if err != nil {
			b.err = err
			return
		}
	}
	b.tooLarge(int64(len(b.buf)))
}

// decodable reports whether the SDK decodes the body (handleJSON: jsonrpc.DecodeMessage,
// one message, no batch; what follows the first value is ignored, as it is here).
func (b *jsonBody) decodable() bool {
	return b.scan.done && b.scan.top == '{' && readable(b.buf[:b.end], &b.scan)
}

// malformed replaces a body the SDK could not decode, which would end the session, by
// the malformed-response error for the request's id (or, without one, the response's
// own, when it says it is JSON-RPC), and notes what was dropped as the stdio and SSE
// readers do. With no id to answer for it is left to the SDK.
func (b *jsonBody) malformed() {
	var id, r []byte
	if b.reqID != nil {
		id = b.reqID()
	}
	if id != nil {
		r = b.lim.errorCode(id, CodeMalformedResponse, b.lim.malformedText(&b.scan))
	} else if r = b.lim.unreadable(&b.scan); r != nil {
		id = b.scan.id.bytes()
	}
	b.lim.notJSON(bytes.TrimSpace(b.buf[:min(len(b.buf), strayKeep)]), int64(len(b.buf)), id)
	if r != nil {
		b.out = r
	}
}

// givenUp ends a body whose wait for a large-read slot ended (its call's context, or
// the body closed): the SDK gets an error response for the request's id, as for an
// oversized body, not a read error, which would end the session for every call.
func (b *jsonBody) givenUp() {
	b.buf, b.err = nil, io.EOF
	if b.reqID != nil {
		if id := b.reqID(); id != nil {
			b.out = b.lim.errorCode(id, CodeResultTooLarge, "the answer was not read: the call ended while it waited for its turn to be read")
		}
	}
}

// tooLarge replaces a body that passed the cap or maxMessageValues (seen bytes of it so
// far, all scanned).
func (b *jsonBody) tooLarge(seen int64) {
	b.gate.hold.drop() // what it held is let go: the rest is only scanned
	b.err = io.EOF
	var id []byte
	if b.reqID != nil {
		id = b.reqID()
	}
	if id != nil {
		// The id is known: the rest of the body is not worth reading.
		b.buf = nil
		_ = b.src.Close()
		b.out = b.lim.replaced(id, seen, b.scan.tooMany())
		return
	}
	// No request to go by: scan what the server sent, to its end, for the response's id.
	s := &b.scan
	b.buf = nil
	chunk := make([]byte, 32<<10)
	for !s.done {
		n, err := b.src.Read(chunk)
		s.feed(chunk[:n])
		seen += int64(n)
		if err != nil {
			break
		}
	}
	b.out = b.lim.dropped(s, seen)
	if b.out == nil {
		text := b.lim.tooLargeText()
		if s.tooMany() {
			text = b.lim.tooManyText()
		}
		b.err = fmt.Errorf("mcpclient: %s", text)
	}
}

// limitedBody ends a body of another type (an error page) with an error after lim.max
// bytes.
type limitedBody struct {
	src  io.ReadCloser
	lim  msgLimit
	left int64 // bytes still allowed, plus one to tell "exactly the cap" from "more"
}

// Read implements io.Reader.
func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("mcpclient: %s", b.lim.tooLargeText())
	}
	n, err := b.src.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	if b.left == 0 {
		// The byte past the cap is not handed on.
		return n - 1, fmt.Errorf("mcpclient: %s", b.lim.tooLargeText())
	}
	return n, err
}

// Close implements io.Closer.
func (b *limitedBody) Close() error { return b.src.Close() }

// eventSlack bounds what an SSE event may add to its message: "event: message",
// "id: ...", "data: " and newlines. The message (the data, as the SDK joins it) is held
// to the cap; everything kept of the event to the cap plus this, so that many tiny data
// lines, whose prefixes the message does not count, cannot grow memory either.
const eventSlack = 256

// lineKind is what an SSE line is, by its field name.
type lineKind uint8

// fieldKinds are the SSE fields the SDK reads, by name.
var fieldKinds = map[string]lineKind{"data": lineData, "event": lineEvent, "id": lineID, "retry": lineRetry}

const (
	lineSkip lineKind = iota // a comment or a field the SDK ignores
	lineData
	lineEvent
	lineID
	lineRetry
)

// eventReader passes an SSE stream on one event at a time, holding at most the cap of
// an event's data (and eventSlack more of its other lines). Every event's data is
// scanned as it comes; an event that grows past the cap, or whose data holds more than
// maxMessageValues values, is scanned to its end without being kept: a response
// becomes an event carrying the error response for its id, anything else is dropped.
// An event whose data the SDK could not decode (not JSON: see readable) is dropped
// too; one whose data is a batch becomes an event per message (splitBatch). The
// stream itself goes on, and so does the session. Comments and fields the
// SDK ignores are dropped as they come, at any length. Lines are passed on as "field:value", which the SDK reads as the
// original.
type eventReader struct {
	src io.ReadCloser
	br  *bufio.Reader
	lim msgLimit

	mid    bool     // in the middle of a line that came in pieces
	kind   lineKind // of the current line
	heldCR int      // carriage returns that ended a piece: part of the line unless "\n" follows

	ev        []byte  // the event's kept lines
	dataLines int     // data lines of the event so far
	dataBytes int     // the message so far: data values and the newlines that join them
	over      bool    // the event passed the cap: scanned, not kept
	seen      int64   // bytes of the event's data so far
	scan      scanner // of the event's data
	name, id  capture // the event's "event" and "id" fields, once it passed the cap

	out []byte
	err error

	gate bodyGate

	peak int // the largest capacity ev reached, for tests
}

// eventBuffer is the read buffer of an SSE stream, the size the SDK reads events with;
// lines longer than it come in pieces.
const eventBuffer = 4096

// eventBuffers are the read buffers of ended streams: every call over streamable HTTP
// gets a stream of its own, and a buffer per call would be most of what a call
// allocates here.
var eventBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, eventBuffer) }}

func newEventReader(src io.ReadCloser, lim msgLimit) *eventReader {
	br := eventBuffers.Get().(*bufio.Reader)
	br.Reset(src)
	return &eventReader{src: src, br: br, lim: lim, gate: newBodyGate(lim)}
}

// Close implements io.Closer.
func (e *eventReader) Close() error {
	e.gate.close()
	return e.src.Close()
}

// Read implements io.Reader.
func (e *eventReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err != nil {
			e.gate.hold.close()
			return 0, e.err
		}
		if len(e.ev) == 0 && cap(e.ev) > keepBuffer {
			e.ev = nil
		}
		frag, err := e.br.ReadSlice('\n')
		switch {
		case err == nil:
			e.piece(frag, true)
		case errors.Is(err, bufio.ErrBufferFull):
			e.piece(frag, false)
		default:
			if len(frag) > 0 {
				e.piece(frag, false)
			}
			if errors.Is(err, io.EOF) {
				// The SDK takes an unterminated last event as it is; so do we.
				if e.mid {
					e.endLine()
				}
				e.dispatch()
			}
			e.err = err
			// Nothing reads the buffer after an error (Close does not touch it), so
			// the next stream may have it.
			e.br.Reset(nil)
			eventBuffers.Put(e.br)
			e.br = nil
		}
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	if len(e.out) == 0 {
		e.out = nil        // not the event's array, which the next read lets go
		e.gate.hold.drop() // the SDK has the event
	}
	return n, nil
}

// piece takes the next piece of a line; whole says it ends the line.
func (e *eventReader) piece(frag []byte, whole bool) {
	body := frag
	if whole {
		body = bytes.TrimRight(frag, "\r\n") // what the SDK does with a line
	}
	if e.mid && e.heldCR > 0 {
		if !whole || len(body) > 0 {
			e.add(bytes.Repeat([]byte{'\r'}, e.heldCR)) // inside the line after all
		}
		e.heldCR = 0
	}
	if !e.mid {
		if whole && len(body) == 0 {
			e.dispatch()
			return
		}
		e.mid = true
		body = e.startLine(body, whole)
	}
	if !whole {
		trimmed := bytes.TrimRight(body, "\r")
		e.heldCR = len(body) - len(trimmed)
		body = trimmed
	}
	e.add(body)
	if whole {
		e.endLine()
	}
}

// startLine sets the kind of a new line from its first piece, keeps its field name, and
// returns the rest of the piece: the field's value.
func (e *eventReader) startLine(first []byte, whole bool) []byte {
	e.kind = lineSkip
	if first[0] == ':' {
		return nil
	}
	name, value, found := bytes.Cut(first, []byte{':'})
	if !found && !whole {
		return nil // a field name longer than a read buffer is none the SDK knows
	}
	kind, known := fieldKinds[string(name)]
	if !known {
		return nil
	}
	e.kind = kind
	if e.kind == lineData {
		if e.dataLines > 0 {
			e.dataBytes++ // the newline the SDK joins data lines with
			e.scan.feed([]byte{'\n'})
		}
		e.dataLines++
	}
	if e.over {
		e.startCapture()
		return value
	}
	// The one space after the colon belongs to the field, not to the value.
	var pre [8]byte
	prefix := append(append(pre[:0], name...), ':')
	if len(value) > 0 && value[0] == ' ' {
		prefix, value = append(prefix, ' '), value[1:]
	}
	if e.dataBytes > e.lim.max || !e.keep(prefix) {
		e.overflow()
		e.startCapture()
	}
	return value
}

// startCapture begins an "event" or "id" line of an event past the cap.
func (e *eventReader) startCapture() {
	switch e.kind {
	case lineEvent:
		e.name.reset()
	case lineID:
		e.id.reset()
	}
}

// add takes a piece of the current line's value.
func (e *eventReader) add(p []byte) {
	if e.kind == lineSkip || len(p) == 0 {
		return
	}
	if e.kind == lineData {
		e.seen += int64(len(p))
		e.scan.feed(p)
	}
	if !e.over {
		if e.kind == lineData {
			e.dataBytes += len(p)
		}
		fits := e.dataBytes <= e.lim.max && !e.scan.tooMany()
		if fits && len(e.ev)+len(p) > largeReadFloor && !e.gate.take() {
			// Its call or session ended while the event waited: the stream ends, as
			// one the server closed (a read error would end the session).
			e.ev, e.err = nil, io.EOF
			return
		}
		if fits && e.keep(p) {
			return
		}
		e.overflow()
	}
	e.capture(p)
}

// capture takes a piece of an "event" or "id" line of an event past the cap.
func (e *eventReader) capture(p []byte) {
	switch e.kind {
	case lineEvent:
		e.name.add(p)
	case lineID:
		e.id.add(p)
	}
}

// keep appends to the event's kept lines, unless they would pass the cap plus
// eventSlack; it reports whether it did.
func (e *eventReader) keep(p []byte) bool {
	limit := e.lim.max + eventSlack
	if len(e.ev)+len(p) > limit {
		return false
	}
	e.ev = growTo(e.ev, len(p)+1, limit+1) // +1: the blank line that ends the event
	e.ev = append(e.ev, p...)
	e.peak = max(e.peak, cap(e.ev))
	return true
}

func (e *eventReader) endLine() {
	e.mid = false
	if e.kind != lineSkip && !e.over && !e.keep([]byte{'\n'}) {
		e.overflow()
	}
}

// overflow turns the event into one that is not kept: its kept "event" and "id" lines
// go into name and id (its data was scanned already), and their memory is let go.
func (e *eventReader) overflow() {
	e.gate.hold.drop() // what it held is let go: the rest is only scanned
	e.over = true
	e.name.reset()
	e.id.reset()
	kept := e.ev
	e.ev = nil
	cur := e.kind
	for len(kept) > 0 {
		var line []byte
		line, kept, _ = bytes.Cut(kept, []byte{'\n'})
		name, value, _ := bytes.Cut(line, []byte{':'})
		e.kind = fieldKinds[string(name)] // only known fields were kept
		e.startCapture()
		e.capture(value)
	}
	e.kind = cur
}

// dispatch ends the event: it is handed on as kept, replaced, or dropped.
func (e *eventReader) dispatch() {
	e.dataLines, e.dataBytes = 0, 0
	defer func() {
		e.seen = 0
		e.scan.reset()
		if len(e.out) == 0 {
			e.gate.hold.drop() // dropped whole
		}
	}()
	if e.over {
		e.over = false
		if r := e.lim.dropped(&e.scan, e.seen); r != nil {
			var name, id []byte
			if e.name.n > 0 && !e.name.long {
				name = e.name.bytes()
			}
			if e.id.n > 0 && !e.id.long {
				id = e.id.bytes()
			}
			e.out = replacementEvent(name, id, r)
		}
		return
	}
	if len(e.ev) == 0 {
		return // only comments
	}
	data, ok := e.decodable()
	if name, id := e.fields(); !ok && isBatch(data, &e.scan) && (name == nil || string(bytes.TrimSpace(name)) == "message") {
		// Each of its messages in an event of its own, the last with the event's id: the
		// SDK ends the session on any batch over HTTP. The events have no name, which
		// the SDK reads as "message" (an event of another name is no message to the
		// Streamable HTTP client, and dropped below): one would cost up to eventSlack
		// bytes a message, in a batch of hundreds of thousands.
		msgs := e.lim.splitBatch(data)
		for i, m := range msgs {
			var evID []byte
			if i == len(msgs)-1 {
				evID = id
			}
			e.out = append(e.out, replacementEvent(nil, evID, m)...)
		}
		e.ev = e.ev[:0]
		return
	}
	if !ok {
		// Dropped, and the stream goes on: the SDK would end the session on it. A
		// response to one of our calls is answered with an error at once.
		var answered []byte
		if r := e.lim.unreadable(&e.scan); r != nil {
			answered = e.scan.id.bytes()
			name, id := e.fields()
			e.out = replacementEvent(name, id, r)
		}
		e.lim.notJSON(data[:min(len(data), strayKeep)], int64(len(data)), answered)
		e.ev = e.ev[:0]
		return
	}
	e.out = append(e.ev, '\n')
	e.ev = e.ev[:0]
}

// replacementEvent is the event that carries r, an error response, in place of an event
// named name with SSE id id (each left out when nil).
func replacementEvent(name, id, r []byte) []byte {
	var out []byte
	if name != nil {
		out = append(append(append(out, "event: "...), bytes.TrimSpace(name)...), '\n')
	}
	if id != nil {
		out = append(append(append(out, "id: "...), bytes.TrimSpace(id)...), '\n')
	}
	return append(append(append(out, "data: "...), r...), "\n\n"...)
}

// fields returns the values of the kept event's "event" and "id" lines (the last of
// each), nil for one it has not or that is empty.
func (e *eventReader) fields() (name, id []byte) {
	defer func() {
		if len(bytes.TrimSpace(name)) == 0 {
			name = nil
		}
		if len(bytes.TrimSpace(id)) == 0 {
			id = nil
		}
	}()
	for rest := e.ev; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		field, value, _ := bytes.Cut(line, []byte{':'})
		switch string(field) {
		case "event":
			name = value
		case "id":
			id = value
		}
	}
	return name, id
}

// decodable checks the kept event's data as the SDK will read it (each data line
// trimmed, joined by newlines), and returns it: ok is false when the SDK would try to
// decode it and could not (readable). An event without data is not decoded, nor is
// an SSE server's "endpoint" event, whose data is a URL. An event of several data
// lines is joined into a copy to be checked (within the cap, and rare: the SDKs write
// one).
func (e *eventReader) decodable() (data []byte, ok bool) {
	var name []byte
	lines := 0
	for rest := e.ev; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		field, value, _ := bytes.Cut(line, []byte{':'})
		switch string(field) {
		case "event":
			name = bytes.TrimSpace(value)
		case "data":
			value = bytes.TrimSpace(value)
			lines++
			switch lines {
			case 1:
				data = value
			case 2:
				data = append(append(append([]byte(nil), data...), '\n'), value...)
			default:
				data = append(append(data, '\n'), value...)
			}
		}
	}
	if len(data) == 0 || string(name) == "endpoint" {
		return data, true
	}
	return data, readable(data, &e.scan)
}
