package events

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
)

// BusOptions tune a Bus. nil means defaults.
type BusOptions struct {
	Logger *slog.Logger
	// Buffer is each subscription's queue length (default 256); a subscriber that falls
	// this far behind is dropped (its channel closed) rather than blocking everyone.
	Buffer int
	// Local, when set, is the Local of the pool the bus reads: the bus joins it once it
	// first listens, until Run ends, so the transactions begun on it have the bus
	// deliver their events before they return. NewBus panics when it is another pool's.
	Local *Local
	// Quiet is how long the bus waits for a notification before it checks that its
	// listening connection still answers and reads what it may have missed. Default
	// 15 s.
	Quiet time.Duration
}

// Bus listens for NOTIFY on Channel and fans committed events out to subscribers.
type Bus struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	buffer int
	local  *Local // nil: none
	quiet  time.Duration

	// origin marks the NOTIFYs of events this bus delivers itself (PublishBatch).
	origin string

	mu   sync.Mutex
	subs map[*Subscription]struct{}
	// byTopic indexes subs by the topics they follow (all: those following every
	// topic), so an event costs nothing for the subscribers that do not follow its
	// topic: a thousand open dashboards must not slow down every tool call's event.
	byTopic   map[string]map[*Subscription]struct{}
	all       map[*Subscription]struct{}
	lastID    int64
	lastAt    time.Time // event lastID's created_at (zero: none): its identity, as its id may be handed out again (rewound)
	primed    bool      // lastID was set when the bus first listened: a reconnect catches up from it
	restarts  uint64    // how many times the bus started over (rewound): a check that raced one does not repeat it
	listening bool
	stopped   bool      // Run ended: nothing is delivered any more
	since     time.Time // when listening last changed (NewBus: since when it has not listened)
	ready     chan struct{}
}

// NewBus creates a Bus; call Run to start it.
func NewBus(pool *pgxpool.Pool, opts *BusOptions) *Bus {
	if opts == nil {
		opts = &BusOptions{}
	}
	if opts.Local != nil && opts.Local.pool != pool {
		panic("events: a bus joins the Local of the pool it reads")
	}
	b := &Bus{pool: pool, log: opts.Logger, buffer: opts.Buffer, local: opts.Local, subs: map[*Subscription]struct{}{}, byTopic: map[string]map[*Subscription]struct{}{}, all: map[*Subscription]struct{}{},
		ready: make(chan struct{}), origin: rand.Text()[:12], since: time.Now()}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.buffer <= 0 {
		b.buffer = 256
	}
	if b.quiet = opts.Quiet; b.quiet <= 0 {
		b.quiet = 15 * time.Second
	}
	return b
}

// Local is the buses of this process that read one pool, made explicit: the composition
// root creates it, joins its buses to it (BusOptions.Local) and hands it to the services
// that publish, which begin their transactions on it (it is a db.TxBeginner; see
// Beginner). Once a transaction begun on it that published events commits, every bus
// of it that has listened delivers the events up to the newest before db.WithTx
// returns, also while it reconnects (it reads them from the pool as its catch-up would), so
// what watches them synchronously (Watch: the router's snapshot, the token cache) has
// seen the change by the time its author answers. Without it they would arrive with
// the NOTIFY, a little later, and a call right after "disabled" could still run. A
// transaction begun on the bare pool (a service built without one: the CLI's export and
// import) reaches every bus by NOTIFY only.
type Local struct {
	pool *pgxpool.Pool

	mu    sync.Mutex
	buses []*Bus // those that have listened and still run
}

// NewLocal creates the Local of pool, with no bus yet.
func NewLocal(pool *pgxpool.Pool) *Local { return &Local{pool: pool} }

// Begin starts a transaction on the pool; db.WithTx hands its after-commit hooks the
// Local, which is how published events find the buses to sync.
func (l *Local) Begin(ctx context.Context) (pgx.Tx, error) { return l.pool.Begin(ctx) }

// Beginner is what a service writing to pool begins its transactions on: l when it is
// pool's Local, else (l nil or of another pool) pool itself.
func (l *Local) Beginner(pool *pgxpool.Pool) db.TxBeginner {
	if l == nil || l.pool != pool {
		return pool
	}
	return l
}

// set adds bus to the buses that deliver local commits or removes it.
func (l *Local) set(bus *Bus, joined bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buses = slices.DeleteFunc(l.buses, func(x *Bus) bool { return x == bus })
	if joined {
		l.buses = append(l.buses, bus)
	}
}

// syncLocal runs after a transaction begun on b committed event id: when b is a Local,
// each of its buses delivers the events up to id before it returns (see Local), whether
// or not it listens at the moment: a bus reconnecting would otherwise leave its watches
// (the router's tool lookups) stale until it is back. Failing to read is logged: the
// NOTIFY, or the reconnect's catch-up, catches up.
func syncLocal(ctx context.Context, b db.TxBeginner, id int64) {
	l, ok := b.(*Local)
	if !ok {
		return
	}
	l.mu.Lock()
	buses := slices.Clone(l.buses)
	l.mu.Unlock()
	for _, bus := range buses {
		bus.mu.Lock()
		behind := bus.primed && bus.lastID < id
		bus.mu.Unlock()
		// Not behind: delivered already (its NOTIFY's catch-up came first), or the ids went
		// back and the listener has not noticed yet. Telling the two apart would cost a
		// query after every such commit, on calls' paths: the listener notices (the
		// NOTIFY out of order, its reconnect, its quiet check) within moments. Behind, the
		// catch-up checks that the last event delivered is still there (catchUp).
		if !behind {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := bus.catchUp(ctx); err != nil {
			bus.log.Warn("events: could not read events after a commit; the next notification catches up", "err", err)
		}
		cancel()
	}
}

// Subscription receives the events of its topics in id order on C. C is closed when the
// subscription is closed or dropped (Dropped then reports true): for falling behind,
// when the subscriber resumes from the last id it saw with Since, or because the bus
// started over (see Reset), when what it shows must be read anew.
type Subscription struct {
	C       <-chan Event
	c       chan Event
	fn      func(Event) // a Watch: called in place of sending on c
	topics  []string
	bus     *Bus
	dropped bool
	closed  bool
	// sampled are the topics whose events are held instead of sent on c (the newest
	// keep of each topic); lastSent is the id of the last event sent on c. Guarded by bus.mu.
	sampled  []string
	keep     int
	held     []Event
	lastSent int64
	// anyHeld is whether held has events, readable without bus.mu: every socket takes
	// what is held before each event it receives, and taking the bus's lock for that
	// made thousands of sockets queue behind the delivery of one event to all of them.
	anyHeld atomic.Bool
}

// Subscribe starts delivering events on the given topics (all topics when empty).
func (b *Bus) Subscribe(topics ...string) *Subscription {
	ch := make(chan Event, b.buffer)
	s := &Subscription{C: ch, c: ch, topics: slices.Clone(topics), bus: b}
	b.mu.Lock()
	b.addLocked(s)
	b.mu.Unlock()
	return s
}

// SubscribeSampled is Subscribe, except that the events of the sampled topics (some of
// topics) are not sent on C: the subscription holds the newest keep of each until
// TakeSampled hands them over. A subscriber that shows a busy topic at its own pace (an
// idle dashboard following the audit log while thousands of calls a second are
// recorded) then wakes when it chooses, not once per event; what it skips it can read
// with Since.
func (b *Bus) SubscribeSampled(topics, sampled []string, keep int) *Subscription {
	s := b.Subscribe(topics...)
	b.mu.Lock()
	s.sampled, s.keep = slices.Clone(sampled), max(keep, 1)
	b.mu.Unlock()
	return s
}

// TakeSampled returns the held events of the sampled topics, oldest first, and forgets
// them. received is the id of the last event the caller took from C: while C holds
// events not yet received, it returns ok false and nothing, so that the caller receives
// those first and never sees events out of id order.
func (s *Subscription) TakeSampled(received int64) (evs []Event, ok bool) {
	if !s.anyHeld.Load() {
		// Nothing held (most ticks of an idle page): no need for the bus's lock, which
		// fan-out and commits wait on, four times a second per page.
		return nil, true
	}
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if s.lastSent > received {
		return nil, false
	}
	evs, s.held = s.held, nil
	s.anyHeld.Store(false)
	return evs, true
}

// TakeSampledBefore returns the held events with ids below id, oldest first, and
// forgets them: the caller delivers them before the event id it took from C.
func (s *Subscription) TakeSampledBefore(id int64) []Event {
	// Events are held before any later event is sent on C, so one taken from C finds
	// anyHeld set for whatever was held before it.
	if !s.anyHeld.Load() {
		return nil
	}
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	n := 0
	for n < len(s.held) && s.held[n].ID < id {
		n++
	}
	if n == 0 {
		return nil
	}
	evs := slices.Clone(s.held[:n])
	s.held = slices.Delete(s.held, 0, n)
	s.anyHeld.Store(len(s.held) > 0)
	return evs
}

// Watch calls fn with each event of the topics (all when empty) as the bus delivers
// it, in id order, before the bus moves on: a transaction begun on the bus's Local that
// published an event has had fn called by the time it returns from committing. fn runs
// with the bus locked, so it must be quick and must not use the bus. A watch has no C
// and is never dropped; Close ends it. Whatever its topics, fn is also called with a
// Reset event when the bus starts over: it must then drop everything it keeps.
func (b *Bus) Watch(fn func(Event), topics ...string) *Subscription {
	s := &Subscription{fn: fn, topics: slices.Clone(topics), bus: b}
	b.mu.Lock()
	b.addLocked(s)
	b.mu.Unlock()
	return s
}

// Close stops delivery and closes C.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	b := s.bus
	delete(b.subs, s)
	if len(s.topics) == 0 {
		delete(b.all, s)
	}
	for _, t := range s.topics {
		if m := b.byTopic[t]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(b.byTopic, t)
			}
		}
	}
	if s.c != nil {
		close(s.c)
	}
}

// Dropped reports whether the bus dropped the subscription for falling behind.
func (s *Subscription) Dropped() bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.dropped
}

// addLocked registers s and indexes it by its topics.
func (b *Bus) addLocked(s *Subscription) {
	b.subs[s] = struct{}{}
	if len(s.topics) == 0 {
		b.all[s] = struct{}{}
	}
	for _, t := range s.topics {
		m := b.byTopic[t]
		if m == nil {
			m = map[*Subscription]struct{}{}
			b.byTopic[t] = m
		}
		m[s] = struct{}{}
	}
}

// Subscribers is the number of live subscriptions.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Ready is closed once the bus listens, so events committed after it are delivered.
func (b *Bus) Ready() <-chan struct{} { return b.ready }

// Run listens until ctx ends, reconnecting with backoff after errors and catching up on
// the events committed while it was away.
func (b *Bus) Run(ctx context.Context) error {
	defer func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		if b.local != nil {
			b.local.set(b, false)
		}
	}()
	var readyOnce sync.Once
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	for {
		listened := false
		err := b.listen(ctx, func() { listened = true; readyOnce.Do(func() { close(b.ready) }) })
		if ctx.Err() != nil {
			b.closeAll()
			return nil
		}
		if listened {
			backoff = firstBackoff // it doubles over failures in a row only
		}
		b.log.Warn("events: listener lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			b.closeAll()
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (b *Bus) listen(ctx context.Context, onReady func()) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The listening connection is ours for good; don't hand it back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+Channel); err != nil {
		return fmt.Errorf("events: listen: %w", err)
	}
	b.mu.Lock()
	first := !b.primed
	b.mu.Unlock()
	if first {
		// Events from before the bus first listened are history, not news.
		st, err := b.state(ctx, 0)
		if err != nil {
			return err
		}
		b.mu.Lock()
		if !b.primed {
			b.lastID, b.lastAt, b.primed = st.latest, st.latestAt, true
		}
		b.mu.Unlock()
	} else if _, err := b.rewound(ctx); err != nil {
		// A reconnect, maybe to a database that came back without its newest commits: the
		// catch-up below reads after lastID, and would skip every new event until the
		// ids passed it again.
		return err
	}
	// Listening first, then the catch-up: an event published here meanwhile is either
	// delivered by its publisher or read by the catch-up (its NOTIFY, of this bus's own
	// origin, is skipped), never left to the next notification.
	b.setListening(true)
	defer b.setListening(false)
	if err := b.catchUp(ctx); err != nil {
		return err
	}
	onReady()
	// heard is the id of the last notification this connection heard, from the newest
	// the catch-up read: a notification at or below it means the ids went back (or, once,
	// a commit the catch-up read already; rewound then finds nothing).
	b.mu.Lock()
	heard := b.lastID
	b.mu.Unlock()
	for {
		wait, cancel := context.WithTimeout(ctx, b.quiet)
		n, err := pc.WaitForNotification(wait)
		cancel()
		if err != nil && ctx.Err() == nil && pgconn.Timeout(err) {
			// Quiet for a while. A connection left half-open by a failover waits for
			// ever (the TCP keepalives take minutes), and a catch-up that failed
			// waits for the next notification: ask the connection, then the table.
			ping, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := pc.Exec(ping, "/* events.listen.ping */ SELECT 1")
			cancel()
			if err != nil {
				return fmt.Errorf("events: the listening connection does not answer: %w", err)
			}
			if _, err := b.rewound(ctx); err != nil {
				return err
			}
			if err := b.catchUp(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		newest, origin, _ := strings.Cut(n.Payload, " ")
		id, perr := strconv.ParseInt(newest, 10, 64)
		if perr == nil {
			// Ids are drawn under the journal lock, so notifications come in id order; one
			// that does not follow the last means the ids went back while this connection
			// lived (the sequence set back by hand). Delivered would skip its events.
			back := id <= heard
			heard = id
			if back {
				if _, err := b.rewound(ctx); err != nil {
					return err
				}
			}
		}
		if origin == b.origin {
			continue // Published.Deliver hands them over, no need to read them back
		}
		if perr == nil && b.delivered(id) {
			continue // syncLocal or an earlier read already brought them
		}
		if err := b.catchUp(ctx); err != nil {
			return err
		}
	}
}

// delivered reports whether event id has been dispatched (ids are handed out in commit
// order, so everything up to the last one dispatched has been).
func (b *Bus) delivered(id int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return id <= b.lastID
}

// Listening reports whether the bus listens for other replicas' events, and since when
// it has (or has not).
func (b *Bus) Listening() (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.listening, b.since
}

func (b *Bus) setListening(on bool) {
	b.mu.Lock()
	b.listening, b.since = on, time.Now()
	b.mu.Unlock()
	if on && b.local != nil {
		// Joined once primed, and not left when the listener is lost (see syncLocal).
		b.local.set(b, true)
	}
}

// PublishBatch is events.PublishBatch for a publisher in this bus's process: once the
// transaction ends, Published.Deliver hands the events to this bus's subscribers
// directly, and the bus skips their NOTIFY instead of reading them back (other
// replicas read them as usual). That read is most of what an event costs.
func (b *Bus) PublishBatch(ctx context.Context, tx pgx.Tx, drafts []Draft) (*Published, error) {
	evs, prevAt, err := publishBatch(ctx, tx, drafts, b.origin)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	return &Published{bus: b, evs: evs, prevAt: prevAt}, nil
}

// Published are events written by Bus.PublishBatch in a transaction.
type Published struct {
	bus *Bus
	evs []Event
	// prevAt is the created_at of the event just before the first (nil: none, or not
	// visible to the insert): Deliver hands the events out directly only when that is
	// the last one the bus delivered, not an event of the same id lost since.
	prevAt *time.Time
}

// Deliver fans the events out; call it once the transaction ended, with the commit's
// error. A nil Published does nothing. Events that do not directly follow the last one
// delivered (another transaction committed between), or a commit that may have failed,
// make the bus read what it missed, so order and completeness are as with NOTIFY.
func (p *Published) Deliver(commitErr error) {
	if p == nil {
		return
	}
	b := p.bus
	b.mu.Lock()
	if !b.primed || b.stopped {
		// Before the first listen the bus delivers nothing committed earlier; after Run,
		// nothing at all. While it reconnects it does deliver (see syncLocal).
		b.mu.Unlock()
		return
	}
	// Following the last one delivered means following that very event: after the
	// database lost its newest commits, the ids up to lastID are handed out again, and
	// events that follow their id alone would skip those re-issued in between.
	next := commitErr == nil && (b.lastID == 0 || p.prevAt != nil && p.prevAt.Equal(b.lastAt))
	for i, ev := range p.evs {
		next = next && ev.ID == b.lastID+1+int64(i)
	}
	if next {
		b.dispatchLocked(p.evs)
		b.mu.Unlock()
		return
	}
	// Committed yet not after the last one dispatched: read already, or the ids went
	// back (see rewound), which the catch-up alone would never notice.
	check := commitErr == nil && p.evs[len(p.evs)-1].ID <= b.lastID
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if check {
		// One query either way: read already (nothing to catch up), or started over.
		back, err := b.rewound(ctx)
		if err != nil {
			b.log.Warn("events: could not read the newest event id after a local publish; the listener checks it when it reconnects", "err", err)
		} else if !back {
			return
		}
	}
	if err := b.catchUp(ctx); err != nil {
		b.log.Warn("events: could not read events after a local publish; the next notification catches up", "err", err)
	}
}

// catchUp fetches every event after the last one dispatched and fans them out. Several
// notifications that arrive together are served by one query. It reads the last one
// dispatched too, and starts over (rewound) when that is gone or another event: its id
// was handed out again, and the events after it are not those that followed it.
func (b *Bus) catchUp(ctx context.Context) error {
	const batch = 500
	for {
		b.mu.Lock()
		after, at := b.lastID, b.lastAt
		b.mu.Unlock()
		evs, anchor, err := b.after(ctx, after, batch)
		if err != nil {
			return err
		}
		if after > 0 && !at.IsZero() && (anchor == nil || !anchor.Equal(at)) {
			// Gone (lost, or pruned as the bus fell behind) or not the same event.
			back, err := b.rewound(ctx)
			if err != nil {
				return err
			}
			if back {
				continue // from the newest id, as the Reset says
			}
		}
		if len(evs) == 0 {
			return nil
		}
		b.mu.Lock()
		if b.lastID != after || !b.lastAt.Equal(at) {
			// Another delivery moved on while this read ran (a commit of this process, a
			// reset): what was read follows an event that is no longer the last, and
			// dispatching it would skip the check of the one that is. Read again from it.
			b.mu.Unlock()
			continue
		}
		b.dispatchLocked(evs)
		b.mu.Unlock()
		if len(evs) < batch {
			return nil
		}
	}
}

// after reads up to limit events after id, oldest first, and the created_at of event id
// itself (nil when there is none): one range of the primary key, so checking the
// last event dispatched costs the catch-up nothing.
func (b *Bus) after(ctx context.Context, id int64, limit int) ([]Event, *time.Time, error) {
	rows, err := b.pool.Query(ctx, `/* events.Bus.after */
		SELECT id, topic, kind, CASE WHEN id = $1 THEN 'null' ELSE payload END AS payload, created_at
		FROM events WHERE id >= $1 ORDER BY id LIMIT $2`, id, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("events: after %d: %w", id, err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, nil, fmt.Errorf("events: after %d: %w", id, err)
	}
	var anchor *time.Time
	if len(evs) > 0 && evs[0].ID == id {
		anchor = &evs[0].CreatedAt
		evs = evs[1:]
	}
	return evs[:min(len(evs), limit)], anchor, nil
}

// Reset is the Kind of the event a bus hands every watch, whatever its topics, when it
// starts over because the event ids went back: the database lost its newest commits
// (a crash within an asynchronous commit's window, a failover to a standby that lagged,
// a restore from a backup) and hands out their ids again. The events the watch saw
// since may never have happened, and those committed anew up to the Reset's ID are not
// delivered one by one: a watch drops whatever it keeps. Subscriptions are dropped
// instead (Dropped), so that their subscribers read anew. It is not a stored event and
// not in the catalogue; its ID is the newest id in the table, delivery resumes after it.
const Reset = "events.reset"

// rewound starts the bus over when the database lost the last event dispatched (see
// Reset): the newest id in the table is below it, or the row of its id is gone or is
// another event (an older created_at or a newer one: new commits took the id again
// before the bus looked). It moves lastID to the newest id, so the catch-up and NOTIFYs
// deliver what comes after, hands every watch a Reset and drops every subscription. It
// reports whether it did. A dispatched event had committed before lastID was read, so a
// table without it lost it, unless pruning deleted it (its id is at most the newest
// pruned; pruning keeps the newest).
func (b *Bus) rewound(ctx context.Context) (bool, error) {
	b.mu.Lock()
	seen, at, restarts := b.lastID, b.lastAt, b.restarts
	b.mu.Unlock()
	st, err := b.state(ctx, seen)
	if err != nil {
		return false, err
	}
	lost := st.latest < seen
	if !lost && seen > 0 && !at.IsZero() {
		if st.seenAt == nil {
			lost = seen > st.pruned
		} else {
			lost = !st.seenAt.Equal(at)
		}
	}
	if !lost {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.restarts != restarts || !b.primed || b.stopped {
		return false, nil // another check started over meanwhile (or the bus is done)
	}
	b.log.Warn("events: the last event delivered is gone (the database lost its newest commits or was restored); watches and subscriptions start over",
		"newest", st.latest, "delivered", b.lastID)
	latest := st.latest
	b.lastID, b.lastAt = latest, st.latestAt
	b.restarts++
	ev := Event{ID: latest, Kind: Reset, Payload: json.RawMessage(`{}`), CreatedAt: time.Now()}
	for s := range b.subs {
		if s.fn != nil {
			s.fn(ev)
			continue
		}
		s.dropped = true
		s.closeLocked() // deleting from the map being ranged over is allowed
	}
	return true, nil
}

// busState is what rewound reads in one statement.
type busState struct {
	latest   int64      // the newest event id (0: none)
	latestAt time.Time  // its created_at
	seenAt   *time.Time // the created_at of the event asked about (nil: no such row)
	pruned   int64      // the newest id pruned (PrunedThrough)
}

// state reads the newest event, the created_at of event seen and the newest id pruned.
func (b *Bus) state(ctx context.Context, seen int64) (busState, error) {
	var st busState
	var latestAt *time.Time
	err := b.pool.QueryRow(ctx, `/* events.Bus.state */
		WITH newest AS (SELECT id, created_at FROM events ORDER BY id DESC LIMIT 1)
		SELECT coalesce((SELECT id FROM newest), 0), (SELECT created_at FROM newest),
			(SELECT created_at FROM events WHERE id = $1),
			coalesce((SELECT through_id FROM events_pruned), 0)`, seen).Scan(&st.latest, &latestAt, &st.seenAt, &st.pruned)
	if err != nil {
		return busState{}, fmt.Errorf("events: newest event: %w", err)
	}
	if latestAt != nil {
		st.latestAt = *latestAt
	}
	return st, nil
}

func (b *Bus) dispatch(evs []Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dispatchLocked(evs)
}

func (b *Bus) dispatchLocked(evs []Event) {
	for _, ev := range evs {
		if ev.ID <= b.lastID {
			continue
		}
		b.lastID, b.lastAt = ev.ID, ev.CreatedAt
		for _, set := range [2]map[*Subscription]struct{}{b.byTopic[ev.Topic], b.all} {
			for s := range set {
				if s.closed {
					continue
				}
				if s.fn != nil {
					s.fn(ev)
					continue
				}
				if s.sampled != nil && slices.Contains(s.sampled, ev.Topic) {
					s.holdLocked(ev)
					continue
				}
				select {
				case s.c <- ev:
					s.lastSent = ev.ID
				default:
					s.dropped = true
					s.closeLocked() // deleting from the map being ranged over is allowed
					b.log.Warn("events: dropped a subscriber that fell behind", "topics", s.topics)
				}
			}
		}
	}
}

// holdLocked keeps ev among the newest keep held events of its topic: a burst on one
// sampled topic (the audit log's) must not push out another's newest event (the one
// that carries the approvals count).
func (s *Subscription) holdLocked(ev Event) {
	n, oldest := 0, -1
	for i := range s.held {
		if s.held[i].Topic == ev.Topic {
			if oldest < 0 {
				oldest = i
			}
			n++
		}
	}
	if n >= s.keep {
		s.held = slices.Delete(s.held, oldest, oldest+1)
	}
	s.held = append(s.held, ev)
	s.anyHeld.Store(true)
}

// Newest returns the newest limit events of topic after afterID, oldest first: what a
// socket that samples the topic is replayed of what it missed (one index scan).
func (b *Bus) Newest(ctx context.Context, afterID int64, topic string, limit int) ([]Event, error) {
	rows, err := b.pool.Query(ctx, `/* events.Newest */
		SELECT id, topic, kind, payload, created_at FROM events
		WHERE topic = $1 AND id > $2 ORDER BY id DESC LIMIT $3`, topic, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("events: newest of %s after %d: %w", topic, afterID, err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("events: newest of %s after %d: %w", topic, afterID, err)
	}
	slices.Reverse(evs)
	return evs, nil
}

func (b *Bus) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.closeLocked()
	}
}
