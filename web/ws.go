package web

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
)

// Websocket timing and limits.
const (
	wsWriteWait    = 10 * time.Second
	wsPongWait     = 60 * time.Second
	wsPingEvery    = 25 * time.Second
	wsRecheckEvery = 30 * time.Second // how often the session is checked again (Deps.SessionRecheck)
	// wsRecheckFailures periodic checks in a row that the database does not answer
	// close a socket (1013: the page reconnects and authenticates again).
	wsRecheckFailures = 2
	wsMaxReplay       = 1000 // more missed events than this: ask the page to reload
	wsReplays         = 4    // replays rendering at once, per process (and one per person)
	wsReplayWait      = 10 * time.Second
	// wsReplayBytes bounds the fragments a replay holds before it sends them: past it,
	// the page is asked to reload, as when it missed more than wsMaxReplay events.
	wsReplayBytes = 32 << 20
	// wsReplayBudget bounds the fragments all the process's replays hold at once: a
	// replay sends them after giving its rendering slot back, at the pace of a client
	// that may read as slowly as it likes, so the slots alone do not bound the memory.
	wsReplayBudget = 256 << 20
	// wsReplayPersonBytes bounds what one person's replays hold together (replayKey):
	// their slow sockets held most of wsReplayBudget, and everybody else was asked to reload.
	wsReplayPersonBytes = wsReplayBudget / 4
	// wsRenderCache keeps more fragments than one replay sends: the cache forgets the
	// oldest first, so at 512 every replay of more events than that missed on each one,
	// however many pages replayed the same events.
	wsRenderCache = 2 * wsMaxReplay
	// wsRenderCacheBytes bounds the cached fragments by size too (renderedSize): an
	// execution's page is up to a few MiB, and 512 of them were gigabytes.
	wsRenderCacheBytes = 64 << 20
	// The audit log's events reach a page at most every wsSampleEvery, the newest
	// wsSampleKeep of them in one message: each call announces itself there, and a
	// thousand open dashboards must not cost a thousand writes per call (issue #21).
	// So do a navigation count's (handlers.NavTopic), and a replay sends only the
	// newest wsSampleKeep of each such topic.
	wsSampleEvery = 250 * time.Millisecond
	wsSampleKeep  = 16
	wsBatchCache  = 64
	// wsReadLimit bounds the subscription a page sends on /ws, as decompressed (readJSON).
	wsReadLimit = 4096
	// wsPerPerson bounds one person's open sockets, /ws and terminals together
	// (replayKey), unless Deps.SocketsPerPerson says otherwise: each holds goroutines,
	// buffers and a session check every wsRecheckEvery. Many tabs and terminals stay
	// well under it.
	wsPerPerson = 64
	// wsPerProcess bounds everyone's open sockets together, unless
	// Deps.SocketsPerProcess says otherwise: each holds a subscription's buffer (256
	// events, about 22 KiB), two goroutines and their buffers, so many people's tabs
	// must not grow the process without end.
	wsPerProcess = 10000
)

// sampledTopics are the topics a socket receives in batches (wsSampleEvery), besides
// those it follows only for a navigation count (handlers.NavTopic).
var sampledTopics = []string{audit.Topic}

// Close codes. 1012/1013 make the htmx ws extension reconnect; 4401 tells our script
// the session is gone.
const (
	closeServiceRestart = 1012
	closeTryAgainLater  = 1013
	closeSessionEnded   = 4401
)

// closeRoleChanged is the reason of the 1012 a role change closes a socket with
// (recheck); a shutdown's says "restarting". app.js tells the two apart by it (keep them
// in step): after a restart the page reconnects and resumes, but after a role change
// what it shows is what the old role saw, and the topics the new one lost would only be
// dropped from its next subscription, so it reloads (or says it is out of date).
const closeRoleChanged = "permissions changed; resubscribe"

// ApprovalsTopic is another name for executions.Topic (DESIGN §6 names it): the plans
// that wait for approval, the inbox and its count in the navigation.
const ApprovalsTopic = "approvals"

// subscribeMsg is the first message a client sends: its topics and the id of the last
// event it has seen.
type subscribeMsg struct {
	Subscribe []string `json:"subscribe"`
	LastID    int64    `json:"last_id"`
}

// hub serves /ws: it subscribes each connection to the event bus and pushes
// server-rendered fragments (docs/architecture.md, Events and the websocket).
type hub struct {
	deps     *handlers.Deps
	bus      *events.Bus
	live     handlers.Live
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu sync.RWMutex // read-locked by every socket for every event: the caches' lookups
	// cache holds each event's fragment, rendered and framed (compressed, for clients
	// that negotiated compression) once and written to every client as the same bytes.
	cache      map[eventKey]rendered
	order      []eventKey
	cacheBytes int // the renderedSize of what cache holds
	// batches holds the messages of several sampled events each, keyed by their keys:
	// sockets flush at the same instants, so most of them send the same batch.
	batches    map[string]*websocket.PreparedMessage
	batchOrder []string
	conns      map[*websocket.Conn]struct{}
	// forwarded are the terminal sockets this replica forwards to another
	// (web/terminal_forward.go): counted and told of a shutdown as conns are.
	forwarded map[*forwardedConn]struct{}
	// perPerson counts each person's open sockets (replayKey), bounded by wsPerPerson;
	// open counts them all, bounded by wsPerProcess.
	perPerson map[string]int
	open      int
	closed    bool
	// flying makes every socket that wants an event (or a batch) not yet rendered wait
	// for one rendering of it (once): an event reaches all sockets at once, and each rendering
	// itself (a query and a template) made thousands of clients cost thousands of renders.
	flyMu  sync.Mutex
	flying map[string]*flight
	// renders counts the fragments rendered (/metrics): about one per event.
	renders atomic.Int64
	// rechecks counts the checks of a socket's session (recheck): a query each (/metrics).
	rechecks atomic.Int64
	// sampler wakes the sockets that sample topics when one of those had an event;
	// sampleWakes counts the wakes of all sockets (tests: an idle page does not wake).
	sampler     *sampler
	sampleWakes atomic.Int64
	// sessionUsers is whom recent sessions-topic events are about (aboutUser): every
	// socket looks at every such event, and decoding it once each cost 5,000 decodes
	// per sign-out.
	sessionUsers sessionUsers
	// replays bounds the replays rendering at once: each renders up to wsMaxReplay
	// events (queries each), and a client chooses where its replay starts.
	replays chan struct{}
	// replayHeld is the bytes of fragments replays hold rendered and not yet sent, at
	// most replayBudget (wsReplayBudget; a test lowers it).
	replayHeld   atomic.Int64
	replayBudget atomic.Int64
	// replayByPerson is what each person's replays hold of replayHeld (replayKey; none
	// kept at zero), at most replayPersonShare each (wsReplayPersonBytes; a test lowers it).
	replayPersonMu    sync.Mutex
	replayByPerson    map[string]int64
	replayPersonShare atomic.Int64
	// replayers holds each person's replay slot (replayKey): one replay at a time
	// each, so that nobody keeps all of the process's slots busy.
	replayMu  sync.Mutex
	replayers map[string]*replayer
	// failedAt holds when each event first failed to render (retryRender).
	failMu   sync.Mutex
	failedAt map[int64]time.Time
}

// renderRetryFor is how long after an event first failed to render a socket that
// cannot render it is closed to try again, rather than skipping the event: the page
// reconnects and replays from its cursor, so a database that did not answer for a
// moment loses nobody the event; one that still fails after this is skipped.
const renderRetryFor = 30 * time.Second

// retryRender reports whether a socket that could not render event id (err) should be
// closed to replay it: not when the event itself cannot be read (its payload), which
// no retry changes, nor past renderRetryFor.
func (h *hub) retryRender(id int64, err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return false
	}
	if _, ok := fault.As(err); ok {
		return false // a refusal or a thing gone: the same on every try
	}
	h.failMu.Lock()
	defer h.failMu.Unlock()
	first, ok := h.failedAt[id]
	if !ok {
		if h.failedAt == nil || len(h.failedAt) > 1000 {
			h.failedAt = map[int64]time.Time{} // bounded
		}
		h.failedAt[id] = time.Now()
		return true
	}
	return time.Since(first) < renderRetryFor
}

// eventKey names one event in the hub's caches: its id and the time the database
// stored it. After the bus starts over (events.Reset) the database hands the ids out
// again; a socket may still render an event it buffered before, and its fragment must
// not be taken for the new event of the same id (forget clears the caches only once).
type eventKey struct {
	id int64
	at int64 // CreatedAt in microseconds, the database's precision
}

func keyOf(ev events.Event) eventKey { return eventKey{id: ev.ID, at: ev.CreatedAt.UnixMicro()} }

func (k eventKey) String() string {
	return strconv.FormatInt(k.id, 10) + "@" + strconv.FormatInt(k.at, 10)
}

// rendered is one event's fragment: its bytes (for batches) and its framed message.
type rendered struct {
	raw []byte
	msg *websocket.PreparedMessage
}

func newHub(deps *handlers.Deps, bus *events.Bus, log *slog.Logger) *hub {
	h := &hub{deps: deps, bus: bus, live: handlers.Live{Deps: deps}, log: log,
		cache: map[eventKey]rendered{}, batches: map[string]*websocket.PreparedMessage{}, conns: map[*websocket.Conn]struct{}{},
		forwarded: map[*forwardedConn]struct{}{}, perPerson: map[string]int{}, flying: map[string]*flight{},
		replays: make(chan struct{}, wsReplays), replayers: map[string]*replayer{}, replayByPerson: map[string]int64{},
		sampler: newSampler(bus)}
	if bus != nil {
		// The bus started over (events.Reset: the database handed out ids again): the
		// fragments and batches kept by id may be of events that no longer exist. Not
		// under the bus's lock, which the watch runs with.
		bus.Watch(func(ev events.Event) {
			if ev.Kind == events.Reset {
				go h.forget()
			}
		})
	}
	h.replayBudget.Store(wsReplayBudget)
	h.replayPersonShare.Store(wsReplayPersonBytes)
	// Write buffers are pooled: a socket holds one only while it writes, not 8 KiB for
	// as long as an idle page stays open.
	h.upgrader = websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 8192, WriteBufferPool: &sync.Pool{},
		CheckOrigin: h.sameOrigin, EnableCompression: true}
	return h
}

// forget drops every fragment, batch and session user kept by event id.
func (h *hub) forget() {
	// Cleared in place, under the lock their readers take: the maps themselves are
	// read without it.
	h.mu.Lock()
	clear(h.cache)
	clear(h.batches)
	h.order, h.cacheBytes, h.batchOrder = h.order[:0], 0, h.batchOrder[:0]
	h.mu.Unlock()
	h.sessionUsers.reset()
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns) + len(h.forwarded)
}

// sameOrigin accepts a handshake whose Origin is this site's: its scheme and host as
// the client reached it (handlers.Origin, behind trusted proxies as they say). Browsers
// always send Origin on websocket handshakes, so a missing one is refused too (unless a
// bearer token, which a cross-site page cannot attach, authenticated the request: see
// serve).
func (h *hub) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		_, token := bearer(r.Header.Get("Authorization"))
		return token
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	site := handlers.Origin(r, h.deps.TrustedProxies)
	if u.Scheme+"://"+u.Host == site {
		return true
	}
	// Plain HTTP from a peer not named a trusted proxy may have come through a proxy
	// that ended TLS (docs/deploy.md): an https page of this host is this site's. The
	// other way round, an http page (anyone on the network can serve one) is refused.
	return u.Scheme == "https" && "http://"+u.Host == site
}

func (h *hub) serve(c echo.Context) error {
	p := handlers.PrincipalOf(c)
	if !h.sameOrigin(c.Request()) {
		return errOriginRefused
	}
	done, err := h.admit(p)
	if err != nil {
		return err
	}
	defer done()
	conn, err := h.upgrader.Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader already answered
	}
	h.track(conn, true)
	defer h.track(conn, false)
	h.run(c.Request().Context(), conn, p)
	return nil
}

// errOriginRefused answers a websocket handshake from another site's page.
var errOriginRefused = echo.NewHTTPError(http.StatusForbidden, "websocket origin refused: connect from this site's own pages")

// admit counts a socket of p's before its handshake is upgraded: refused with 429 past
// wsPerPerson (before the upgrade costs anything, rather than a close after it), or
// with 503 while shutting down. done un-counts it.
func (h *hub) admit(p *auth.Principal) (done func(), err error) {
	key := replayKey(p)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, "shutting down")
	}
	if most := h.perPersonCap(); most >= 0 && h.perPerson[key] >= most {
		return nil, echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("too many open live connections (at most %d pages and terminals at once): close some tabs", most))
	}
	if most := h.perProcessCap(); most >= 0 && h.open >= most {
		// The page's socket tries again (app.js), as after a restart.
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable,
			fmt.Sprintf("this server holds as many live connections as it takes (%d); the page tries again shortly", most))
	}
	h.perPerson[key]++
	h.open++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.open--
		if h.perPerson[key]--; h.perPerson[key] <= 0 {
			delete(h.perPerson, key)
		}
	}, nil
}

// errTooBig: a client's message is past the socket's read limit once decompressed.
var errTooBig = errors.New("ws: message too big")

// readJSON reads one client message into v, at most limit bytes of it as decompressed:
// SetReadLimit counts compressed bytes only (permessage-deflate), so a small message
// could decode to megabytes. Past limit it closes conn with 1009 and returns errTooBig.
func (h *hub) readJSON(conn *websocket.Conn, limit int64, v any) error {
	_, r, err := conn.NextReader()
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > limit {
		h.closeWith(conn, websocket.CloseMessageTooBig, "message too big")
		return errTooBig
	}
	return json.NewDecoder(bytes.NewReader(b)).Decode(v) // as conn.ReadJSON decodes
}

func (h *hub) track(conn *websocket.Conn, add bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if add {
		h.conns[conn] = struct{}{}
	} else {
		delete(h.conns, conn)
	}
}

// trackForwarded is track for a forwarded socket. One that comes while the hub shuts
// down is told so at once.
func (h *hub) trackForwarded(c *forwardedConn, add bool) {
	h.mu.Lock()
	closed := h.closed
	if add {
		h.forwarded[c] = struct{}{}
	} else {
		delete(h.forwarded, c)
	}
	h.mu.Unlock()
	if add && closed {
		go c.restartClose(time.Second)
	}
}

// maxRunTopics bounds the test runs one socket follows.
const maxRunTopics = 4

// run is one connection's life: read the subscription, replay what was missed, then
// stream live events until the client leaves, falls behind, or its session ends.
func (h *hub) run(parent context.Context, conn *websocket.Conn, p *auth.Principal) {
	// The request context ends when the handler returns; the connection is hijacked so
	// it lives on its own context.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	defer conn.Close()
	conn.SetReadLimit(wsReadLimit)

	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	var sub subscribeMsg
	if err := h.readJSON(conn, wsReadLimit, &sub); err != nil {
		return
	}
	var topics, refused []string
	var whole []string // the topics asked for as themselves, not only for a count
	runs := 0
	for _, t := range sub.Subscribe {
		nav := false
		if base, ok := handlers.NavTopicOf(t); ok {
			t, nav = base, true
		}
		if t == ApprovalsTopic {
			t = executions.Topic // the approvals inbox and its count are that topic's
		}
		if !nav && !slices.Contains(whole, t) {
			whole = append(whole, t)
		}
		if slices.Contains(topics, t) || slices.Contains(refused, t) {
			continue
		}
		if handlers.IsTestRunTopic(t) {
			// A page shows one run at a time; checking one that another replica holds
			// costs that replica a request.
			if runs++; runs > maxRunTopics {
				refused = append(refused, t)
				continue
			}
		}
		if h.live.MayFollow(p, t) {
			topics = append(topics, t)
		} else {
			refused = append(refused, t)
		}
	}
	if len(topics) == 0 {
		h.closeWith(conn, websocket.CloseNormalClosure, "nothing to subscribe to")
		return
	}
	// A test run's panel waits for its topic and asks the server only when the socket
	// does not follow it, so the page is told which runs were refused.
	if frag, err := h.live.Refused(ctx, refused); err != nil || (frag != nil && h.write(conn, frag) != nil) {
		return
	}

	// Subscribe before replaying, so nothing falls between the two; duplicates are
	// skipped by id.
	var sampled []string
	for _, t := range topics {
		if slices.Contains(sampledTopics, t) || !slices.Contains(whole, t) {
			sampled = append(sampled, t)
		}
	}
	// The sessions topic is always followed, for the events about this person (role
	// changed, disabled, signed out): a page that does not show sessions (the audit
	// browser) is re-checked at once too, not only every wsRecheckEvery. Those events
	// are not sent to a page that did not ask for the topic.
	subscribed := topics
	sessionsOnlyForCheck := !slices.Contains(topics, auth.SessionsTopic)
	if sessionsOnlyForCheck {
		subscribed = append(slices.Clone(topics), auth.SessionsTopic)
	}
	// The sampler is joined before subscribing, and its wake channel taken before
	// anything is taken from the subscription: every event held for it then wakes it.
	var sampling *sampleSet
	var sampleC <-chan struct{}
	if len(sampled) > 0 {
		sampling = h.sampler.join(sampled)
		defer h.sampler.leave(sampling)
		sampleC = sampling.next()
	}
	s := h.bus.SubscribeSampled(subscribed, sampled, wsSampleKeep)
	defer s.Close()
	// What the socket follows knows it is watched while the socket is open (a test
	// run: the page that started it is still there).
	for _, t := range topics {
		defer h.live.Watch(t)()
	}

	// Reader: answers pings, notices the client leaving. Closing the subscription is how
	// the loop below hears it: one channel fewer to wait on there. Messages are skipped
	// unread (their compressed bytes only, within the read limit), not decompressed.
	go func() {
		defer s.Close()
		defer cancel()
		_ = conn.SetReadDeadline(time.Now().Add(wsPongWait))
		conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(wsPongWait)) })
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()

	last := sub.LastID
	recheckFailures := 0 // the session checks in a row the database did not answer
	// A change to this person between the handshake and the subscription (signed out,
	// disabled, demoted) may be older than the page's cursor, or left out of a replay too
	// long to send: check once now.
	//
	// As strict as the check before an event about the person: the change it looks for
	// may come in no event this socket sends, so a database that does not answer closes
	// the socket (1013) rather than let it stream until the periodic check.
	if !h.recheck(ctx, conn, p, true, &recheckFailures) {
		return
	}
	// The replay reads the sessions topic too: a change to this person committed after
	// the check above is then re-checked (deliver) before the events that follow it,
	// which the new role may not see, not after them when it arrives on s.C.
	missed, tooMany, newest, err := h.replayOf(ctx, last, topics, subscribed, sampled, sessionsOnlyForCheck, p.User.ID)
	var pruned int64
	if err == nil && slices.ContainsFunc(topics, prunable) {
		// Read after the replay, so a prune that deleted events before it read is seen.
		// A page following only topics the retention keeps whole (an execution's log)
		// missed nothing it cannot be replayed, however old its cursor.
		pruned, err = h.deps.Events.PrunedThrough(ctx)
	}
	if err != nil {
		h.log.Warn("ws: replay", "err", err)
		h.closeWith(conn, closeTryAgainLater, "try again")
		return
	}
	// A cursor below what the retention pruned missed events nobody can replay: what is
	// left would look complete, so the page is told to reload as when it missed too many.
	reload := func() bool {
		latest, err := h.deps.Events.LatestID(ctx)
		if err != nil {
			// A cursor of 0 would have the page, and its next connection, replay from
			// the start: it comes back when the database does.
			h.log.Warn("ws: reload", "err", err)
			h.closeWith(conn, closeTryAgainLater, "try again")
			return false
		}
		frag, err := h.live.Reload(ctx, latest)
		if err != nil || h.write(conn, frag) != nil {
			return false
		}
		last = latest
		return true
	}
	// A cursor past the newest event is one the database no longer has (it lost its
	// latest commits, and its ids run again from below the cursor): every live event
	// would be dropped as already seen, so the page reloads and takes the newest cursor.
	if tooMany || last < pruned || last > newest {
		if !reload() {
			return
		}
		missed = nil
	}
	// pre holds the replay's events rendered ahead of sending them (below); held is
	// their bytes, which count in the process's replayHeld and in the person's share
	// (replayByPerson) too until sent. hold reports whether all three are still within
	// their bounds; it adds n to each before comparing any, as letGo takes n from each.
	var pre map[int64]rendered
	held := 0
	person := replayKey(p) // p may be re-read (recheck); the person stays the same
	hold := func(n int) bool {
		held += n
		all := h.replayHeld.Add(int64(n))
		mine := h.holdFor(person, n)
		return all <= h.replayBudget.Load() && mine <= h.replayPersonShare.Load() && held <= wsReplayBytes
	}
	letGo := func(n int) {
		if n == 0 {
			return
		}
		held -= n
		h.replayHeld.Add(-int64(n))
		h.holdFor(person, -n)
	}
	defer func() { letGo(held) }()
	// seen is the newest event this socket has been handed (the replay's, then the
	// bus's), committed before anything it does next; checkedThrough is the seen of the
	// last check before an event, which read what every event up to it changed.
	var seen, checkedThrough int64
	// deliver sends one event, after re-checking the caller when the event is about
	// them (role changed, disabled, signed out) and no check has read it yet: a replay of
	// a thousand such events checks once, not once each; false ends the connection.
	deliver := func(ev events.Event) bool {
		seen = max(seen, ev.ID)
		// A change to this person is checked even when the replay already moved the
		// cursor past it: it may have come between the first check and the replay.
		if ev.ID > checkedThrough && ev.Topic == auth.SessionsTopic && !events.SessionStarted.Is(ev) && h.aboutUser(ev, p.User.ID) {
			if !h.recheck(ctx, conn, p, true, &recheckFailures) {
				return false
			}
			checkedThrough = seen
		}
		if ev.ID <= last {
			return true
		}
		if sessionsOnlyForCheck && ev.Topic == auth.SessionsTopic {
			return true
		}
		if r, ok := pre[ev.ID]; ok {
			_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
			if conn.WritePreparedMessage(r.msg) != nil {
				return false
			}
			// Sent: no longer held for this socket.
			delete(pre, ev.ID)
			letGo(len(r.raw))
		} else if !h.send(ctx, conn, ev) {
			return false
		}
		last = ev.ID
		return true
	}
	if len(missed) > 0 {
		// The slots are held while the events render (queries each), not while a slow
		// client reads them; waiting for them is bounded.
		release, err := h.acquireReplay(ctx, p)
		if errors.Is(err, errReplayBusy) {
			h.closeWith(conn, closeTryAgainLater, "busy; reconnect")
			return
		}
		if err != nil {
			return
		}
		pre = make(map[int64]rendered, len(missed))
		over := false
		// Rendering a long replay may take longer than the client's silence is allowed
		// (wsPongWait, kept by its pongs): it is pinged meanwhile, as the loop below does.
		pinged := time.Now()
		for _, ev := range missed {
			if time.Since(pinged) >= wsPingEvery {
				pinged = time.Now()
				_ = conn.SetWriteDeadline(pinged.Add(wsWriteWait))
				if conn.WriteMessage(websocket.PingMessage, nil) != nil {
					release()
					return
				}
			}
			if ctx.Err() != nil {
				// The client left: the rest is not rendered for nobody (each render is a
				// query or more, and left unchecked they started one after another).
				release()
				return
			}
			if ev.ID > last && !(sessionsOnlyForCheck && ev.Topic == auth.SessionsTopic) {
				if r, err := h.render(ctx, ev); err == nil {
					pre[ev.ID] = r
					if !hold(len(r.raw)) {
						over = true
						break
					}
				}
			}
		}
		release()
		if over {
			// Too much to hold for one socket, for this person's replays, or for all
			// replays at once: the page reloads, as when it missed too many events.
			// Events about this person still come on s.C and are re-checked.
			letGo(held)
			pre, missed = nil, nil
			if !reload() {
				return
			}
		}
		if len(missed) > 0 {
			// Every event of the replay was committed before it was read.
			seen = missed[len(missed)-1].ID
		}
		for _, ev := range missed {
			if !deliver(ev) {
				return
			}
		}
		// Whatever was not sent is dropped: not held for the rest of the socket's life.
		pre = nil
		letGo(held)
	}
	// deliverHeld sends events of the sampled topics the bus held: one alone as any
	// other, several in one message.
	var sendBatch func(evs []events.Event) bool
	deliverHeld := func(evs []events.Event) bool {
		evs = slices.DeleteFunc(evs, func(ev events.Event) bool { return ev.ID <= last })
		// Only the audit log's fragments are framed together: an execution's starts with
		// table parts, which must come first in a message (the rest of it was dropped,
		// and htmx found no targets). Of a navigation count's events the newest alone
		// says everything, and goes as a message of its own, in id order with the batch.
		var rows []events.Event
		var newest *events.Event
		for i := range evs {
			if evs[i].Topic == audit.Topic {
				rows = append(rows, evs[i])
			} else {
				newest = &evs[i]
			}
		}
		if newest == nil {
			return sendBatch(rows)
		}
		if len(rows) > 0 && rows[len(rows)-1].ID > newest.ID {
			return deliver(*newest) && sendBatch(rows)
		}
		return sendBatch(rows) && deliver(*newest)
	}
	sendBatch = func(evs []events.Event) bool {
		switch len(evs) {
		case 0:
			return true
		case 1:
			return deliver(evs[0])
		}
		msg, err := h.batch(ctx, evs)
		if err != nil && ctx.Err() == nil && h.retryRender(evs[0].ID, err) {
			h.log.Warn("ws: render events; the page reconnects to replay them", "from", evs[0].ID, "to", evs[len(evs)-1].ID, "err", err)
			h.closeWith(conn, closeTryAgainLater, "try again")
			return false
		}
		if err != nil {
			h.log.Warn("ws: render events", "from", evs[0].ID, "to", evs[len(evs)-1].ID, "err", err)
		} else {
			_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
			if conn.WritePreparedMessage(msg) != nil {
				return false
			}
		}
		last = evs[len(evs)-1].ID
		return true
	}
	// received is the id of the last event taken from s.C: held events are handed over
	// only once everything before them was (TakeSampled).
	var received int64
	fromBus := func(ev events.Event) bool {
		received = ev.ID
		return deliverHeld(s.TakeSampledBefore(ev.ID)) && deliver(ev)
	}
	// flush hands over what the bus held for the sampled topics, after whatever C
	// received before them.
	flush := func() bool {
		for {
			if held, ok := s.TakeSampled(received); ok {
				return deliverHeld(held)
			}
			ev, open := <-s.C
			if !open {
				return true // the loop below sees C closed
			}
			if !fromBus(ev) {
				return false
			}
		}
	}
	// The loop below waits on as few channels as it can: each costs it on every event,
	// times every open socket (a fifth of the CPU of a fan-out to 5,000 sockets with
	// five). A socket following a sampled topic waits on its sampler set's channel
	// (sampleC), closed at the next multiple of wsSampleEvery after an event of one of
	// its sampled topics, so that the sockets flush at the same instants and share their
	// batches, and an idle one does not wake; the others wait on no sampling channel.
	// Pings and session checks share one timer.
	nextPing, nextRecheck := time.Now().Add(wsPingEvery), recheckAt(time.Now(), h.recheckEvery(), p)
	chores := time.NewTimer(time.Hour)
	defer chores.Stop()
	armChores := func() {
		next := nextPing
		if nextRecheck.Before(next) {
			next = nextRecheck
		}
		chores.Reset(time.Until(next))
	}
	armChores()
	for {
		select {
		case ev, ok := <-s.C:
			if ctx.Err() != nil {
				return // the client left: what is still queued goes nowhere
			}
			if !ok {
				// Dropped for falling behind (or the bus stopped): the client reconnects
				// and resumes from its cursor, so nothing is lost.
				h.closeWith(conn, closeTryAgainLater, "fell behind; reconnect")
				return
			}
			if !fromBus(ev) {
				return
			}
		case <-sampleC:
			h.sampleWakes.Add(1)
			sampleC = sampling.next() // before flush takes what is held (sampleSet.next)
			if !flush() {
				return
			}
		case now := <-chores.C:
			if !now.Before(nextPing) {
				nextPing = now.Add(wsPingEvery)
				_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
				if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
					return
				}
			}
			if !now.Before(nextRecheck) {
				if !h.recheck(ctx, conn, p, false, &recheckFailures) {
					return
				}
				nextRecheck = recheckAt(time.Now(), h.recheckEvery(), p)
			}
			armChores()
		}
	}
}

// recheckAt is when a socket of p's next checks its session: every after now, or just
// after the session or token ends by itself (which publishes nothing; a terminal would
// take keys for up to every more), whichever is sooner. A check that found it valid
// past its end (the database's clock behind this host's) looks again shortly after.
func recheckAt(now time.Time, every time.Duration, p *auth.Principal) time.Time {
	next := now.Add(every)
	if exp := p.ExpiresAt(); !exp.IsZero() {
		at := exp.Add(time.Second)
		if !at.After(now) {
			at = now.Add(5 * time.Second)
		}
		if at.Before(next) {
			next = at
		}
	}
	return next
}

// holdFor adds n to what person's replays hold (replayByPerson) and returns their total.
func (h *hub) holdFor(person string, n int) int64 {
	h.replayPersonMu.Lock()
	defer h.replayPersonMu.Unlock()
	v := h.replayByPerson[person] + int64(n)
	if v == 0 {
		delete(h.replayByPerson, person)
	} else {
		h.replayByPerson[person] = v
	}
	return v
}

// errReplayBusy: no replay slot came free within wsReplayWait.
var errReplayBusy = errors.New("ws: every replay slot is busy")

// replayer is one person's replay slot, and how many sockets hold or wait for it.
type replayer struct {
	slot chan struct{}
	refs int
}

// replayKey is whose replays share a slot: the person, by session or by any of their
// tokens.
func replayKey(p *auth.Principal) string {
	if p.User.ID != "" {
		return "user:" + p.User.ID
	}
	return "token:" + p.TokenID
}

// acquireReplay takes p's replay slot, then one of the process's, waiting at most
// wsReplayWait for both (errReplayBusy); release gives them back.
func (h *hub) acquireReplay(ctx context.Context, p *auth.Principal) (release func(), err error) {
	key := replayKey(p)
	h.replayMu.Lock()
	r := h.replayers[key]
	if r == nil {
		r = &replayer{slot: make(chan struct{}, 1)}
		h.replayers[key] = r
	}
	r.refs++
	h.replayMu.Unlock()
	unref := func() {
		h.replayMu.Lock()
		if r.refs--; r.refs == 0 {
			delete(h.replayers, key)
		}
		h.replayMu.Unlock()
	}
	wait := time.NewTimer(wsReplayWait)
	defer wait.Stop()
	select {
	case r.slot <- struct{}{}:
	case <-ctx.Done():
		unref()
		return nil, ctx.Err()
	case <-wait.C:
		unref()
		return nil, errReplayBusy
	}
	select {
	case h.replays <- struct{}{}:
	case <-ctx.Done():
		<-r.slot
		unref()
		return nil, ctx.Err()
	case <-wait.C:
		<-r.slot
		unref()
		return nil, errReplayBusy
	}
	return func() {
		<-h.replays
		<-r.slot
		unref()
	}, nil
}

// perProcessCap is how many sockets may be open at once on this process (negative: any).
func (h *hub) perProcessCap() int {
	if h.deps.SocketsPerProcess != 0 {
		return h.deps.SocketsPerProcess
	}
	return wsPerProcess
}

// perPersonCap is how many sockets one person may hold open (negative: any number).
func (h *hub) perPersonCap() int {
	if h.deps.SocketsPerPerson != 0 {
		return h.deps.SocketsPerPerson
	}
	return wsPerPerson
}

// recheckEvery is how often a socket checks its person's session again.
func (h *hub) recheckEvery() time.Duration {
	if h.deps.SessionRecheck > 0 {
		return h.deps.SessionRecheck
	}
	return wsRecheckEvery
}

// recheck re-reads the caller's session and role. A session that ended closes the
// socket for good (4401: the page goes to sign-in); a role changed either way closes it
// with 1012 (closeRoleChanged), so a client subscribes again and the server grants only
// what the new role allows, and the page reloads (app.js): its controls are the old
// role's (an admin demoted to tool_manager kept the admin's buttons), whatever topics
// the new one may still follow. It reports whether the socket stays open.
// When the database cannot answer, the person is not signed out: a strict check (the
// first, and the one before an event about the caller, which must not go out
// unchecked) closes the socket with 1013, so the page reconnects and its handshake
// authenticates again; the periodic check does so after wsRecheckFailures failures in
// a row (one blip keeps the socket, but a session nobody can check does not keep
// receiving events).
func (h *hub) recheck(ctx context.Context, conn *websocket.Conn, p *auth.Principal, strict bool, failures *int) bool {
	h.rechecks.Add(1)
	role, err := h.deps.Auth.CurrentRole(ctx, p)
	switch {
	case errors.Is(err, auth.ErrNoLongerValid):
		h.closeWith(conn, closeSessionEnded, "session ended")
		return false
	case err != nil:
		h.log.Warn("ws: re-check the session", "err", err)
		if *failures++; strict || *failures >= wsRecheckFailures {
			h.closeWith(conn, closeTryAgainLater, "try again")
			return false
		}
		return true
	}
	*failures = 0
	if role != p.User.Role {
		h.closeWith(conn, closeServiceRestart, closeRoleChanged)
		return false
	}
	return true
}

// replayOf reads the events a socket missed since last, in id order: of the sampled
// topics the newest wsSampleKeep each, as it would have been sent them live; of the
// others up to wsMaxReplay+1 (tooMany: more than wsMaxReplay), of subscribed or, when
// it follows the sessions topic only for its own checks, of topics and the sessions
// events about its person alone (other people's sign-ins are not sent, and must not
// count towards the replay's bound: a quiet page was told to reload after a thousand
// sign-ins). bound is the newest event id when it read, where the replay stops.
func (h *hub) replayOf(ctx context.Context, last int64, topics, subscribed, sampled []string, sessionsOnlyForCheck bool,
	userID string) (evs []events.Event, tooMany bool, bound int64, err error) {
	// The reads below are separate queries: an event committed between two of them would
	// be replayed by a later one while an earlier one missed an older event, and the
	// cursor would pass that one (the subscription's copy is then dropped as old). So
	// every read stops at the newest event committed before them (ids are handed out in
	// commit order); what comes after arrives live.
	bound, err = h.deps.Events.LatestID(ctx)
	if err != nil {
		return nil, false, 0, err
	}
	evs, tooMany, err = h.replayThrough(ctx, last, bound, topics, subscribed, sampled, sessionsOnlyForCheck, userID)
	if err != nil {
		return nil, false, 0, err
	}
	return evs, tooMany, bound, nil
}

// replayThrough is replayOf's reads, of the events after last up to bound alone. Only
// those count towards wsMaxReplay: the events committed after bound arrive live, and
// counting them told a page that missed a few less than wsMaxReplay during a busy moment
// to reload. A read cut at wsMaxReplay+1 that reaches past bound holds every event up
// to bound (the reads are in id order), so the count of those is the replay's.
func (h *hub) replayThrough(ctx context.Context, last, bound int64, topics, subscribed, sampled []string,
	sessionsOnlyForCheck bool, userID string) (evs []events.Event, tooMany bool, err error) {
	through := func(evs []events.Event) []events.Event {
		return slices.DeleteFunc(evs, func(ev events.Event) bool { return ev.ID > bound })
	}
	for _, t := range sampled {
		newest, err := h.deps.Events.Newest(ctx, last, t, wsSampleKeep)
		if err != nil {
			return nil, false, err
		}
		evs = append(evs, through(newest)...)
	}
	read := subscribed
	if sessionsOnlyForCheck {
		read = topics
	}
	read = slices.DeleteFunc(slices.Clone(read), func(t string) bool { return slices.Contains(sampled, t) })
	counted := 0
	if len(read) > 0 { // none: Since would read every topic
		more, err := h.deps.Events.Since(ctx, last, read, wsMaxReplay+1)
		if err != nil {
			return nil, false, err
		}
		more = through(more)
		counted += len(more)
		evs = append(evs, more...)
	}
	if sessionsOnlyForCheck {
		mine, err := h.deps.Events.SinceAbout(ctx, last, userID, wsMaxReplay+1)
		if err != nil {
			return nil, false, err
		}
		mine = through(mine)
		counted += len(mine)
		evs = append(evs, mine...)
	}
	slices.SortFunc(evs, func(a, b events.Event) int { return cmp.Compare(a.ID, b.ID) })
	return evs, counted > wsMaxReplay, nil
}

// prunable reports whether the retention may delete events of topic t: all but an
// execution's, which app's prune keeps as the execution's log (events.Prune's keep).
func prunable(t string) bool { return !strings.HasPrefix(t, executions.TopicOf("")) }

// sessionUserOf is whom a sessions-topic event is about; false when its payload does
// not decode.
func sessionUserOf(ev events.Event) (string, bool) {
	var se events.Session // every kind on the topic carries one
	if ev.Decode(&se) != nil {
		return "", false
	}
	return se.UserID, true
}

// aboutUser reports whether a sessions-topic event concerns the given user, decoding
// each event once for all the hub's sockets (/ws and the terminals').
func (h *hub) aboutUser(ev events.Event, userID string) bool {
	user, ok := h.sessionUsers.of(ev)
	return ok && user == userID
}

// sessionUsersKept bounds sessionUsers: the events about someone of the last while, as
// every socket reads them about together.
const sessionUsersKept = 1024

// sessionUsers remembers whom the newest sessions-topic events are about, by id, so
// that each is decoded once however many sockets look at it.
type sessionUsers struct {
	mu    sync.RWMutex
	users map[int64]sessionUser
	order []int64 // users' ids, oldest first
}

type sessionUser struct {
	// payload is the event's, compared on every hit: a database that lost its latest
	// commits hands their ids out again, to events about someone else.
	payload []byte
	id      string
	ok      bool // the payload decoded
}

// reset forgets every event (the ids are handed out again after events.Reset).
func (c *sessionUsers) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users, c.order = nil, nil
}

func (c *sessionUsers) of(ev events.Event) (string, bool) {
	c.mu.RLock()
	u, hit := c.users[ev.ID]
	c.mu.RUnlock()
	if hit && bytes.Equal(u.payload, ev.Payload) {
		return u.id, u.ok
	}
	u = sessionUser{payload: ev.Payload}
	u.id, u.ok = sessionUserOf(ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users == nil {
		c.users = map[int64]sessionUser{}
	}
	if _, dup := c.users[ev.ID]; !dup {
		c.order = append(c.order, ev.ID)
	}
	c.users[ev.ID] = u // or replaces the event of a reused id
	if len(c.order) > sessionUsersKept {
		delete(c.users, c.order[0])
		c.order = c.order[1:]
	}
	return u.id, u.ok
}

// send renders (once per event, shared by every client) and writes one event.
func (h *hub) send(ctx context.Context, conn *websocket.Conn, ev events.Event) bool {
	r, err := h.render(ctx, ev)
	if err != nil {
		if ctx.Err() == nil && h.retryRender(ev.ID, err) {
			h.log.Warn("ws: render event; the page reconnects to replay it", "id", ev.ID, "kind", ev.Kind, "err", err)
			h.closeWith(conn, closeTryAgainLater, "try again")
			return false
		}
		h.log.Warn("ws: render event", "id", ev.ID, "kind", ev.Kind, "err", err)
		return true // skip it; the cursor moves on with the next one
	}
	_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
	return conn.WritePreparedMessage(r.msg) == nil
}

// render is ev's message: rendered once for all clients, and framed once per kind of
// connection (with or without compression) however many clients it goes to, so an idle
// page costs a write, not a render and a compression, per event; the bytes are kept
// for batches.
func (h *hub) render(ctx context.Context, ev events.Event) (rendered, error) {
	k := keyOf(ev)
	return cached(ctx, h, h.cache, &h.order, k, "e"+k.String(), wsRenderCache,
		h.renderLimit(), func(ctx context.Context) (rendered, error) {
			raw, err := h.live.Render(ctx, ev)
			if err != nil {
				return rendered{}, err
			}
			h.renders.Add(1)
			msg, err := websocket.NewPreparedMessage(websocket.TextMessage, raw)
			if err != nil {
				return rendered{}, err
			}
			return rendered{raw: raw, msg: msg}, nil
		})
}

// renderLimit bounds the rendered fragments the hub keeps by their size.
func (h *hub) renderLimit() byteLimit[rendered] {
	return byteLimit[rendered]{max: wsRenderCacheBytes, used: &h.cacheBytes, size: renderedSize}
}

// renderedSize is about the memory a cached fragment holds: its bytes and up to two
// framings of them (with and without compression).
func renderedSize(r rendered) int { return 3 * len(r.raw) }

// byteLimit bounds one of the hub's caches by the size of what it keeps as well (used
// is its running total, under the hub's mu); a zero byteLimit bounds nothing.
type byteLimit[V any] struct {
	max  int
	used *int
	size func(V) int
}

// cached is the value under k in one of the hub's caches (m, its keys oldest first in
// order), or else builds it once for every socket that asks meanwhile (flight names the
// build among the hub's flights) and keeps it among the newest limit (and within bytes).
func cached[K comparable, V any](ctx context.Context, h *hub, m map[K]V, order *[]K, k K, flight string, limit int,
	bytes byteLimit[V], build func(context.Context) (V, error)) (V, error) {
	h.mu.RLock()
	v, ok := m[k]
	h.mu.RUnlock()
	if ok {
		return v, nil
	}
	got, err := h.once(ctx, flight, func(ctx context.Context) (any, error) {
		h.mu.RLock()
		v, ok := m[k] // built by a flight that ended just before this one began
		h.mu.RUnlock()
		if ok {
			return v, nil
		}
		v, err := build(ctx)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		keepNewest(m, order, k, v, limit, bytes)
		h.mu.Unlock()
		return v, nil
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return got.(V), nil
}

// keepNewest adds v under k to m unless k is there, forgetting the oldest keys while
// more than limit are kept or they pass bytes (order lists m's keys, oldest first). A
// value larger than bytes allows is not kept: its flight's waiters had it.
func keepNewest[K comparable, V any](m map[K]V, order *[]K, k K, v V, limit int, bytes byteLimit[V]) {
	if _, dup := m[k]; dup {
		return
	}
	if bytes.size != nil {
		n := bytes.size(v)
		if n > bytes.max {
			return
		}
		*bytes.used += n
	}
	m[k] = v
	*order = append(*order, k)
	for len(*order) > limit || (bytes.size != nil && *bytes.used > bytes.max) {
		old := (*order)[0]
		if bytes.size != nil {
			*bytes.used -= bytes.size(m[old])
		}
		delete(m, old)
		*order = (*order)[1:]
	}
}

// once runs fn for key once for all the sockets that ask while it runs, and gives each
// its outcome. fn's context is its own, bounded by the write timeout: it outlives the
// socket that started it (the others still wait for it), and carries none of that
// socket's request values. Those hold templ's per-request state (the CSP nonce and
// the children being rendered), which two renderings at once must not share, and a
// fragment sent to every socket must not depend on whose request started it.
func (h *hub) once(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nobody to render for: a flight started now would run on alone
	}
	h.flyMu.Lock()
	f := h.flying[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		h.flying[key] = f
		go func() {
			defer func() {
				h.flyMu.Lock()
				delete(h.flying, key)
				h.flyMu.Unlock()
				close(f.done)
			}()
			// fn runs on a goroutine of its own, outside the request's recovery: a panic
			// in a view would end the process.
			defer func() {
				if p := recover(); p != nil {
					h.log.Error("ws: rendering panicked", "key", key, "panic", p, "stack", string(debug.Stack()))
					f.v, f.err = nil, fmt.Errorf("rendering failed: %v", p)
				}
			}()
			fctx, cancel := context.WithTimeout(context.Background(), wsWriteWait)
			defer cancel()
			f.v, f.err = fn(fctx)
		}()
	}
	h.flyMu.Unlock()
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flight is one rendering every socket that asks meanwhile waits for. Its end closes
// done, which wakes them all at once (singleflight sent each waiter its result on a
// channel of its own: 5,000 channels made and sent to for each event).
type flight struct {
	done chan struct{}
	v    any
	err  error
}

// batch is one message carrying several events' fragments in id order (each ends with
// its cursor, so the page's cursor is the last one's), built once for every socket that
// sends the same events.
func (h *hub) batch(ctx context.Context, evs []events.Event) (*websocket.PreparedMessage, error) {
	key := make([]byte, 0, 30*len(evs))
	for _, ev := range evs {
		k := keyOf(ev)
		key = strconv.AppendInt(append(strconv.AppendInt(append(key, ','), k.id, 10), '@'), k.at, 10)
	}
	// Batches are of sampled topics' events (the audit log's, a navigation count's),
	// small fragments each.
	return cached(ctx, h, h.batches, &h.batchOrder, string(key), "b"+string(key), wsBatchCache, byteLimit[*websocket.PreparedMessage]{},
		func(ctx context.Context) (*websocket.PreparedMessage, error) {
			var raw []byte
			for _, ev := range evs {
				if ctx.Err() != nil {
					return nil, ctx.Err() // out of time: the rest would only fail the same way
				}
				r, err := h.render(ctx, ev)
				if err != nil {
					// Skipped as send skips one alone; the cursor moves on with the next.
					h.log.Warn("ws: render event", "id", ev.ID, "kind", ev.Kind, "err", err)
					continue
				}
				raw = append(raw, r.raw...)
			}
			if raw == nil {
				return nil, errors.New("no event of the batch rendered")
			}
			return websocket.NewPreparedMessage(websocket.TextMessage, raw)
		})
}

func (h *hub) write(conn *websocket.Conn, msg []byte) error {
	_ = conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
	return conn.WriteMessage(websocket.TextMessage, msg)
}

func (h *hub) closeWith(conn *websocket.Conn, code int, reason string) {
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}

// shutdown tells every client the service is restarting (they reconnect and resume).
func (h *hub) shutdown() {
	h.mu.Lock()
	h.closed = true
	conns := make([]*websocket.Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	forwarded := make([]*forwardedConn, 0, len(h.forwarded))
	for c := range h.forwarded {
		forwarded = append(forwarded, c)
	}
	h.mu.Unlock()
	// All at once, and at most about wsCloseWait in all: a close frame waits up to a
	// second for a socket whose client does not read, and hundreds one after another
	// held the rest of the shutdown back for minutes.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { h.closeWith(c, closeServiceRestart, "restarting") })
	}
	for _, c := range forwarded {
		wg.Go(func() { c.restartClose(time.Second) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wsCloseWait):
	}
	for _, c := range conns {
		_ = c.Close()
	}
	for _, c := range forwarded {
		_ = c.Close()
	}
}

// wsCloseWait bounds how long a shutdown waits for the close frames.
const wsCloseWait = 2 * time.Second
