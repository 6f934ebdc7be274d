// Package gctune sets Go's garbage collector for a gateway. A tool call allocates much
// more than it keeps (the MCP SDK's JSON decoder takes a fresh 32 KB buffer for every
// message it reads, both ways), so with the default GOGC=100 and a small live heap the
// collector runs hundreds of times a second and costs a third of the CPU under load.
// Toolwarden lets the heap grow to five times what is live (GOGC=400) and bounds that
// with a soft memory limit of three times the live heap plus what the runtime holds
// beside the heap (stacks, metadata), but never under 128 MiB: a small server stays
// small, a large one never collects more often than at GOGC=200.
// Once the process has been idle for a few seconds after a burst (a large discovery, a
// load of calls), the memory that burst left free is given back to the system, rather
// than kept at the heap size the burst reached.
// GOGC or GOMEMLIMIT in the environment leave the runtime as the operator set it.
package gctune

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	percent  = 400
	floor    = 128 << 20 // bytes
	headroom = 3         // the limit is this many times the live heap
	every    = time.Second
	// A second in which the process allocated less than idleAllocs is idle. After
	// idleFor idle seconds in a row, free heap memory of at least idleRetained is given
	// back: once per burst, and at most once every giveBackEvery, so a steady light
	// load does not make the collector run a full cycle every few seconds.
	idleAllocs    = 1 << 20
	idleFor       = 3
	idleRetained  = 16 << 20
	giveBackEvery = 30 * time.Second
)

var once sync.Once

// Start applies the settings for the rest of the process (once, however often it is
// called) unless getenv finds GOGC or GOMEMLIMIT, and reports whether it did.
func Start(getenv func(string) string) bool {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return false
	}
	once.Do(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(Limit(0, 0))
		go follow()
	})
	return true
}

// Limit is the soft memory limit for a live heap of live bytes when the runtime holds
// other bytes beside the heap's objects (goroutine stacks, its own metadata), which
// the limit counts too.
func Limit(live, other uint64) int64 {
	return int64(max(floor, headroom*live+other))
}

// follow moves the limit with the live heap, so the limit never makes the collector
// run more often than GOGC=200 would.
func follow() {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	var lastAllocs uint64
	g := giver{returned: true} // nothing to give back before a first burst
	for now := range time.Tick(every) {
		metrics.Read(samples)
		var v [7]uint64
		for i, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return // not this runtime's metrics: keep the last limit
			}
			v[i] = s.Value.Uint64()
		}
		heap := v[2] + v[3] + v[4] + v[5]
		debug.SetMemoryLimit(Limit(v[0], v[1]-min(heap, v[1])))
		release := g.tick(now, v[6]-lastAllocs, v[3]+v[4])
		lastAllocs = v[6]
		if release {
			debug.FreeOSMemory()
		}
	}
}

// giver decides, each second, whether to give free heap memory back to the system.
type giver struct {
	idle     int       // idle seconds in a row
	returned bool      // given back since the last busy second
	last     time.Time // when it last gave back
}

// tick is one second in which the process allocated allocated bytes and retained
// is the heap memory holding no objects and not given back yet; true: give it back now.
func (g *giver) tick(now time.Time, allocated, retained uint64) bool {
	if allocated >= idleAllocs {
		g.idle, g.returned = 0, false // busy: the memory is about to be used again
		return false
	}
	g.idle++
	if g.returned || g.idle < idleFor || retained < idleRetained || !g.last.IsZero() && now.Sub(g.last) < giveBackEvery {
		return false
	}
	g.returned, g.last = true, now
	return true
}
