package web

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolwarden/toolwarden/services/events"
)

// sampler wakes the sockets that sample topics (wsSampleEvery) only when one of their
// sampled topics had an event: every socket re-armed a timer four times a second for
// as long as it was open, so a thousand idle dashboards woke four thousand times a
// second to find nothing held. One watch of the bus notes which sampled topics had an
// event and arms one timer for the whole hub, at the next multiple of wsSampleEvery
// (wall clock), so the sockets woken still flush at the same instants and share their
// batches (hub.batch).
type sampler struct {
	bus       *events.Bus
	watchOnce sync.Once

	mu sync.Mutex
	// byTopic holds the sets of sampled topics that sockets sample, by each of their
	// topics; sets holds them by key (sampleKey).
	byTopic map[string]map[*sampleSet]struct{}
	sets    map[string]*sampleSet
	pending map[string]struct{} // topics with an event since the last tick
	armed   bool                // a tick is due for pending

	// ticks counts the ticks that woke sockets (tests).
	ticks atomic.Int64
}

// sampleSet is the sockets that sample the same topics: they share one wake channel,
// closed (and replaced) by a tick after an event of one of the topics, so a socket
// waits on one channel whatever it samples.
type sampleSet struct {
	key    string
	topics []string
	refs   int
	wake   atomic.Pointer[chan struct{}]
}

// next is the channel the following tick for the set closes. A socket takes it before
// it takes what its subscription holds (Subscription.TakeSampled), so an event held
// after that closes this channel, or one it took later.
func (s *sampleSet) next() <-chan struct{} { return *s.wake.Load() }

func newSampler(bus *events.Bus) *sampler {
	return &sampler{bus: bus, byTopic: map[string]map[*sampleSet]struct{}{}, sets: map[string]*sampleSet{},
		pending: map[string]struct{}{}}
}

// sampleKey names a set of topics whatever their order.
func sampleKey(topics []string) string {
	t := slices.Clone(topics)
	slices.Sort(t)
	return strings.Join(slices.Compact(t), "\x00")
}

// join registers a socket sampling topics; leave undoes it. A socket joins before it
// subscribes, so that every event its subscription holds wakes it.
func (s *sampler) join(topics []string) *sampleSet {
	if s.bus != nil {
		// Watching every topic: which ones are sampled changes with the sockets, and the
		// watch only looks each event's topic up. Made outside s.mu, which the watch
		// takes with the bus locked.
		s.watchOnce.Do(func() { s.bus.Watch(s.saw) })
	}
	key := sampleKey(topics)
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sets[key]
	if set == nil {
		set = &sampleSet{key: key, topics: strings.Split(key, "\x00")}
		ch := make(chan struct{})
		set.wake.Store(&ch)
		s.sets[key] = set
		for _, t := range set.topics {
			m := s.byTopic[t]
			if m == nil {
				m = map[*sampleSet]struct{}{}
				s.byTopic[t] = m
			}
			m[set] = struct{}{}
		}
	}
	set.refs++
	return set
}

func (s *sampler) leave(set *sampleSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set.refs--; set.refs > 0 {
		return
	}
	delete(s.sets, set.key)
	for _, t := range set.topics {
		if m := s.byTopic[t]; m != nil {
			delete(m, set)
			if len(m) == 0 {
				delete(s.byTopic, t)
			}
		}
	}
}

// saw is the bus's watch: it runs with the bus locked, for every event, so it only
// notes a sampled topic's event and arms the tick once.
func (s *sampler) saw(ev events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byTopic[ev.Topic]) == 0 {
		return
	}
	s.pending[ev.Topic] = struct{}{}
	if !s.armed {
		s.armed = true
		now := time.Now()
		time.AfterFunc(now.Truncate(wsSampleEvery).Add(wsSampleEvery).Sub(now), s.tick)
	}
}

// tick wakes the sets that sample a topic which had an event since the last tick.
func (s *sampler) tick() {
	s.mu.Lock()
	topics := make([]string, 0, len(s.pending))
	for t := range s.pending {
		topics = append(topics, t)
	}
	clear(s.pending)
	s.armed = false
	s.mu.Unlock()
	// The watch saw these events while the bus delivered them, with its lock held, and
	// the subscriptions may not all hold them yet: taking the lock (any call that does)
	// waits for that delivery to end, so no socket wakes before its event is held and
	// then sleeps on with it. An event seen after the pending topics were taken above
	// arms the next tick.
	s.bus.Subscribers()
	s.ticks.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	woken := map[*sampleSet]bool{}
	for _, t := range topics {
		for set := range s.byTopic[t] {
			if woken[set] {
				continue
			}
			woken[set] = true
			ch := make(chan struct{})
			close(*set.wake.Swap(&ch))
		}
	}
}
