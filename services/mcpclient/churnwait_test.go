package mcpclient

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// churnConn is a conn with only what the churn count reads: the default settings (ten
// runs in a row, then 5 s doubling) and a debounce that never fires within a test.
func churnConn(t *testing.T) *conn {
	t.Helper()
	c := &conn{m: &Manager{opts: Options{ChurnRuns: 10, ChurnWait: 5 * time.Second, Debounce: time.Hour},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}, ctx: context.Background(), discovering: make(chan struct{}, 1)}
	t.Cleanup(c.cancelDebounce)
	return c
}

// elapse moves the end of the last run back by d: as if d passed since it.
func elapse(c *conn, d time.Duration) {
	c.debounceMu.Lock()
	c.churnEnd = c.churnEnd.Add(-d)
	c.debounceMu.Unlock()
}

// A server that changes its tools and announces it after every run has each run wait
// longer, doubling up to churnMax, for as long as it goes on: the wait it was made to
// sit out is not the server pausing. Only a real pause (churnGap past the wait) starts
// the count again.
func TestChurnWaitKeepsDoubling(t *testing.T) {
	c := churnConn(t)
	const runTime = 500 * time.Millisecond // the debounce delay and the run
	var waits []time.Duration
	for range 20 {
		c.churned(true)
		// The list_changed comes as the run ends; the next run starts after the wait.
		c.debounceMu.Lock()
		w := c.churnWait()
		c.debounceMu.Unlock()
		waits = append(waits, w.Round(time.Second))
		elapse(c, w+runTime)
	}
	var want []time.Duration
	for _, s := range []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 10, 20, 40, 80, 160, 300, 300, 300, 300, 300} {
		want = append(want, s*time.Second)
	}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits after each run of a server changing its tools without pause: %v, want %v", waits, want)
	}

	// Quiet for less than churnGap past the wait: still counted.
	c.churned(true)
	elapse(c, churnMax+churnGap-time.Second)
	c.churned(true)
	if c.churn != 22 {
		t.Fatalf("after a pause shorter than the wait and churnGap the count is %d, want 22", c.churn)
	}
	// Quiet for longer: the count starts again.
	elapse(c, churnMax+churnGap+time.Second)
	c.churned(true)
	if c.churn != 1 {
		t.Fatalf("after a pause past the wait and churnGap the count is %d, want 1", c.churn)
	}
}

// A list_changed that arrives while a discovery runs is run after it, with the wait the
// finished run's count calls for, rather than on a timer of its own started from the
// previous run's end (no wait at all, once that wait has passed).
func TestListChangedDuringRunWaits(t *testing.T) {
	c := churnConn(t)
	for range 12 {
		c.churned(true)
	}
	elapse(c, 21*time.Second)   // the 20 s wait before the run now going on has passed
	c.discovering <- struct{}{} // a discovery runs
	c.requestDiscovery("list_changed")
	c.debounceMu.Lock()
	pending := c.debounce != nil
	c.debounceMu.Unlock()
	if pending || !c.rediscover.Load() {
		t.Fatalf("a list_changed during a run: timer started %v, run again after it %v; want it run after the one going on",
			pending, c.rediscover.Load())
	}
	c.churned(true) // the run ends, having changed something
	c.discoveryDone()
	c.debounceMu.Lock()
	defer c.debounceMu.Unlock()
	if c.debounce == nil || !c.churnHeld || c.rediscover.Load() {
		t.Fatalf("after the run: pending %v, held for the wait %v; want the next run scheduled after the wait",
			c.debounce != nil, c.churnHeld)
	}
}
