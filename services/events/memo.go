package events

import (
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sync/singleflight"
)

// Memo keeps one value read from the database (the tool list's facets, the assistant's
// catalogue) between the events that change it. It watches the bus, so it is cleared
// before the author of a change hears it committed (events.Local), and another
// replica's change clears it with its NOTIFY. A load that began before a clear is not
// kept (a generation), and callers that find nothing kept share one load. With no bus,
// or before the bus first listens (what committed earlier it never delivers), nothing
// is kept and each call loads. The bus starting over (Reset) clears it too.
type Memo[T any] struct {
	ready <-chan struct{} // the bus's Ready; nil: no bus, nothing kept

	mu    sync.Mutex
	gen   uint64
	v     T
	ok    bool
	loads singleflight.Group // by generation
}

// Watch makes m keep values, cleared by every event of topics whose kind is not one of
// ignore, and by a Reset. Call it before m is used.
func (m *Memo[T]) Watch(bus *Bus, topics []string, ignore ...string) {
	if bus == nil {
		return
	}
	m.ready = bus.Ready()
	bus.Watch(func(ev Event) {
		if ev.Kind != Reset && slices.Contains(ignore, ev.Kind) {
			return
		}
		var zero T
		m.mu.Lock()
		m.gen++
		m.v, m.ok = zero, false
		m.mu.Unlock()
	}, topics...)
}

// Kept returns the kept value, if there is one.
func (m *Memo[T]) Kept() (T, bool) {
	v, _, ok, _ := m.get()
	return v, ok
}

// Get returns the kept value, or the value load returns (kept, unless an event came
// meanwhile). A load may serve several callers: give it a context no one caller's
// cancellation ends.
func (m *Memo[T]) Get(load func() (T, error)) (T, error) {
	v, gen, ok, keep := m.get()
	switch {
	case ok:
		return v, nil
	case !keep:
		return load()
	}
	got, err, _ := m.loads.Do(strconv.FormatUint(gen, 10), func() (any, error) {
		v, err := load()
		if err == nil {
			m.mu.Lock()
			if m.gen == gen {
				m.v, m.ok = v, true
			}
			m.mu.Unlock()
		}
		return v, err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return got.(T), nil
}

// get returns the kept value (ok), or the generation a load must quote to keep its own;
// keep is false when no load may be kept.
func (m *Memo[T]) get() (v T, gen uint64, ok, keep bool) {
	if m.ready == nil {
		return v, 0, false, false
	}
	select {
	case <-m.ready:
	default:
		return v, 0, false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v, m.gen, m.ok, true
}
