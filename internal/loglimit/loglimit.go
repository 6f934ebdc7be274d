// Package loglimit bounds how many lines a source whose rate someone outside picks
// (a hostile server, an unauthenticated client) may write to the log, and counts
// those it left out so the next line logged says how many.
package loglimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Budget is a rate of lines, and how many were left out since the last one logged.
// It is safe for concurrent use.
type Budget struct {
	lim     *rate.Limiter
	mu      sync.Mutex
	dropped int
}

// New allows burst lines at once, then one every every.
func New(every time.Duration, burst int) *Budget {
	return &Budget{lim: rate.NewLimiter(rate.Every(every), burst)}
}

// Take reports whether a line may be logged now, with how many were left out before it.
func (b *Budget) Take() (ok bool, dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lim.Allow() {
		b.dropped++
		return false, 0
	}
	dropped, b.dropped = b.dropped, 0
	return true, dropped
}
