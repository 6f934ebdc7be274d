package router

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Runs holds calls started in the background for a page that follows them by polling
// (the test panel): progress as it comes, then the result. A run nobody asks about for
// Abandon is cancelled — the caller went away — and a finished one is forgotten after Keep.
type Runs struct {
	r       *Router
	abandon time.Duration
	keep    time.Duration

	mu   sync.Mutex
	runs map[string]*Run
}

// NewRuns returns a run registry over r.
func NewRuns(r *Router) *Runs {
	return &Runs{r: r, abandon: 20 * time.Second, keep: 10 * time.Minute, runs: map[string]*Run{}}
}

// Run is one background call.
type Run struct {
	ID      string
	ToolID  string
	Owner   string // the actor's user id or name: only they may follow or cancel it
	Started time.Time

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	progress []Progress
	result   *Result
	err      error
	ended    time.Time
	idle     *time.Timer
}

// Start runs c in the background and returns at once.
func (rs *Runs) Start(c Call, toolID string) *Run {
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &Run{ID: c.ID, ToolID: toolID, Owner: userKey(c.Actor), Started: time.Now(), cancel: cancel, done: make(chan struct{})}
	run.idle = time.AfterFunc(rs.abandon, cancel)
	prev := c.Progress
	c.Progress = func(p Progress) {
		run.mu.Lock()
		run.progress = append(run.progress, p)
		run.mu.Unlock()
		if prev != nil {
			prev(p)
		}
	}
	rs.mu.Lock()
	rs.runs[run.ID] = run
	rs.mu.Unlock()
	go func() {
		res, err := rs.r.Call(ctx, c)
		run.mu.Lock()
		run.result, run.err, run.ended = res, err, time.Now()
		run.idle.Stop()
		run.mu.Unlock()
		cancel()
		close(run.done)
		time.AfterFunc(rs.keep, func() { rs.mu.Lock(); delete(rs.runs, run.ID); rs.mu.Unlock() })
	}()
	return run
}

// Get returns run id if owner started it, and counts as the caller still being there.
func (rs *Runs) Get(id, owner string) (*Run, bool) {
	rs.mu.Lock()
	run, ok := rs.runs[id]
	rs.mu.Unlock()
	if !ok || run.Owner != owner {
		return nil, false
	}
	run.mu.Lock()
	if run.ended.IsZero() {
		run.idle.Reset(rs.abandon)
	}
	run.mu.Unlock()
	return run, true
}

// OwnerOf is the owner key of a caller, for Get.
func OwnerOf(c Call) string { return userKey(c.Actor) }

// Wait waits up to d for the run to end and reports whether it has.
func (run *Run) Wait(d time.Duration) bool {
	select {
	case <-run.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Cancel stops the run (the server is told with notifications/cancelled).
func (run *Run) Cancel() { run.cancel() }

// State returns what is known so far: progress, and the result or error once ended.
func (run *Run) State() (progress []Progress, res *Result, err error, ended bool) {
	run.mu.Lock()
	defer run.mu.Unlock()
	return append([]Progress(nil), run.progress...), run.result, run.err, !run.ended.IsZero()
}
