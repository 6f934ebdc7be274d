// Package replicas keeps the record of the `serve` processes sharing one database
// (docs/architecture.md, Several replicas): each replica has a row while it runs, seen
// again every few seconds; a row not seen for DeadAfter is a replica that died. Other
// parts ask it who is alive (a stopping replica leaves server statuses to the others)
// and where a replica is reached (a terminal's requests go to the replica running it).
package replicas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
)

// Defaults: how often a replica says it is alive, and how long without that makes it dead.
const (
	DefaultEvery     = 2 * time.Second
	DefaultDeadAfter = 6 * time.Second
)

// Replica is one serve process.
type Replica struct {
	ID   string `json:"id" db:"id"`
	Name string `json:"name" db:"name"`
	// Address is the base URL other replicas reach this one at (--advertise-url).
	Address   string    `json:"address" db:"address"`
	Host      string    `json:"host" db:"host"`
	PID       int       `json:"pid" db:"pid"`
	Version   string    `json:"version" db:"version"`
	StartedAt time.Time `json:"started_at" db:"started_at"`
	SeenAt    time.Time `json:"seen_at" db:"seen_at"`
	Self      bool      `json:"self" db:"self"`
	// Leaving: it began shutting down (Leave); it still finishes what it runs.
	Leaving bool `json:"leaving" db:"leaving"`
}

// Options tunes a Service; zero fields take the defaults.
type Options struct {
	// Name is what pages and logs call this replica; default host:pid.
	Name string
	// Address is where other replicas reach this one (a base URL), "" when unknown.
	Address   string
	Version   string
	Every     time.Duration
	DeadAfter time.Duration
	Logger    *slog.Logger
	// Clock is this host's clock; default time.Now (tests give a wrong one).
	Clock func() time.Time
	// Beats is the pool the heartbeats use, default the service's: a pool of their
	// own (db.SidePool), so that a beat never waits behind requests for a connection
	// and a live replica is not taken for dead while it is busy.
	Beats *pgxpool.Pool
}

// Service is this process's replica record.
type Service struct {
	pool *pgxpool.Pool
	opts Options
	self Replica
	log  *slog.Logger
	// offset is how far the database's clock is ahead of this host's, in nanoseconds,
	// as the last heartbeat measured it (Now).
	offset atomic.Int64
	warned atomic.Bool // the clock's offset was logged as too large
	// steadySince is when this replica's current run of heartbeats that reached the
	// database began (nil after one failed): Steady. Kept as Clock's times, with their
	// monotonic reading: a step of the host's clock (NTP, by hand) must not make the
	// run look long enough early, nor never.
	steadySince atomic.Pointer[time.Time]
	lastBeat    atomic.Pointer[time.Time] // when the last heartbeat that reached the database returned
	leaving     atomic.Bool               // Leave was called: a row written again says so too
}

// Steady reports whether this replica's heartbeats have reached the database without a
// miss for DeadAfter: only then may it take other replicas whose rows look old for
// stopped. After a database outage every row looks old, its own too; the others beat
// again within a beat of the database's return.
// A heartbeat that hangs (a connection to a host that died) counts as a miss once two
// beats' time has passed without one returning.
func (s *Service) Steady() bool {
	since, last, now := s.steadySince.Load(), s.lastBeat.Load(), s.opts.Clock()
	// Sub of two times that both carry a monotonic reading uses it, not the wall clock.
	return since != nil && last != nil && now.Sub(*since) >= s.opts.DeadAfter && now.Sub(*last) <= 2*s.opts.Every
}

// beaten records how the last heartbeat (or join) went, for Steady.
func (s *Service) beaten(err error) {
	if err != nil {
		s.steadySince.Store(nil)
		return
	}
	now := s.opts.Clock()
	s.lastBeat.Store(&now)
	s.steadySince.CompareAndSwap(nil, &now)
}

// ClockWarnAfter is how far this host's clock may be off the database's before the
// log says so.
const ClockWarnAfter = 5 * time.Second

// Now is the database's time as this replica's clock and the last heartbeat tell it:
// what replicas sign and check their hops with, so hosts whose clocks disagree (by more
// than replicahop.MaxSkew, even) still reach each other's terminals.
func (s *Service) Now() time.Time { return s.opts.Clock().Add(time.Duration(s.offset.Load())) }

// maxClockRoundTrip bounds the round trip of a clock reading that is kept: the reading
// is taken to be halfway, so a slower one could be off by more than half of this.
const maxClockRoundTrip = 500 * time.Millisecond

// readClock runs the statement sql (which returns clock_timestamp()) on a connection of
// its own, and keeps the database clock's offset when the round trip was short.
func (s *Service) readClock(ctx context.Context, sql string, args ...any) error {
	conn, err := s.opts.Beats.Acquire(ctx) // not timed: a wait for a connection is no clock's
	if err != nil {
		return err
	}
	defer conn.Release()
	var db time.Time
	before := s.opts.Clock()
	if err := conn.QueryRow(ctx, sql, args...).Scan(&db); err != nil {
		return err
	}
	after := s.opts.Clock()
	if rtt := after.Sub(before); rtt <= maxClockRoundTrip {
		s.measure(before, after, db)
	}
	return nil
}

// measure keeps the database clock's offset from the time db it read between this
// host's times before and after: the reading is taken to be halfway.
func (s *Service) measure(before, after, db time.Time) {
	off := db.Sub(before.Add(after.Sub(before) / 2))
	s.offset.Store(int64(off))
	switch {
	case off.Abs() > ClockWarnAfter:
		if !s.warned.Swap(true) {
			s.log.Warn("replicas: this host's clock is off the database's; hops between replicas use the database's time, but other hosts' logs and pages will disagree with this one's: set the clock (NTP)",
				"offset", off.Round(time.Millisecond).String())
		}
	case off.Abs() < ClockWarnAfter/2 && s.warned.Swap(false):
		// Below half the threshold only, so an offset near it does not flap.
		s.log.Info("replicas: this host's clock agrees with the database's again", "offset", off.Round(time.Millisecond).String())
	}
}

// New describes this process; nothing is written until Run.
func New(pool *pgxpool.Pool, opts Options) *Service {
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.DeadAfter <= 0 {
		opts.DeadAfter = DefaultDeadAfter
	}
	host, _ := os.Hostname()
	if opts.Name == "" {
		opts.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Beats == nil {
		opts.Beats = pool
	}
	return &Service{pool: pool, opts: opts, log: log, self: Replica{ID: uuid.NewString(), Name: opts.Name,
		Address: opts.Address, Host: host, PID: os.Getpid(), Version: opts.Version, Self: true}}
}

// Self is this replica.
func (s *Service) Self() Replica { return s.self }

// Name is this replica's name.
func (s *Service) Name() string { return s.self.Name }

// Every is how often this replica's row is refreshed; DeadAfter how long a replica may
// go unseen before it is taken for stopped (Options, defaults applied).
func (s *Service) Every() time.Duration { return s.opts.Every }

// DeadAfter: see Every.
func (s *Service) DeadAfter() time.Duration { return s.opts.DeadAfter }

// Join writes this replica's row; Run calls it, and then keeps it fresh.
func (s *Service) Join(ctx context.Context) error {
	if same, err := s.Get(ctx, s.self.Name); err == nil && same.ID != s.self.ID {
		s.log.Warn("replicas: another live replica has this name; give each its own --replica-name",
			"name", s.self.Name, "host", same.Host, "pid", same.PID)
	}
	return s.insert(ctx)
}

// insert writes this replica's row, on the heartbeats' pool: a heartbeat that finds
// its row gone (pruned after a long pause) writes it again without waiting behind
// requests, and without the name check Join made once.
func (s *Service) insert(ctx context.Context) error {
	err := s.readClock(ctx, `/* replicas.join */
		INSERT INTO replicas (id, name, address, host, pid, version, leaving_at)
		VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7 THEN now() END)
		RETURNING clock_timestamp()`,
		s.self.ID, s.self.Name, s.self.Address, s.self.Host, s.self.PID, s.self.Version, s.leaving.Load())
	if err != nil {
		return fmt.Errorf("replicas: join: %w", err)
	}
	return nil
}

// Run keeps this replica's row seen until ctx ends, then removes it. A join or beat
// that fails (the database restarting) is tried again at the next beat; a row removed
// meanwhile (pruned as dead after a long pause) is written again.
func (s *Service) Run(ctx context.Context) error {
	err := s.Join(ctx)
	s.beaten(err)
	if err != nil {
		s.log.Warn("replicas: join; trying again", "err", err)
	}
	t := time.NewTicker(s.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, err := s.pool.Exec(leave, `/* replicas.leave */ DELETE FROM replicas WHERE id = $1`, s.self.ID); err != nil {
				s.log.Warn("replicas: leave", "err", err)
			}
			return nil
		case <-t.C:
			// Bounded: a beat stuck on a dead connection must not hold the next ones.
			bctx, cancel := context.WithTimeout(ctx, s.opts.DeadAfter)
			err := s.beat(bctx)
			cancel()
			s.beaten(err)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("replicas: heartbeat", "err", err)
			}
		}
	}
}

// Leave marks this replica as shutting down, once: other replicas stop reaching it
// (Get, GetByID and Others leave it out; its listener is closing) while it still counts
// as alive (Alive, Live) until its row goes, so nobody takes over the executions it is
// still finishing. Bounded: a database that does not answer leaves the row as it was.
func (s *Service) Leave(ctx context.Context) {
	if s.leaving.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := s.opts.Beats.Exec(ctx, `/* replicas.leaving */ UPDATE replicas SET leaving_at = now() WHERE id = $1`, s.self.ID); err != nil {
		s.log.Warn("replicas: could not mark this replica as leaving; others may forward to it until its row goes", "err", err)
	}
}

func (s *Service) beat(ctx context.Context) error {
	err := s.readClock(ctx, `/* replicas.beat */ UPDATE replicas SET seen_at = now() WHERE id = $1
		RETURNING clock_timestamp()`, s.self.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.insert(ctx)
	}
	return err
}

// Live lists the replicas seen within DeadAfter, this one first, then by start.
func (s *Service) Live(ctx context.Context) ([]Replica, error) {
	rows, err := db.All[Replica](ctx, s.pool, "replicas: live", `/* replicas.live */
		SELECT id::text AS id, name, address, host, pid, version, started_at, seen_at, id = $1 AS self,
			leaving_at IS NOT NULL AS leaving
		FROM replicas WHERE seen_at > now() - make_interval(secs => $2)
		ORDER BY id = $1 DESC, started_at, name`, s.self.ID, s.opts.DeadAfter.Seconds())
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// Alive reports whether the replica with that id is alive (this one always is).
func (s *Service) Alive(ctx context.Context, id string) bool {
	if id == s.self.ID {
		return true
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `/* replicas.alive */
		SELECT EXISTS (SELECT 1 FROM replicas WHERE id::text = $1 AND seen_at > now() - make_interval(secs => $2))`,
		id, s.opts.DeadAfter.Seconds()).Scan(&ok)
	return err != nil || ok // unsure: alive, so nothing is declared dead on a failed query
}

// Others counts the live replicas other than this one that are not shutting down.
func (s *Service) Others(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `/* replicas.others */
		SELECT count(*) FROM replicas WHERE id <> $1 AND seen_at > now() - make_interval(secs => $2)
			AND leaving_at IS NULL`,
		s.self.ID, s.opts.DeadAfter.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("replicas: others: %w", err)
	}
	return n, nil
}

// Get returns the live replica called name, not shutting down.
func (s *Service) Get(ctx context.Context, name string) (Replica, error) {
	rows, err := db.All[Replica](ctx, s.pool, "replicas: get", `/* replicas.get */
		SELECT id::text AS id, name, address, host, pid, version, started_at, seen_at, id = $1 AS self, false AS leaving
		FROM replicas WHERE name = $2 AND seen_at > now() - make_interval(secs => $3) AND leaving_at IS NULL
		ORDER BY seen_at DESC LIMIT 1`, s.self.ID, name, s.opts.DeadAfter.Seconds())
	if err != nil {
		return Replica{}, err
	}
	if len(rows) == 0 {
		return Replica{}, ErrGone
	}
	return rows[0], nil
}

// GetByID returns the live replica with that id, not shutting down: ErrGone for one
// that is (its listener is closed, and its terminals and test runs end with it).
func (s *Service) GetByID(ctx context.Context, id string) (Replica, error) {
	rows, err := db.All[Replica](ctx, s.pool, "replicas: get by id", `/* replicas.get_by_id */
		SELECT id::text AS id, name, address, host, pid, version, started_at, seen_at, id = $1 AS self, false AS leaving
		FROM replicas WHERE id::text = $2 AND seen_at > now() - make_interval(secs => $3) AND leaving_at IS NULL`, s.self.ID, id, s.opts.DeadAfter.Seconds())
	if err != nil {
		return Replica{}, err
	}
	if len(rows) == 0 {
		return Replica{}, ErrGone
	}
	return rows[0], nil
}

// ErrGone: no live replica, not shutting down, has that name or id.
var ErrGone = errors.New("replicas: no such live replica")

// Prune removes rows of replicas dead for an hour (a killed replica cannot remove its own).
func (s *Service) Prune(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `/* replicas.prune */ DELETE FROM replicas WHERE seen_at < now() - interval '1 hour'`)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("replicas: prune: %w", err)
	}
	return nil
}
