// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import (
	"encoding/json"
	"sync"
	"time"
)

// methodCache is a per-method TTL cache for list and read results, as
// described in SEP-2549. Each entry is keyed by cursor (for paginated list
// methods) or URI (for resources/read).
type methodCache[R CacheableResult] struct {
	mu           sync.Mutex
	cachedValues map[string]*cacheEntry[R]
	size         int64 // the encoded size of the entries
}

type cacheEntry[R CacheableResult] struct {
	result     R
	receivedAt time.Time
	size       int64
}

func (e *cacheEntry[R]) isValid() bool {
	return time.Since(e.receivedAt) < time.Duration(e.result.GetTTLMs())*time.Millisecond
}

func (mc *methodCache[R]) get(key string) (R, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	entry, ok := mc.cachedValues[key]
	if !ok {
		var zero R
		return zero, false
	}
	if entry.result.GetTTLMs() <= 0 || !entry.isValid() {
		mc.remove(key)
		var zero R
		return zero, false
	}
	return entry.result, true
}

// maxCacheEntries bounds the entries of one method's cache (TOOLWARDEN.md): keys are
// the server's cursors and the caller's URIs, as many as they make.
const maxCacheEntries = 256

// maxCacheEntryBytes and maxCacheBytes bound a method's cache in bytes (TOOLWARDEN.md):
// the server picks the size of its results, and a large one is cheaper fetched again
// than kept for a day.
const (
	maxCacheEntryBytes = 256 << 10 // a larger result (encoded) is not cached
	maxCacheBytes      = 8 << 20   // past it, the oldest entries go
)

func (mc *methodCache[R]) put(key string, result R) {
	var size int64
	if result.GetTTLMs() > 0 {
		data, err := json.Marshal(result)
		if err == nil && len(data) <= maxCacheEntryBytes {
			size = int64(len(data))
		}
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	// A result not kept takes the key's older entry with it, which no longer answers
	// for the key (kept, it would only pin its result).
	mc.remove(key)
	if size == 0 {
		return
	}
	if mc.cachedValues == nil {
		mc.cachedValues = make(map[string]*cacheEntry[R])
	}
	full := func() bool { return len(mc.cachedValues) >= maxCacheEntries || mc.size+size > maxCacheBytes }
	if full() {
		for k, e := range mc.cachedValues {
			if !e.isValid() {
				mc.remove(k)
			}
		}
	}
	for full() {
		var oldest *string // "" is a key too: the first page's
		var at time.Time
		for k, e := range mc.cachedValues {
			if oldest == nil || e.receivedAt.Before(at) {
				oldest, at = &k, e.receivedAt
			}
		}
		mc.remove(*oldest)
	}
	mc.cachedValues[key] = &cacheEntry[R]{
		result:     result,
		receivedAt: time.Now(),
		size:       size,
	}
	mc.size += size
}

// remove drops key's entry, if any; mc.mu is held.
func (mc *methodCache[R]) remove(key string) {
	if e, ok := mc.cachedValues[key]; ok {
		mc.size -= e.size
		delete(mc.cachedValues, key)
	}
}

func (mc *methodCache[R]) invalidate() {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	clear(mc.cachedValues)
	mc.size = 0
}

func (mc *methodCache[R]) invalidateKey(key string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	mc.remove(key)
}

// cursorParams is the constraint for list-method params that carry a pagination
// cursor and can be checked for nil. Both methods are already implemented by
// every concrete list-params type.
type cursorParams interface {
	Params
	cursorPtr() *string
}

// cachedListResult returns a cached list result keyed by the request cursor
// (SEP-2549). It returns the zero value and false on miss or when params is nil.
func cachedListResult[P cursorParams, R CacheableResult](cache *methodCache[R], params P) (R, bool) {
	key := ""
	if !params.isNil() {
		if cp := params.cursorPtr(); cp != nil {
			key = *cp
		}
	}
	return cache.get(key)
}
