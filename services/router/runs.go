package router

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
)

// RunEnded is the event a run publishes on its call's Topic once its outcome is known
// (State reports it ended): after the call's own events, and also when the router
// refused the call and published none. A page following the topic can rely on it.
const RunEnded = events.RunEnded

// Runs holds calls started in the background for a page that follows them (the test
// panel): progress as it comes, then the result. A page follows a run over the
// websocket (Watch, while its socket subscribes to the run's topic) or, without one, by
// asking for it (Get). A run nobody follows is cancelled — the caller went away: one
// nobody watched or asked about for Abandon since it started or was last asked about,
// and one whose last watcher left Grace ago (a socket that reconnects within it keeps
// the run). A finished run is forgotten after Keep, or sooner when its owner has
// maxEndedPerOwner newer ones ended or the registry maxEnded in all: a page follows only
// its newest run, and a caller looping runs must not hold their results in memory.
type Runs struct {
	// Replica is the id of the replica that holds these runs (replicas.Service): a
	// request about a run that reaches another replica is forwarded here by it.
	Replica string

	r       *Router
	abandon time.Duration
	grace   time.Duration
	keep    time.Duration

	mu       sync.Mutex
	runs     map[string]*Run
	ended    []*Run // runs ended and still kept, oldest first
	perOwner int    // ended runs kept per owner (maxEndedPerOwner)
	total    int    // ended runs kept in all (maxEnded)
	budget   int    // bytes of ended runs' results kept in all (maxEndedBytes)
	bytes    int    // bytes of the results of the runs in ended
	closed   bool   // Close was called: runs end at once and are not kept
}

// The bounds on ended runs kept, and on the result text one keeps. maxEnded runs of
// maxRunText would be 4 GiB: the bytes kept in all are bounded too, the oldest ended
// runs going first past them (a page follows only its newest run).
const (
	maxEndedPerOwner = 8
	maxEnded         = 1000
	maxRunText       = 4 << 20
	maxEndedBytes    = 256 << 20
)

// NewRuns returns a run registry over r.
func NewRuns(r *Router) *Runs {
	return &Runs{r: r, abandon: 20 * time.Second, grace: 10 * time.Second, keep: 10 * time.Minute, runs: map[string]*Run{},
		perOwner: maxEndedPerOwner, total: maxEnded, budget: maxEndedBytes}
}

// SetGrace sets how long a run outlives its last watcher (default 10 s).
func (rs *Runs) SetGrace(d time.Duration) {
	rs.mu.Lock()
	rs.grace = d
	rs.mu.Unlock()
}

// Run is one background call.
type Run struct {
	ID      string
	ToolID  string
	Actor   audit.Actor // who started it: only they may follow or cancel it (Owner)
	Role    auth.Role   // the caller's role when it started
	Topic   string      // the call's own topic, if it has one
	Replica string      // the replica that runs it (Runs.Replica)
	Started time.Time

	cancel context.CancelFunc
	done   chan struct{}

	size int // its result's bytes (resultSize), once ended

	mu       sync.Mutex
	progress []Progress
	result   *Result
	err      error
	ended    time.Time
	watchers int
	idle     *time.Timer // cancels the run when it fires
	// forgetter forgets the ended run once kept long enough (Runs.keep); stopped when
	// the run is dropped sooner, so it no longer holds the run and its result.
	forgetter *time.Timer
}

// maxRunProgress is how many progress notifications a run keeps for its page.
const maxRunProgress = 200

// Start runs c in the background and returns at once.
func (rs *Runs) Start(c Call, toolID string) *Run {
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &Run{ID: c.ID, ToolID: toolID, Actor: c.Actor, Role: c.Role, Topic: c.Topic, Replica: rs.Replica, Started: time.Now(),
		cancel: cancel, done: make(chan struct{})}
	rs.mu.Lock()
	run.idle = time.AfterFunc(rs.abandon, cancel)
	if rs.closed {
		cancel() // the App stopped: the call is refused as cancelled
	} else {
		rs.runs[run.ID] = run
	}
	rs.mu.Unlock()
	prev := c.Progress
	c.Progress = func(p Progress) {
		run.mu.Lock()
		if len(run.progress) == maxRunProgress { // the newest are kept
			run.progress = append(run.progress[:0], run.progress[1:]...)
		}
		run.progress = append(run.progress, p)
		run.mu.Unlock()
		if prev != nil {
			prev(p)
		}
	}
	go func() {
		res, err := rs.r.Call(ctx, c)
		res = clipResult(res, maxRunText)
		run.size = resultSize(res)
		run.mu.Lock()
		run.result, run.err, run.ended = res, err, time.Now()
		run.idle.Stop()
		run.mu.Unlock()
		cancel()
		if c.Topic != "" {
			// Queued behind the call's own events, so it is written after them.
			_ = rs.r.rec.submit(context.Background(), &job{drafts: []events.Draft{RunEnded.Draft(c.Topic,
				events.RunRef{CallID: run.ID, ToolID: toolID})}}, false)
		}
		// Before done: whoever waited for the run finds the older ones already dropped.
		rs.mu.Lock()
		if rs.closed {
			rs.drop(run) // nobody will ask for it: no timer keeps it
		} else {
			rs.ended = append(rs.ended, run)
			rs.bytes += run.size
			run.forgetter = time.AfterFunc(rs.keep, func() { rs.mu.Lock(); rs.forget(run); rs.mu.Unlock() })
			rs.trim(run.Owner())
		}
		rs.mu.Unlock()
		close(run.done)
	}()
	return run
}

// Close cancels the runs still going, waits (up to closeWait) for them to end, and
// forgets every run, stopping their timers: an ended run's timer held it, result and
// all, for ten minutes, and a running one's idle timer the router with its pool, after
// the App stopped. A run started after Close is cancelled at once and not kept. The
// App calls it once the router stopped, so the calls the router let finish have their
// results recorded first.
func (rs *Runs) Close() {
	rs.mu.Lock()
	rs.closed = true
	running := make([]*Run, 0, len(rs.runs))
	for _, run := range rs.runs {
		running = append(running, run)
	}
	rs.mu.Unlock()
	for _, run := range running {
		run.cancel()
		run.mu.Lock()
		run.idle.Stop()
		run.mu.Unlock()
	}
	expired := make(chan struct{})
	t := time.AfterFunc(closeWait, func() { close(expired) })
	defer t.Stop()
	for _, run := range running {
		select {
		case <-run.done:
		case <-expired:
			// Its call does not end on cancel; what it ends with is dropped (Start).
		}
	}
	rs.mu.Lock()
	for _, run := range rs.runs {
		rs.drop(run)
	}
	clear(rs.runs)
	clear(rs.ended)
	rs.ended, rs.bytes = nil, 0
	rs.mu.Unlock()
}

// closeWait bounds how long Close waits for the runs it cancelled to end.
const closeWait = 5 * time.Second

// trim drops owner's oldest ended runs beyond perOwner, then the oldest ended runs
// beyond total or past the byte budget; runs still going are kept. rs.mu is held.
func (rs *Runs) trim(owner string) {
	n := 0
	for _, run := range rs.ended {
		if run.Owner() == owner {
			n++
		}
	}
	kept := rs.ended[:0]
	for _, run := range rs.ended {
		if n > rs.perOwner && run.Owner() == owner {
			n--
			rs.drop(run)
			rs.bytes -= run.size
			continue
		}
		kept = append(kept, run)
	}
	clear(rs.ended[len(kept):])
	rs.ended = kept
	for len(rs.ended) > rs.total || len(rs.ended) > 1 && rs.bytes > rs.budget {
		rs.drop(rs.ended[0])
		rs.bytes -= rs.ended[0].size
		rs.ended[0] = nil
		rs.ended = rs.ended[1:]
	}
}

// forget drops an ended run (its keep is over). rs.mu is held.
func (rs *Runs) forget(run *Run) {
	rs.drop(run)
	if i := slices.Index(rs.ended, run); i >= 0 {
		rs.ended = slices.Delete(rs.ended, i, i+1)
		rs.bytes -= run.size
	}
}

// resultSize is the bytes res holds, as clipResult counts them.
func resultSize(res *Result) int {
	if res == nil {
		return 0
	}
	size := len(res.StructuredContent)
	for _, c := range res.Content {
		size += contentSize(c)
	}
	return size
}

// drop removes run from the registry, not from rs.ended. rs.mu is held.
func (rs *Runs) drop(run *Run) {
	if rs.runs[run.ID] == run {
		delete(rs.runs, run.ID)
	}
	if run.forgetter != nil {
		// Its timer held it, result and all, for the rest of its keep: a caller looping
		// runs kept every result of the last rs.keep in memory, whatever trim dropped.
		run.forgetter.Stop()
	}
}

// clipResult is res keeping at most limit bytes of its content and structured content
// (a test panel run's result stays in memory a while, and the router lets results up
// to the message cap through). A last text item says what was cut or left out.
func clipResult(res *Result, limit int) *Result {
	if res == nil {
		return nil
	}
	size := resultSize(res)
	if size <= limit {
		return res
	}
	note := Content{Type: "text", Text: fmt.Sprintf("… (output shortened: the test panel keeps the first %d MiB of a result, "+
		"and this one has %.1f MiB; call the tool with arguments that ask for less to see all of it)", limit>>20, float64(size)/(1<<20))}
	out := *res
	out.Content = make([]Content, 0, len(res.Content)+1)
	left := max(0, limit-len(note.Text))
	for _, c := range res.Content {
		switch n := contentSize(c); {
		case n <= left:
			left -= n
		case left == 0:
			continue
		case c.Type == "text":
			// A copy: the cut shares the whole text's memory, which it is here to let go.
			c.Text, left = strings.Clone(textcheck.Clip(c.Text, left, "")), 0
		case c.Type == "resource" && c.Resource != nil && c.Resource.Blob == "":
			r := *c.Resource
			r.Text = strings.Clone(textcheck.Clip(r.Text, max(0, left-len(r.URI)-len(r.MIMEType)), ""))
			c.Resource, left = &r, 0
		default:
			continue // binary content cannot be cut: left out
		}
		out.Content = append(out.Content, c)
	}
	if len(out.StructuredContent) > left {
		out.StructuredContent = nil
	}
	out.Content = append(out.Content, note)
	return &out
}

// contentSize is about how many bytes c holds.
func contentSize(c Content) int {
	n := len(c.Text) + len(c.Data) + len(c.URI) + len(c.Name) + len(c.Title) + len(c.Description) + len(c.MIMEType)
	if c.Resource != nil {
		n += len(c.Resource.URI) + len(c.Resource.MIMEType) + len(c.Resource.Text) + len(c.Resource.Blob)
	}
	return n
}

// Lookup returns run id, whoever started it.
func (rs *Runs) Lookup(id string) (*Run, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	run, ok := rs.runs[id]
	return run, ok
}

// Get returns run id if owner started it. Asking counts as the caller still being
// there while nobody watches the run.
func (rs *Runs) Get(id, owner string) (*Run, bool) {
	run, ok := rs.Lookup(id)
	if !ok || run.Owner() != owner {
		return nil, false
	}
	rs.mu.Lock()
	abandon := rs.abandon
	rs.mu.Unlock()
	run.mu.Lock()
	if run.ended.IsZero() && run.watchers == 0 {
		run.idle.Reset(abandon)
	}
	run.mu.Unlock()
	return run, true
}

// Watch counts a watcher of run id (a page's websocket following its topic) until the
// returned function is called. While a run is watched it is not abandoned; once its
// last watcher leaves, it is cancelled after the grace period unless one comes back.
// An unknown run: nothing to watch.
func (rs *Runs) Watch(id string) (unwatch func()) {
	run, ok := rs.Lookup(id)
	if !ok {
		return func() {}
	}
	run.mu.Lock()
	run.watchers++
	run.idle.Stop()
	run.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			rs.mu.Lock()
			grace := rs.grace
			rs.mu.Unlock()
			run.mu.Lock()
			run.watchers--
			if run.watchers == 0 && run.ended.IsZero() {
				run.idle.Reset(grace)
			}
			run.mu.Unlock()
		})
	}
}

// OwnerOf is the owner key of a caller, for Get.
func OwnerOf(c Call) string { return userKey(c.Actor) }

// Owner is the run's actor as OwnerOf names callers.
func (run *Run) Owner() string { return userKey(run.Actor) }

// Wait waits up to d for the run to end and reports whether it has.
func (run *Run) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-run.done:
		return true
	case <-t.C:
		return false
	}
}

// Done is closed once the run ended.
func (run *Run) Done() <-chan struct{} { return run.done }

// Cancel stops the run (the server is told with notifications/cancelled).
func (run *Run) Cancel() { run.cancel() }

// State returns what is known so far: progress, and the result or error once ended.
func (run *Run) State() (progress []Progress, res *Result, err error, ended bool) {
	run.mu.Lock()
	defer run.mu.Unlock()
	return append([]Progress(nil), run.progress...), run.result, run.err, !run.ended.IsZero()
}
