// Package gctune sets Go's garbage collector for a gateway. A tool call allocates much
// more than it keeps (the MCP SDK's JSON decoder takes a fresh 32 KB buffer for every
// message it reads, both ways), so with the default GOGC=100 and a small live heap the
// collector runs hundreds of times a second and costs a third of the CPU under load.
// Toolwarden lets the heap grow to five times what is live (GOGC=400) and bounds that
// with a soft memory limit of three times the live heap, but never under 128 MiB: a
// small server stays small, a large one never collects more often than at GOGC=200.
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
		debug.SetMemoryLimit(Limit(0))
		go follow()
	})
	return true
}

// Limit is the soft memory limit for a live heap of live bytes.
func Limit(live uint64) int64 {
	return int64(max(floor, headroom*live))
}

// follow moves the limit with the live heap, so the limit never makes the collector
// run all the time once more than a third of it is live.
func follow() {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for range time.Tick(every) {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(Limit(sample[0].Value.Uint64()))
		}
	}
}
