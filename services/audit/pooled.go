package audit

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"
)

// DefaultQuiet is PooledOptions.Quiet's default.
const DefaultQuiet = 30 * time.Second

// PooledOptions tune a PooledLimiter.
type PooledOptions struct {
	// Quiet is how long entries the limiter pooled stay uncounted, no entry let through
	// counting them, before WritePooled's entry does (default DefaultQuiet).
	Quiet time.Duration
	// WritePooled appends one entry whose withheld_before is n: pooled entries no entry
	// let through counted (a flood that stopped, a shutdown). Required.
	WritePooled func(ctx context.Context, n int) error
	// WriteForgotten appends one entry counting n entries that keys the limiter forgot
	// had held back (Limiter.Forgotten); nil when no key holds any (every key shared).
	WriteForgotten func(ctx context.Context, n int) error
	// WriteHeld appends, in one transaction, an entry per unshared key counting what it
	// held back, when no later entry of that key's did (a caller who stopped, a
	// shutdown); nil when every key is shared.
	WriteHeld func(ctx context.Context, held []Held) error
}

// PooledLimiter is a Pooled Limiter whose counts are not left to the next entry let
// through alone: after a quiet interval in which no entry took one, or at Close, an
// entry of its own counts it (the pooled count, the forgotten one, each unshared key's),
// so a flood that stops, or a process that stops, loses no count. A count whose entry
// fails is given back and tried again.
type PooledLimiter struct {
	lim *Limiter
	o   PooledOptions

	flushMu sync.Mutex  // one flush at a time: the quiet timer's or Close's
	mu      sync.Mutex  // guards timer, seen and closed
	timer   *time.Timer // the quiet timer, nil when not armed
	seen    uint64      // the limiter's drains when the timer was armed
	epoch   uint64      // the limiter's epoch the timer was armed in
	closed  bool
}

// NewPooledLimiter wraps lim, whose LimitOptions.Pooled must be set.
func NewPooledLimiter(lim *Limiter, o PooledOptions) *PooledLimiter {
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	return &PooledLimiter{lim: lim, o: o}
}

// Take is Limiter.take; a shared entry it pools arms the quiet timer, so that should no
// entry let through count it, the quiet flush does. A withheld count it returns whose
// entry is then not written must be given back (GiveBack).
func (p *PooledLimiter) Take(key string, shared bool) (ok bool, withheld int) {
	return p.take(key, shared, Actor{})
}

// take is Take keeping who for WriteHeld; an unshared entry it holds back arms the
// quiet timer too when WriteHeld is set.
func (p *PooledLimiter) take(key string, shared bool, who Actor) (ok bool, withheld int) {
	ok, withheld = p.lim.take(key, shared, who)
	if !ok && (shared || p.o.WriteHeld != nil) {
		p.Arm()
	}
	return ok, withheld
}

// GiveBack gives back n, the withheld count Take(key, shared) returned for an entry that
// could not be written (its transaction rolled back): the next entry let through counts
// them, or should none come, the quiet flush.
func (p *PooledLimiter) GiveBack(key string, shared bool, n int) {
	if n <= 0 {
		return
	}
	if p.lim.giveBack(key, shared, n) || p.o.WriteHeld != nil {
		p.Arm()
	}
}

// Arm starts the quiet timer unless it is running or Close was called: one timer for
// all keys, so a flood costs no more than one.
func (p *PooledLimiter) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil || p.closed {
		return
	}
	p.epoch, p.seen = p.lim.armed()
	p.timer = time.AfterFunc(p.o.Quiet, p.flushQuiet)
}

// flushQuiet writes the pooled count unless an entry let through took one since the
// timer was armed (a flood still going on is counted by its own entries), the
// forgotten count an earlier write failed to write, and the counts of unshared keys
// none of whose entries was held back since the timer was armed. What is left (a
// failed write, entries held back since) arms the timer again.
func (p *PooledLimiter) flushQuiet() {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	p.timer = nil
	seen, epoch, closed := p.seen, p.epoch, p.closed
	p.mu.Unlock()
	if closed {
		return // Close flushes
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.flush(ctx, &seen, epoch); err != nil {
		p.lim.o.Logger.Warn("audit: the count of "+p.lim.o.What+" held back could not be written; trying again", "err", err)
	}
	held, forgotten, keyHeld := p.lim.pending()
	if held > 0 || (forgotten > 0 && p.o.WriteForgotten != nil) || (keyHeld > 0 && p.o.WriteHeld != nil) {
		p.Arm()
	}
}

// flush writes the pooled count (with since, only if no entry took one since; see
// takePooled), the forgotten one, and the unshared keys' counts of epochs before
// `before` (see takeHeld); a count whose entry fails is given back.
func (p *PooledLimiter) flush(ctx context.Context, since *uint64, before uint64) error {
	var errs error
	if n := p.lim.takePooled(since); n > 0 {
		if err := p.o.WritePooled(ctx, n); err != nil {
			p.lim.giveBack("", true, n)
			errs = err
		}
	}
	errs = errors.Join(errs, p.writeForgotten(ctx))
	if p.o.WriteHeld == nil {
		return errs
	}
	if held := p.lim.takeHeld(before); len(held) > 0 {
		if err := p.o.WriteHeld(ctx, held); err != nil {
			for _, h := range held {
				p.lim.giveBack(h.Key, false, h.N)
			}
			errs = errors.Join(errs, err)
		}
	}
	return errs
}

// writeForgotten writes the count of entries that keys the limiter forgot had held back
// (WriteForgotten), giving it back when that fails.
func (p *PooledLimiter) writeForgotten(ctx context.Context) error {
	if p.o.WriteForgotten == nil {
		return nil
	}
	n := p.lim.Forgotten()
	if n == 0 {
		return nil
	}
	if err := p.o.WriteForgotten(ctx, n); err != nil {
		p.lim.unforget(n)
		return err
	}
	return nil
}

// Close stops the quiet timer and writes what the limiter holds back that no entry has
// counted yet, which would otherwise go with the process; call it on shutdown, once no
// more entries are taken. It may be called more than once. A Take after it still works,
// but only an entry let through counts what it pools.
func (p *PooledLimiter) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop() // one already fired waits on flushMu, then sees closed
		p.timer = nil
	}
	p.mu.Unlock()
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	return p.flush(ctx, nil, math.MaxUint64)
}
