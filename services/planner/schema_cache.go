package planner

import "sync"

// schemaInfo is what the planner reads of a tool's input schema. One value serves
// every prompt that lists the same schema, at once: nothing may change it.
type schemaInfo struct {
	params []param             // required first, each group in the schema's order
	types  map[string][]string // property → the JSON types it accepts
}

// schemaCache keeps decoded schemas across prompts, keyed by the schema's bytes: a
// catalogue of thousands of tools was decoded again on every prompt. The key is the
// bytes themselves, exact and cheaper to look up than a digest of them.
type schemaCache struct {
	maxEntries, maxBytes int

	mu    sync.Mutex
	m     map[string]*schemaInfo
	bytes int
}

// schemas is the process's cache: 20,000 schemas, about 16 MiB. When either is
// exceeded it starts again empty, which costs one decoding of each schema in use.
var schemas = &schemaCache{maxEntries: 20_000, maxBytes: 16 << 20}

// get is raw's schemaInfo, decoded on first use.
func (c *schemaCache) get(raw []byte) *schemaInfo {
	c.mu.Lock()
	info, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return info
	}
	info = readSchema(raw) // outside the lock: a large schema must not stall other prompts
	size := info.size(len(raw))
	if size > c.maxBytes {
		return info
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, ok := c.m[string(raw)]; ok { // another prompt decoded it meanwhile
		return had
	}
	if c.m == nil || len(c.m) >= c.maxEntries || c.bytes+size > c.maxBytes {
		c.m, c.bytes = map[string]*schemaInfo{}, 0
	}
	c.m[string(raw)] = info
	c.bytes += size
	return info
}

// size estimates the bytes an entry holds: its key, the decoded strings (no longer than
// the schema's text) and the headers around them.
func (s *schemaInfo) size(rawLen int) int {
	n := 2*rawLen + 256
	for _, p := range s.params {
		n += 128 + 24*len(p.enum) + 16*len(p.types)
	}
	return n
}

// readSchema decodes raw, with no cache.
func readSchema(raw []byte) *schemaInfo {
	types := readTypes(raw)
	return &schemaInfo{params: readParams(raw, types), types: types}
}

// schema is tool i's schemaInfo, looked up once per catalogue.
func (c *catalog) schema(i int) *schemaInfo {
	if s, ok := c.schemas[i]; ok {
		return s
	}
	s := schemas.get(c.tools[i].InputSchema)
	c.schemas[i] = s
	return s
}
