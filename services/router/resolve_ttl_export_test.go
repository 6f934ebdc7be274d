package router

import "time"

// SetResolveTTL sets how long r keeps resolved names and permissions.
func SetResolveTTL(r *Router, ttl time.Duration) {
	r.cache.mu.Lock()
	r.cache.ttl = ttl
	r.cache.mu.Unlock()
}
