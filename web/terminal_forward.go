package web

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// hopKey is where replicaHop leaves the name of the replica that forwarded a request.
const hopKey = "replica_hop"

// replicaHop checks the header of a request another replica forwarded (package
// replicahop): a valid one marks the request (no second forwarding; the internal
// routes) and gives it the address and origin of the client the other replica served;
// a forged, stale, replayed or misdirected one is refused, so no outside client passes
// for a replica.
func (s *Server) replicaHop(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Header.Get(replicahop.Header) == "" {
			return next(c)
		}
		if s.hops == nil {
			return echo.NewHTTPError(http.StatusForbidden, "replica hop refused: this server has no keyring")
		}
		hop, _, err := s.hops.VerifyRequest(c.Request())
		if err != nil {
			if ok, dropped := s.hopLog.Take(); ok {
				s.log.Warn("a request claimed to come from a replica", "err", err, "path", textcheck.Clip(c.Request().URL.Path, 200, "…"),
					"ip", c.RealIP(), "refusals_left_out_before", dropped)
			}
			status := http.StatusForbidden
			switch {
			case errors.Is(err, replicahop.ErrBusy):
				status = http.StatusServiceUnavailable
			case errors.Is(err, replicahop.ErrMisdirected):
				status = http.StatusMisdirectedRequest // the sender's ErrorHandler names the address at fault
			}
			return echo.NewHTTPError(status, "replica hop refused: "+err.Error())
		}
		c.SetRequest(handlers.Forwarded(c.Request(), hop.Client, hop.Origin))
		c.Set(hopKey, hop.From)
		// One id on both replicas: the sender's, signed in the hop (a v2 hop of an
		// earlier release carries none, and this replica's own id stays).
		if hop.RequestID != "" {
			c.Response().Header().Set(echo.HeaderXRequestID, hop.RequestID)
		}
		return next(c)
	}
}

// hopFrom is the replica that forwarded c's request ("" when none did).
func hopFrom(c echo.Context) string {
	from, _ := c.Get(hopKey).(string)
	return from
}

// forwardTerminal sends a request for a terminal another replica runs (its page, its
// websocket) to that replica, which answers it as if the browser had asked it: the
// same Host, cookies and Origin, so it authenticates the same session and its origin
// check passes; streamed, websocket upgrade included. A terminal whose replica stopped
// answers 410 (503 while this replica cannot tell yet; unsettled). A request that was
// already forwarded is never forwarded again.
func (s *Server) forwardTerminal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// The origin first, as the terminal's own socket checks it: a handshake from
		// another site's page must not take its person's hop allowance, a nonce of the
		// owner's and one of their sockets here before the owner refuses it.
		if websocket.IsWebSocketUpgrade(c.Request()) && !s.hub.sameOrigin(c.Request()) {
			return errOriginRefused
		}
		ts := s.deps.Terminals
		id := c.Param("id")
		if ts == nil || ts.Store() == nil || ts.Get(id) != nil {
			return next(c)
		}
		ctx := c.Request().Context()
		rec, err := ts.Store().Get(ctx, id)
		if errors.Is(err, builtin.ErrNoTerminal) || err == nil && rec.Local {
			return next(c)
		}
		if err != nil {
			return err
		}
		if see, _ := handlers.RecordAccess(handlers.PrincipalOf(c), rec); !see {
			return fault.NotFound("terminal")
		}
		if from := hopFrom(c); from != "" {
			return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("terminal %s is not on replica %s (forwarded by %s)", id, ts.Store().Replica(), from))
		}
		if rec.EndedReason == "replica_stopped" {
			return terminalGone(rec)
		}
		owner, err := ts.Store().Owner(ctx, rec)
		if errors.Is(err, builtin.ErrReplicaGone) {
			if u := s.unsettled("terminal "+id, rec.Replica); u != nil {
				return u
			}
			return terminalGone(rec)
		}
		if err != nil {
			return err
		}
		// Each forwarded request takes one of the nonces the owner remembers for a
		// minute, past which it refuses every hop (other people's terminals and runs
		// too): a person's share is limited as forwardRun's is (a websocket counts once).
		p := handlers.PrincipalOf(c)
		if p == nil || !s.deps.RunHops.Allow(p.User.ID) {
			return echo.NewHTTPError(http.StatusTooManyRequests, "too many requests for terminals on other replicas; wait a moment")
		}
		if websocket.IsWebSocketUpgrade(c.Request()) {
			// A forwarded socket counts against its person's sockets here too, and ends
			// here when either side ends or the browser stays silent (forwardedConn). It
			// is one of this replica's live sockets (the gauge, the dashboard), told
			// 1012 when this replica shuts down.
			done, err := s.hub.admit(p)
			if err != nil {
				return err
			}
			defer done()
			c.Response().Writer = forwardedSocket{ResponseWriter: c.Response().Writer, hub: s.hub}
		}
		return s.forwardTo(c, owner, "terminal "+id, nil)
	}
}

// forwardedSocket hands the reverse proxy a forwardedConn when it takes over the
// connection for a websocket, tracked by hub (when set) until it is closed.
type forwardedSocket struct {
	http.ResponseWriter
	hub *hub
}

func (w forwardedSocket) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	fc := &forwardedConn{Conn: conn, hub: w.hub}
	if w.hub != nil {
		w.hub.trackForwarded(fc, true)
	}
	// The proxy writes the owner's 101 answer through brw: through fc too, so that fc
	// knows where the socket's frames begin.
	return fc, bufio.NewReadWriter(brw.Reader, bufio.NewWriter(fc)), nil
}

func (w forwardedSocket) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// forwardedConn is the browser's side of a forwarded websocket. Its reads end after
// wsPongWait of silence (the owner pings every wsPingEvery, and a page answers), and it
// has no CloseWrite: the proxy then ends both sides as soon as the owner closes, where
// it half-closed the browser's side and waited for a browser that may never speak.
//
// It follows the frames the owner sends through it, so that a shutdown of this replica
// can put a close frame (1012, restarting) between two of them (restart), as the hub
// tells its own sockets: the bytes the proxy copies are not cut at frames.
type forwardedConn struct {
	net.Conn
	hub *hub

	mu      sync.Mutex // held by each write
	frames  frameCursor
	restart bool          // a close frame is to go at the next frame boundary
	closed  bool          // a whole close frame went to the browser (the owner's or restart's)
	sent    chan struct{} // restart's: closed once closed is set
	// ending is set once restart's close frame went: reads no longer extend their
	// deadline, and Close lets the browser's answer in (Close).
	ending    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// errRestarting ends the proxy's copy to a socket that was sent its close frame.
var errRestarting = errors.New("websocket: this replica is restarting")

func (c *forwardedConn) Read(b []byte) (int, error) {
	if !c.ending.Load() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(wsPongWait))
	}
	return c.Conn.Read(b)
}

func (c *forwardedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restart && c.closed {
		return 0, errRestarting
	}
	n := len(b)
	if c.restart {
		n = c.frames.until(b) // the frame under way, not the next
	}
	w, err := c.Conn.Write(b[:n])
	if c.frames.advance(b[:w]) {
		c.closed = true
	}
	if err != nil {
		return w, err
	}
	if c.restart {
		if !c.closed && c.frames.atBoundary() {
			c.sendClose()
		}
		if c.closed {
			close(c.sent)
			if n < len(b) {
				return n, errRestarting
			}
		}
	}
	return n, nil
}

// restartClose sends the browser a close frame (1012, restarting) now if no frame is
// under way, else once the one under way is through, and waits up to wait for it.
func (c *forwardedConn) restartClose(wait time.Duration) {
	c.mu.Lock()
	if !c.restart {
		c.restart, c.sent = true, make(chan struct{})
		if !c.closed && c.frames.atBoundary() {
			c.sendClose()
		}
		if c.closed {
			close(c.sent)
		}
	}
	sent := c.sent
	c.mu.Unlock()
	select {
	case <-sent:
	case <-time.After(wait):
	}
}

// sendClose writes the close frame, c.mu held at a frame boundary.
func (c *forwardedConn) sendClose() {
	payload := websocket.FormatCloseMessage(closeServiceRestart, "restarting")
	frame := append([]byte{0x80 | websocket.CloseMessage, byte(len(payload))}, payload...) // final, unmasked as a server's
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Conn.Write(frame)
	c.closed = true
	c.ending.Store(true)
}

// closeLinger is how long Close lets the browser's answer to a close frame in.
const closeLinger = time.Second

// Close ends the tracking and closes the connection. After restart's close frame it
// half-closes it and reads what the browser still sends for up to closeLinger before it
// closes it (RFC 6455 §7.1.1): closed with the browser's bytes unread (a pong, its
// close frame) it would be reset, and the browser could lose the close frame.
func (c *forwardedConn) Close() error {
	c.closeOnce.Do(func() {
		if c.hub != nil {
			c.hub.trackForwarded(c, false)
		}
		if !c.ending.Load() {
			c.closeErr = c.Conn.Close()
			return
		}
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(closeLinger))
		go func() {
			_, _ = io.Copy(io.Discard, c.Conn)
			_ = c.Conn.Close()
		}()
	})
	return c.closeErr
}

// frameCursor follows the bytes a server sends on an upgraded connection: the HTTP
// answer up to its blank line, then websocket frames (RFC 6455 §5.2), each a header of
// 2 to 14 bytes and a payload of the length it gives. At a boundary a control frame may
// go in, also between the frames of a fragmented message (§5.4).
type frameCursor struct {
	body    bool     // past the HTTP answer
	crlf    int      // how much of "\r\n\r\n" the answer's last bytes matched
	head    [14]byte // the frame header read so far
	headN   int
	payload uint64 // what remains of the current frame's payload
	close   bool   // the current frame is a close frame
}

func (f *frameCursor) atBoundary() bool { return f.body && f.headN == 0 && f.payload == 0 }

// until returns how many of b's bytes reach the first boundary in b (all of b when
// none does), leaving f as it was.
func (f *frameCursor) until(b []byte) int {
	g := *f
	for i := range b {
		if g.atBoundary() {
			return i
		}
		g.advance(b[i : i+1])
	}
	return len(b)
}

// advance follows b and reports whether a close frame ended in it.
func (f *frameCursor) advance(b []byte) (closed bool) {
	for len(b) > 0 {
		switch {
		case !f.body:
			c := b[0]
			b = b[1:]
			switch {
			case c == "\r\n\r\n"[f.crlf]:
				f.crlf++
			case c == '\r':
				f.crlf = 1
			default:
				f.crlf = 0
			}
			f.body = f.crlf == 4
		case f.payload > 0:
			n := min(uint64(len(b)), f.payload)
			f.payload -= n
			b = b[n:]
			closed = closed || f.payload == 0 && f.close
		default:
			f.head[f.headN] = b[0]
			f.headN++
			b = b[1:]
			if f.headN < 2 {
				continue
			}
			size := 2
			switch f.head[1] & 0x7f {
			case 126:
				size += 2
			case 127:
				size += 8
			}
			if f.head[1]&0x80 != 0 {
				size += 4 // a masking key
			}
			if f.headN < size {
				continue
			}
			switch n := f.head[1] & 0x7f; n {
			case 126:
				f.payload = uint64(binary.BigEndian.Uint16(f.head[2:4]))
			case 127:
				f.payload = binary.BigEndian.Uint64(f.head[2:10])
			default:
				f.payload = uint64(n)
			}
			f.close = f.head[0]&0x0f == websocket.CloseMessage
			f.headN = 0
			closed = closed || f.payload == 0 && f.close
		}
	}
	return closed
}

// forwardTo answers c's request by sending it to replica owner, which answers it as if
// the browser had asked it: the same Host, cookies and Origin, so it authenticates the
// same session and its origin check passes; streamed, websocket upgrade included. what
// names what the request is about, in logs and in the error a browser gets when the
// owner does not answer (502, without the owner's address or the transport's error:
// those are logged); unless unreachable answers then instead (it is told why).
func (s *Server) forwardTo(c echo.Context, owner replicas.Replica, what string, unreachable func(echo.Context, error) error) error {
	if owner.Address == "" {
		err := fmt.Errorf("replica %s, which holds %s, has no address other replicas reach it at (--advertise-url)", owner.Name, what)
		s.log.Warn("forward a request to the replica that holds it", "what", what, "err", err)
		if unreachable != nil {
			return unreachable(c, err)
		}
		return echo.NewHTTPError(http.StatusBadGateway, err.Error())
	}
	target, err := url.Parse(owner.Address)
	if err != nil {
		return fmt.Errorf("replica %s's address %q: %w", owner.Name, owner.Address, err)
	}
	body, err := forwardedBody(c.Request())
	if err != nil {
		return err
	}
	// One id for the request on both replicas: the owner records this one and answers
	// it. The hop signs it, so no one on the way between the replicas can choose it.
	hop := replicahop.Hop{From: s.deps.Replicas.Name(), To: owner.ID, Client: c.RealIP(),
		Origin: handlers.Origin(c.Request(), s.deps.TrustedProxies), RequestID: handlers.RequestID(c)}
	proxy := &httputil.ReverseProxy{
		// Bounded dial and wait for the headers, never the environment's proxy; an
		// answer that began (a stream, a websocket) is not cut.
		Transport:     replicahop.Transport,
		FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the owner checks the same Origin against the same Host
			replicahop.SignRequest(s.deps.Keys, hop, r.Out, body, s.hops.Clock())
		},
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode == http.StatusMisdirectedRequest {
				return errMisdirected
			}
			// The owner's answer has its own security headers (its CSP names the
			// nonce of its page's scripts); this replica's would go out beside them,
			// and a browser enforces both.
			for _, h := range securityHeaderNames {
				c.Response().Header().Del(h)
			}
			// The owner answers the request's id too: one X-Request-ID, not two.
			c.Response().Header().Del(echo.HeaderXRequestID)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("forward a request to the replica that holds it", "what", what, "replica", owner.Name, "address", owner.Address, "err", err)
			if unreachable != nil {
				if err := unreachable(c, err); err != nil {
					c.Error(err)
				}
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			if errors.Is(err, errMisdirected) {
				_, _ = io.WriteString(w, replicahop.MisdirectedText(owner.Name, what))
				return
			}
			_, _ = io.WriteString(w, "replica "+owner.Name+", which holds "+what+", did not answer; try again")
		},
	}
	proxy.ServeHTTP(c.Response(), c.Request())
	return nil
}

// forwardedBody is the body of a request to forward, which the hop signs (pages and
// the websocket have none). A form was read already (refuseBadText checks its text), so
// its values are sent again; a multipart form cannot be.
func forwardedBody(in *http.Request) ([]byte, error) {
	switch {
	case in.MultipartForm != nil:
		return nil, echo.NewHTTPError(http.StatusUnsupportedMediaType, "a multipart form cannot be forwarded to another replica")
	case in.PostForm != nil:
		return []byte(in.PostForm.Encode()), nil
	case in.Body == nil || in.Body == http.NoBody:
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(in.Body, replicahop.MaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > replicahop.MaxBody {
		return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", replicahop.MaxBody))
	}
	return body, nil
}

// errMisdirected: the replica at a terminal owner's address is another one.
var errMisdirected = errors.New("another replica answered at the owner's address")

// unsettled is the answer for what, held by replica owner that looks stopped, while
// this replica's own heartbeats have not been steady for long (replicas.Steady): then
// every replica looks stopped, so it is 503, try again soon, not gone. nil when steady.
func (s *Server) unsettled(what, owner string) error {
	rs := s.deps.Replicas
	if rs == nil || rs.Steady() {
		return nil
	}
	f := fault.Unavailable("replica_unsettled", fmt.Sprintf("replica %s, which holds %s, has not been seen lately, and this replica was "+
		"out of touch with the database itself just now: try again in a few seconds", owner, what))
	f.RetryAfter = rs.DeadAfter()
	return f
}

// terminalGone is the answer for a terminal whose replica stopped, or stopped beating:
// a paused one (SIGSTOP, a starved host) is taken for stopped, so the message says both.
func terminalGone(rec builtin.TerminalRecord) error {
	return echo.NewHTTPError(http.StatusGone, fmt.Sprintf("Terminal %s ran on replica %s, which stopped or is not answering (its shell or command ended with it).", rec.ID, rec.Replica))
}

// terminalOpTimeout bounds an operation another replica sent here: the sender waits no
// longer (app's terminalClient).
const terminalOpTimeout = 30 * time.Second

// terminalOp serves POST /internal/v1/terminals/:id/op: a terminal_operations
// operation another replica's router let through, run here where the terminal is
// (builtin.Terminals.RunOp). Replicas only (a signed hop; auth.PermReplica).
func (s *Server) terminalOp(c echo.Context) error {
	ts := s.deps.Terminals
	if hopFrom(c) == "" || ts == nil {
		return echo.NewHTTPError(http.StatusForbidden, "replicas only")
	}
	var in builtin.TerminalOpRequest
	if err := json.NewDecoder(c.Request().Body).Decode(&in); err != nil {
		return fault.Invalid("invalid_body", "the body is not a terminal operation: "+err.Error(), nil)
	}
	if in.Operation == "" {
		return fault.Invalid("invalid_body", "operation: required", nil)
	}
	if in.Call.ConversationID == "" {
		return fault.Invalid("invalid_body", "call.conversation_id: required", nil)
	}
	var args map[string]any
	if err := json.Unmarshal(in.Arguments, &args); err != nil {
		return fault.Invalid("invalid_body", "arguments: not an object", nil)
	}
	if sid, _ := args["sessionId"].(string); sid != c.Param("id") {
		return fault.Invalid("invalid_body", "arguments.sessionId: must be the terminal of the path", nil)
	}
	if ts.Get(c.Param("id")) == nil {
		// Its own code: the sender takes it for "no such session", which a 404 of a
		// route this replica lacked would not mean.
		return fault.New(fault.KindNotFound, builtin.TerminalNotHereCode, "terminal not found").About("terminal")
	}
	// Not the request's context: the sender giving up (its timeout, a cut connection)
	// must not stop an input or a close half done; bounded on its own instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), terminalOpTimeout)
	defer cancel()
	res, err := ts.RunOp(ctx, builtin.Call{Meta: in.Call}, in.Operation, in.Arguments)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}
