package planner

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/toolname"
)

// catalog is the tools of one Plan call, indexed for name resolution. What the
// sentence reading needs of a tool (its words, its parameters) is read on first use
// and kept, so that each step does not read every tool again; a schema's reading is
// kept for later prompts too (schemaCache).
type catalog struct {
	tools   []Tool
	byName  map[string]int      // qualified name → index
	byBare  map[string][]int    // tool name without its server → indexes
	schemas map[int]*schemaInfo // shared with other prompts: read only
	words   map[int]*toolWords
}

// toolWords are the words of a tool's name, server and description, as norm gives them.
type toolWords struct {
	name, server, desc map[string]bool
	lower              string // the tool's name without its server, in lower case
}

func newCatalog(tools []Tool) *catalog {
	c := &catalog{tools: tools, byName: make(map[string]int, len(tools)), byBare: map[string][]int{},
		schemas: map[int]*schemaInfo{}, words: map[int]*toolWords{}}
	for i, t := range tools {
		if _, dup := c.byName[t.Name]; dup {
			continue // the first wins; a caller listing a tool twice means the same tool
		}
		c.byName[t.Name] = i
		b := bare(t.Name)
		c.byBare[b] = append(c.byBare[b], i)
	}
	return c
}

// bare is a qualified name without its server (toolname.Bare).
func bare(name string) string { return toolname.Bare(name) }

// resolved is a name resolved to a tool, plus the operation a dotted name implies.
type resolved struct {
	tool      int
	operation string
}

// resolveError says why a name does not resolve; the parser adds where it was. The
// message for an unknown name (with its suggestions) is built only when it is shown.
type resolveError struct {
	c       *catalog
	name    string
	message string // set when several tools have the name
}

func (e *resolveError) msg() string {
	if e.message != "" {
		return e.message
	}
	return e.c.unknown(e.name)
}

// resolve finds the tool a name means: a qualified name, a bare name only one tool has,
// or either with ".operation" (seed 001). The whole name is tried first, since tool names
// may themselves contain dots; but a bare dotted name that tools of different servers
// answer both ways (a tool named "a.b", tool "a" with operation "b") is ambiguous, so a
// server's tool named like another's operation cannot capture its calls.
func (c *catalog) resolve(name string) (resolved, *resolveError) {
	i, err := c.find(name)
	if i == -2 { // ambiguous: a dotted reading would not make it less so
		return resolved{}, err
	}
	base, op, dotted := toolname.CutOperation(name)
	if !dotted {
		if err != nil {
			return resolved{}, err
		}
		return resolved{tool: i}, nil
	}
	j, berr := c.find(base)
	switch {
	case err == nil && (j == -1 || toolname.Qualified(name) || j >= 0 && server(c.tools[i].Name) == server(c.tools[j].Name)):
		return resolved{tool: i}, nil
	case err == nil:
		names := []string{c.tools[i].Name}
		for _, k := range c.byBare[base] {
			names = append(names, c.tools[k].Name+"."+op)
		}
		if j >= 0 && !slices.Contains(c.byBare[base], j) {
			names = append(names, c.tools[j].Name+"."+op)
		}
		slices.Sort(names)
		names = slices.Compact(names) // a server's "a.b" and its "a" with "b" read the same
		return resolved{}, &resolveError{c: c, name: name, message: several(name, names)}
	case berr == nil:
		return resolved{tool: j, operation: op}, nil
	case j == -2:
		return resolved{}, berr
	}
	return resolved{}, err
}

// server is a qualified name's server part ("" for a bare name).
func server(name string) string {
	s, _, _ := toolname.Split(name)
	return s
}

// several is the message for a name that tools of several servers answer.
func several(name string, names []string) string {
	return fmt.Sprintf("%q is a tool of several servers; name one of %s.", name, strings.Join(names, ", "))
}

// find resolves a name without the dotted reading; the index is -1 when no tool has the
// name and -2 when several do.
func (c *catalog) find(name string) (int, *resolveError) {
	if i, ok := c.byName[name]; ok {
		return i, nil
	}
	if !toolname.Qualified(name) {
		switch ids := c.byBare[name]; len(ids) {
		case 0:
		case 1:
			return ids[0], nil
		default:
			names := make([]string, len(ids))
			for k, id := range ids {
				names[k] = c.tools[id].Name
			}
			slices.Sort(names)
			return -2, &resolveError{c: c, name: name, message: several(name, names)}
		}
	}
	return -1, &resolveError{c: c, name: name}
}

// unknown says that no tool has the name and which names come closest.
func (c *catalog) unknown(name string) string {
	if len(c.tools) == 0 {
		return fmt.Sprintf("There is no tool %s: no tools are available to you (a tool must be enabled and you must be allowed to use it).", quoteFragment(name))
	}
	if s := c.suggest(name, 3); len(s) > 0 {
		return fmt.Sprintf("There is no tool %s. Did you mean %s?", quoteFragment(name), orList(s))
	}
	if len(c.byName) <= 8 {
		names := make([]string, 0, len(c.byName))
		for n := range c.byName {
			names = append(names, n)
		}
		slices.Sort(names)
		return fmt.Sprintf("There is no tool %s. The tools you may use are %s.", quoteFragment(name), strings.Join(names, ", "))
	}
	return fmt.Sprintf("There is no tool %s, and no tool has a similar name; the Tools page lists the names to use (\"server__tool\").", quoteFragment(name))
}

// suggest returns up to n tool names close to name: names containing it first, then by
// edit distance to the qualified or bare name, then alphabetically.
func (c *catalog) suggest(name string, n int) []string {
	type cand struct {
		name   string
		within bool
		dist   int
	}
	// A dotted name is also judged by its tool part ("files.read" by "files").
	if len(name) > 200 {
		return nil // longer than any tool name by far, and costly to compare
	}
	q := strings.ToLower(name)
	base := q
	if i := strings.IndexByte(q, '.'); i > 0 {
		base = q[:i]
	}
	limit := max(2, len(base)/3)
	var cands []cand
	for full := range c.byName {
		lf, lb := strings.ToLower(full), strings.ToLower(bare(full))
		within := len(base) >= 3 && strings.Contains(lf, base)
		// Only a distance within the limit matters, unless the name contains the word
		// (then it orders the suggestions); each pair is computed only as far as it can
		// still beat the closest so far.
		d := limit + 1
		if within {
			d = max(len(q), len(lf)) + 1
		}
		for i, p := range [][2]string{{base, lb}, {base, lf}, {q, lb}, {q, lf}} {
			if d == 0 || (i >= 2 && q == base) {
				break
			}
			d = min(d, boundedDistance(p[0], p[1], d-1))
		}
		if within || d <= limit {
			cands = append(cands, cand{full, within, d})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.within != b.within {
			if a.within {
				return -1
			}
			return 1
		}
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, 0, n)
	for _, c := range cands[:min(n, len(cands))] {
		out = append(out, c.name)
	}
	return out
}

// editCells counts the edit-distance cells suggest fills, so that tests can count its work.
var editCells atomic.Int64

// boundedDistance is the edit distance of a and b when it is at most k, else k+1. A
// distance is at least the difference in length, only cells within k of the diagonal
// can be within k, and once a whole row is past k the rest is too; so a long word
// costs little against names nothing like it.
func boundedDistance(a, b string, k int) int {
	if len(a)-len(b) > k || len(b)-len(a) > k {
		return k + 1
	}
	far := k + 1
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = min(j, far)
	}
	cells := 0
	defer func() { editCells.Add(int64(cells)) }()
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-k), min(len(b), i+k)
		cur[lo-1] = far
		if lo == 1 {
			cur[0] = min(i, far)
		}
		rowMin := cur[lo-1]
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost, far)
			rowMin = min(rowMin, cur[j])
		}
		if hi < len(b) {
			cur[hi+1] = far // outside the band: the next row must not read an old value
		}
		cells += hi - lo + 1
		if rowMin > k {
			return far
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func orList(s []string) string {
	switch len(s) {
	case 1:
		return s[0]
	case 2:
		return s[0] + " or " + s[1]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// wordsOf is tool i's words.
func (c *catalog) wordsOf(i int) *toolWords {
	if tw, ok := c.words[i]; ok {
		return tw
	}
	server, tool, _ := strings.Cut(c.tools[i].Name, "__")
	if tool == "" {
		server, tool = "", c.tools[i].Name
	}
	tw := &toolWords{name: map[string]bool{}, server: map[string]bool{}, desc: map[string]bool{}, lower: strings.ToLower(tool)}
	for _, w := range textcheck.NameWords(tool) {
		tw.name[norm(w)] = true
	}
	for _, w := range textcheck.NameWords(server) {
		tw.server[norm(w)] = true
	}
	for _, w := range readSentence(c.tools[i].Description).words {
		if !stopWords[w] {
			tw.desc[norm(w)] = true
		}
	}
	c.words[i] = tw
	return tw
}

// propTypes returns, for each property of tool i's input schema, the JSON types it
// accepts. The map and its slices are shared with other prompts: read only.
func (c *catalog) propTypes(i int) map[string][]string { return c.schema(i).types }

// readTypes returns, for each property of a schema, the JSON types it accepts (from
// "type", the members of "anyOf"/"oneOf", or the kinds of an "enum"/"const"). A schema
// that cannot be read gives no types, so every bare value stays a string.
func readTypes(schema []byte) map[string][]string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	out := map[string][]string{}
	if json.Unmarshal(schema, &s) == nil {
		for k, raw := range s.Properties {
			if ts := typesOf(raw, 0); len(ts) > 0 {
				out[k] = ts
			}
		}
	}
	return out
}

func typesOf(raw json.RawMessage, depth int) []string {
	var p struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
		Enum  []json.RawMessage `json:"enum"`
		Const json.RawMessage   `json:"const"`
	}
	if depth > 3 || json.Unmarshal(raw, &p) != nil {
		return nil
	}
	var ts []string
	add := func(t string) {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	var one string
	var many []string
	if json.Unmarshal(p.Type, &one) == nil && one != "" {
		add(one)
	} else if json.Unmarshal(p.Type, &many) == nil {
		for _, t := range many {
			add(t)
		}
	}
	for _, sub := range append(p.AnyOf, p.OneOf...) {
		for _, t := range typesOf(sub, depth+1) {
			add(t)
		}
	}
	if len(ts) == 0 {
		values := p.Enum
		if len(p.Const) > 0 {
			values = append(values, p.Const)
		}
		for _, v := range values {
			if k := kindOf(v); k != "" {
				add(k)
			}
		}
	}
	return ts
}

// kindOf is the JSON Schema type of a JSON value ("number" for any number).
func kindOf(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return ""
	}
	switch s[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
