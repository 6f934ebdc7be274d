package mcpclient

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/toolwarden/toolwarden/services/registry"
)

// abandonAfter is how long a background test runs without anyone asking how it goes:
// the page that started it polls every half second, so a longer silence means it was
// closed, and the attempt (a server process, say) is stopped.
const abandonAfter = 3 * time.Second

// TestRun is a "Test connection" attempt running in the background, so the page can
// show its progress and offer to cancel it.
type TestRun struct {
	ID      string
	Owner   string // who started it: only they may see or cancel it
	Replica string // the replica that runs it (Options.Replica)
	Started time.Time

	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	step   string
	seen   time.Time // the last time someone asked (Progress)
	result TestResult
}

// TestProgress is a TestRun's state.
type TestProgress struct {
	Step    string        // what it is doing now
	Elapsed time.Duration // since it started
	Limit   time.Duration // when it gives up
	Done    bool
	Result  TestResult // once Done
}

type testRuns struct {
	mu   sync.Mutex
	runs map[string]*TestRun
}

// StartTest starts a connection test of cfg in the background for owner and returns
// it at once; Progress follows it and Cancel stops it. A run nobody asks about for
// a few seconds is cancelled, and a finished run is forgotten a minute later.
func (m *Manager) StartTest(cfg registry.Connection, owner string) *TestRun {
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	r := &TestRun{ID: rand.Text(), Owner: owner, Replica: m.opts.Replica, Started: now, cancel: cancel, done: make(chan struct{}), seen: now, step: "waiting to start"}
	m.tests.mu.Lock()
	if m.tests.runs == nil {
		m.tests.runs = map[string]*TestRun{}
	}
	m.tests.runs[r.ID] = r
	m.tests.mu.Unlock()
	go func() {
		defer cancel()
		stop := make(chan struct{})
		go r.watch(stop)
		res := m.test(ctx, cfg, func(s string) {
			r.mu.Lock()
			r.step = s
			r.mu.Unlock()
		})
		close(stop)
		r.mu.Lock()
		r.result, r.step = res, "done"
		r.mu.Unlock()
		close(r.done)
		time.AfterFunc(time.Minute, func() {
			m.tests.mu.Lock()
			delete(m.tests.runs, r.ID)
			m.tests.mu.Unlock()
		})
	}()
	return r
}

// watch cancels the run once nobody asked about it for abandonAfter.
func (r *TestRun) watch(stop <-chan struct{}) {
	t := time.NewTicker(abandonAfter / 4)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.mu.Lock()
			idle := time.Since(r.seen)
			r.mu.Unlock()
			if idle > abandonAfter {
				r.cancel()
				return
			}
		}
	}
}

// TestRunOf returns the test run id started by owner (false when there is none).
func (m *Manager) TestRunOf(id, owner string) (*TestRun, bool) {
	m.tests.mu.Lock()
	defer m.tests.mu.Unlock()
	r, ok := m.tests.runs[id]
	if !ok || r.Owner != owner {
		return nil, false
	}
	return r, true
}

// Progress says how the run goes (and counts as someone watching it).
func (r *TestRun) Progress(limit time.Duration) TestProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = time.Now()
	p := TestProgress{Step: r.step, Elapsed: time.Since(r.Started), Limit: limit}
	select {
	case <-r.done:
		p.Done, p.Result = true, r.result
	default:
	}
	return p
}

// Cancel stops the run; its result says it was cancelled.
func (r *TestRun) Cancel() { r.cancel() }

// Wait returns the run's result once it ended, or ctx's error.
func (r *TestRun) Wait(ctx context.Context) (TestResult, error) {
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.result, nil
	case <-ctx.Done():
		return TestResult{}, ctx.Err()
	}
}

// TestTimeout is the bound of a connection test (Options.TestTimeout).
func (m *Manager) TestTimeout() time.Duration { return m.opts.TestTimeout }

// Replica is the id of this manager's replica (Options.Replica).
func (m *Manager) Replica() string { return m.opts.Replica }
