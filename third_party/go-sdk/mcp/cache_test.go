// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import (
	"strconv"
	"strings"
	"testing"
)

// page is a tools/list page whose _meta carries size bytes, cached for a day.
func page(cursor string, size int) *ListToolsResult {
	return &ListToolsResult{Meta: Meta{"x": strings.Repeat("x", size)}, Cacheable: Cacheable{TTLMs: 86_400_000},
		NextCursor: cursor}
}

// A result too large to be worth keeping is not cached, and takes its key's older
// entry with it (TOOLWARDEN.md).
func TestCacheSkipsLargeResults(t *testing.T) {
	var mc methodCache[*ListToolsResult]
	mc.put("c", page("small", 10))
	mc.put("c", page("big", maxCacheEntryBytes))
	if r, ok := mc.get("c"); ok {
		t.Fatalf("a result of %d KiB (and its JSON) was cached (next cursor %q), want none over %d KiB",
			len(r.Meta["x"].(string))>>10, r.NextCursor, maxCacheEntryBytes>>10)
	}
	if mc.size != 0 {
		t.Fatalf("an empty cache counts %d bytes", mc.size)
	}
}

// A server's fresh cursors fill a method's cache to maxCacheBytes at most: the oldest
// entries go first.
func TestCacheByteBudget(t *testing.T) {
	var mc methodCache[*ListToolsResult]
	const each = 200 << 10 // under the entry limit
	for i := range maxCacheEntries {
		mc.put("c"+strconv.Itoa(i), page("n", each))
		if mc.size > maxCacheBytes {
			t.Fatalf("after %d pages of %d KiB the cache holds %d KiB, want at most %d KiB",
				i+1, each>>10, mc.size>>10, maxCacheBytes>>10)
		}
	}
	last := "c" + strconv.Itoa(maxCacheEntries-1)
	if _, ok := mc.get(last); !ok {
		t.Fatal("the newest page was not kept")
	}
	if _, ok := mc.get("c0"); ok {
		t.Fatal("the oldest page was kept over the budget")
	}
	var held int64
	for _, e := range mc.cachedValues {
		held += e.size
	}
	if held != mc.size {
		t.Fatalf("the entries hold %d bytes, the cache counts %d", held, mc.size)
	}
	mc.invalidate()
	if mc.size != 0 {
		t.Fatalf("an invalidated cache counts %d bytes", mc.size)
	}
}
