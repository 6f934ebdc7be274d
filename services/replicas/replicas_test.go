package replicas

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/secrets"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Two replicas whose hosts' clocks are 45 s behind and 45 s ahead (90 s apart, three
// times replicahop.MaxSkew) agree on the database's time after a heartbeat, so a hop
// one signs is fresh to the other; signed and checked by the hosts' own clocks it would
// be refused as stale. Each logs that its clock is off, once.
func TestReplicasShareTheDatabasesTime(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	var logs testkit.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	behind := New(pool, Options{Name: "behind", Logger: log, Clock: func() time.Time { return time.Now().Add(-45 * time.Second) }})
	ahead := New(pool, Options{Name: "ahead", Logger: log, Clock: func() time.Time { return time.Now().Add(45 * time.Second) }})
	for _, r := range []*Service{behind, ahead} {
		if err := r.Join(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.beat(ctx); err != nil {
			t.Fatal(err)
		}
		if off := r.Now().Sub(time.Now()); off.Abs() > time.Second {
			t.Errorf("%s: Now is %s off the real time after a heartbeat", r.Name(), off)
		}
	}
	if n := strings.Count(logs.String(), "this host's clock is off the database's"); n != 2 {
		t.Errorf("the clock warning was logged %d times, want once per replica:\n%s", n, logs.String())
	}

	k, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secrets.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	send := func(at time.Time, clock func() time.Time) error {
		req, _ := http.NewRequest(http.MethodPost, "http://ahead.example/internal/v1/terminals/t1/op", nil)
		replicahop.SignRequest(kr, replicahop.Hop{From: behind.Name(), To: ahead.Self().ID}, req, []byte(`{}`), at)
		v := replicahop.NewVerifier(kr, ahead.Self().ID)
		v.Clock = clock
		_, ok, err := v.VerifyRequest(req)
		if err == nil && !ok {
			err = errors.New("no hop found")
		}
		return err
	}
	if err := send(behind.Now(), ahead.Now); err != nil {
		t.Errorf("a hop in the database's time: %v", err)
	}
	if err := send(behind.opts.Clock(), ahead.opts.Clock); !errors.Is(err, replicahop.ErrStale) {
		t.Errorf("a hop in the hosts' own times: %v, want it stale", err)
	}

	// A heartbeat that finds its row gone (pruned after a long pause) joins again, and
	// reads the clock on the way; a host whose clock is set right says so, once.
	if _, err := pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, behind.Self().ID); err != nil {
		t.Fatal(err)
	}
	behind.opts.Clock = time.Now
	if err := behind.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := behind.Get(ctx, "behind"); err != nil {
		t.Errorf("the heartbeat did not join again: %v", err)
	}
	if err := behind.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if off := behind.Now().Sub(time.Now()); off.Abs() > time.Second {
		t.Errorf("after the clock was set right, Now is %s off", off)
	}
	if n := strings.Count(logs.String(), "agrees with the database's again"); n != 1 {
		t.Errorf("the clock's recovery was logged %d times, want once:\n%s", n, logs.String())
	}
}

// A replica takes others for stopped only once its own heartbeats have reached the
// database for DeadAfter without a miss: just back from a database outage every row
// looks old, its own too. A heartbeat that hangs is a miss after two beats' time.
func TestSteadyAfterDeadAfterOfBeats(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := New(pool, Options{Name: "r", Every: 2 * time.Second, DeadAfter: 6 * time.Second, Clock: clock})
	beats := func(n int) {
		for range n {
			advance(2 * time.Second)
			s.beaten(s.beat(t.Context()))
		}
	}
	if s.Steady() {
		t.Fatal("steady before any heartbeat")
	}
	s.beaten(s.Join(t.Context()))
	beats(2)
	if s.Steady() {
		t.Fatal("steady after 4 s of heartbeats, want 6")
	}
	beats(1)
	if !s.Steady() {
		t.Fatal("not steady after 6 s of heartbeats")
	}
	advance(5 * time.Second) // the next beat hangs
	if s.Steady() {
		t.Fatal("steady 5 s after the last heartbeat returned")
	}
	s.beaten(s.beat(t.Context()))
	if !s.Steady() {
		t.Fatal("a late heartbeat that returned, none failed: want steady again")
	}
	s.beaten(errors.New("the database is restarting"))
	beats(1)
	if s.Steady() {
		t.Fatal("steady right after a missed heartbeat")
	}
	beats(3)
	if !s.Steady() {
		t.Fatal("not steady 6 s after the heartbeats came back")
	}
}

// A replica whose every request connection is taken still beats: its heartbeats have
// connections of their own, so it is not taken for dead while busy.
func TestBeatsWhileThePoolIsBusy(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	cfg := pool.Config()
	cfg.MaxConns = 2
	busy, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	side, err := db.SidePool(t.Context(), busy, "heartbeat", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	s := New(busy, Options{Name: "busy", Every: 50 * time.Millisecond, DeadAfter: 150 * time.Millisecond, Beats: side})
	if err := s.Join(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := busy.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := s.beat(ctx); err != nil {
		t.Fatalf("a heartbeat while every request connection is taken: %v", err)
	}
	// A row pruned meanwhile is written again on the heartbeats' pool too.
	if _, err := pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, s.Self().ID); err != nil {
		t.Fatal(err)
	}
	if err := s.beat(ctx); err != nil {
		t.Fatalf("a heartbeat that rejoins while every request connection is taken: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE id = $1`, s.Self().ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the row after the rejoin: %d, %v", n, err)
	}
}

// A leaving replica is left out of where others forward (Get, GetByID) and of Others,
// stays alive and listed (marked) until its row goes, and stays marked when a beat has
// to write its row again (pruned meanwhile).
func TestLeavingReplica(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	a, b := New(pool, Options{Name: "a"}), New(pool, Options{Name: "b"})
	for _, r := range []*Service{a, b} {
		if err := r.Join(ctx); err != nil {
			t.Fatal(err)
		}
	}
	bid := b.Self().ID
	check := func(when string) {
		t.Helper()
		if _, err := a.GetByID(ctx, bid); !errors.Is(err, ErrGone) {
			t.Errorf("%s: GetByID of a leaving replica: %v, want ErrGone", when, err)
		}
		if _, err := a.Get(ctx, "b"); !errors.Is(err, ErrGone) {
			t.Errorf("%s: Get of a leaving replica: %v, want ErrGone", when, err)
		}
		if n, err := a.Others(ctx); err != nil || n != 0 {
			t.Errorf("%s: Others counts %d (%v), want 0", when, n, err)
		}
		if !a.Alive(ctx, bid) {
			t.Errorf("%s: a leaving replica is taken for dead", when)
		}
		live, err := a.Live(ctx)
		if err != nil || len(live) != 2 || live[1].ID != bid || !live[1].Leaving || live[0].Leaving {
			t.Errorf("%s: Live = %+v, %v; want a, then b marked leaving", when, live, err)
		}
	}
	if _, err := a.GetByID(ctx, bid); err != nil {
		t.Fatalf("before leaving: %v", err)
	}
	b.Leave(ctx)
	check("leaving")
	if _, err := pool.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, bid); err != nil {
		t.Fatal(err)
	}
	if err := b.beat(ctx); err != nil {
		t.Fatal(err)
	}
	check("written again")
}
