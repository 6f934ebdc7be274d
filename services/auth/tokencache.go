package auth

import (
	"sync"
	"time"

	"github.com/toolwarden/toolwarden/services/events"
)

// tokenTTL bounds how long an authenticated token is answered from memory. Changes
// made in this process clear the cache as they commit and other replicas' arrive as
// events (Follow), so this only matters when events are lost.
const tokenTTL = 30 * time.Second

// tokenCache remembers authenticated API tokens by hash, so an agent's calls are not a
// database lookup each (a lookup per call is what makes gateways slow; docs/architecture.md, Performance).
type tokenCache struct {
	mu  sync.Mutex
	gen uint64 // bumped by clear: a lookup that started before it is not stored
	m   map[string]*cachedToken
}

type cachedToken struct {
	p        Principal
	expires  *time.Time // the token's own expiry
	lastUsed time.Time  // as stored: last_used_at is written once a minute
	fetched  time.Time
}

// get returns the cached principal for a token hash, and the generation to store a
// fresh lookup under when there is none.
func (c *tokenCache) get(hash string, now time.Time) (*cachedToken, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || now.Sub(e.fetched) > tokenTTL || (e.expires != nil && !e.expires.After(now)) {
		return nil, c.gen
	}
	return e, c.gen
}

func (c *tokenCache) put(gen uint64, hash string, e *cachedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.m == nil || len(c.m) >= 10_000 {
		c.m = map[string]*cachedToken{}
	}
	c.m[hash] = e
}

// touched notes that last_used_at was written, and reports whether it was due: once a
// minute per token, by one caller.
func (c *tokenCache) touch(e *cachedToken, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(e.lastUsed) <= time.Minute {
		return false
	}
	e.lastUsed = now
	return true
}

func (c *tokenCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m = nil
}

// Follow keeps the token cache true to changes other replicas make (a token revoked, a
// user disabled or given another role), watching the bus for as long as it runs.
// Changes made through this service clear it themselves.
//
// What committed before the bus first listened it never delivers: call listening once
// it listens (its Ready is closed; app calls it from the bus component's Ready) to drop
// what was cached until then. Nothing waits for that here: a goroutine waiting for a bus
// that never listens (an App built and not started, or whose start failed first) kept
// itself and this service for the life of the process. A bus listening already is
// caught up with at once.
func (s *Service) Follow(bus *events.Bus) (listening func()) {
	bus.Watch(func(ev events.Event) {
		if !events.SessionStarted.Is(ev) {
			s.tokens.clear()
		}
	}, SessionsTopic)
	select {
	case <-bus.Ready():
		s.tokens.clear()
	default:
	}
	return s.tokens.clear
}
