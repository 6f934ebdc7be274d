package replicas

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// stepWall is at with its wall clock moved by d (whole seconds) and its monotonic
// reading kept: what a step of the host's clock (NTP, by hand) does to time.Now's
// readings from then on. The time package has no way to build one, so this moves the
// wall seconds in the value's representation (with a monotonic reading: seconds since
// 1885 in bits 30 to 62); it fails the test when that representation is not what it
// takes it for.
func stepWall(t *testing.T, at time.Time, d time.Duration) time.Time {
	t.Helper()
	type repr struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if unsafe.Sizeof(at) != unsafe.Sizeof(repr{}) || !strings.Contains(at.String(), " m=") {
		t.Fatalf("%v: not a time with a monotonic reading as this test knows it", at)
	}
	out := at
	(*repr)(unsafe.Pointer(&out)).wall = (*repr)(unsafe.Pointer(&at)).wall + uint64(int64(d/time.Second))<<30
	if out.Sub(at) != 0 || out.Round(0).Sub(at.Round(0)) != d {
		t.Fatalf("stepping the wall clock of %v by %s gave %v", at, d, out)
	}
	return out
}

// Steady measures the run of heartbeats on the monotonic clock: a step of the host's
// clock, forward or back, neither makes a replica steady before DeadAfter of
// heartbeats (it would then take live replicas for stopped) nor keeps it unsteady
// after.
func TestSteadyThroughClockSteps(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		var mu sync.Mutex
		base, elapsed, stepped := time.Now(), time.Duration(0), time.Duration(0)
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return stepWall(t, base.Add(elapsed), stepped)
		}
		s := New(pool, Options{Name: "r" + step.String(), Every: 2 * time.Second, DeadAfter: 6 * time.Second, Clock: clock})
		beat := func() {
			mu.Lock()
			elapsed += 2 * time.Second
			mu.Unlock()
			s.beaten(s.beat(t.Context()))
		}
		s.beaten(s.Join(t.Context()))
		beat()
		mu.Lock()
		stepped = step // the host's clock is set
		mu.Unlock()
		beat()
		if s.Steady() {
			t.Fatalf("clock stepped by %s: steady after 4 s of heartbeats, want 6", step)
		}
		beat()
		if !s.Steady() {
			t.Fatalf("clock stepped by %s: not steady after 6 s of heartbeats", step)
		}
	}
}
