package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/usage"
)

// MaskSecretArgs masks, as usage.Mask, the argument values the tool's input schema
// marks secret (writeOnly, format "password"; SecretArgNames) at any depth, whatever
// their look: a password typed with send_input is a plain word that usage.Redact would
// keep. args is returned as is when nothing is masked.
func MaskSecretArgs(schema, args json.RawMessage) json.RawMessage {
	return MaskArgs(args, SecretArgNames(schema))
}

// SecretArgNames lists where arguments of an input schema hold a secret (MaskSecretArgs),
// for callers that keep them per tool rather than decode the schema per call: a
// top-level property by its name, a deeper place as a JSON pointer ("/conn/code",
// "/rows/~*/key", where ~* stands for every element of an array). A top-level property
// whose name looks secret (IsSecretParam) is listed too.
func SecretArgNames(inputSchema json.RawMessage) []string {
	var names []string
	for _, p := range secretPlaces(inputSchema, true) {
		if len(p) == 1 && !strings.HasPrefix(p[0], "/") && !strings.HasPrefix(p[0], "~") {
			names = append(names, unescapeToken(p[0]))
		} else {
			names = append(names, "/"+strings.Join(p, "/"))
		}
	}
	return names
}

// anyItem is the token of a secret place that stands for every element of an array or
// member of an object (additionalProperties, patternProperties): no
// escaped JSON pointer token is "~*" ("~" is written "~0").
const anyItem = "~*"

var (
	tokenEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	tokenUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

func escapeToken(s string) string   { return tokenEscaper.Replace(s) }
func unescapeToken(s string) string { return tokenUnescaper.Replace(s) }

// Bounds on the places secretPlaces lists: a recursive schema (a tree of nodes each
// holding a secret) has places at every depth.
const (
	maxSecretDepth  = 16
	maxSecretPlaces = 256
)

// secretNode is one schema object of an input schema, by its JSON pointer.
type secretNode struct {
	marked  bool         // it marks its values secret (schema.MarksSecret)
	reach   bool         // it, or a schema it leads to, marks a value secret
	same    []string     // the schemas that apply at its place ($ref, anyOf, oneOf, allOf)
	next    []secretEdge // the schemas of what its value holds
	parents []string
}

// secretEdge leads to the schema ptr of a value's member tok (an escaped property name,
// an index, anyItem).
type secretEdge struct{ tok, ptr string }

// secretPlaces lists where argument values of the input schema raw are secret, each
// place as escaped JSON pointer tokens. It follows properties, items, prefixItems,
// anyOf, oneOf, allOf and local $refs, as the test form does, each schema once (a
// $ref may loop); a null is no secret but a place holding one is still listed. With
// byName, a top-level property whose name looks secret is a place too.
func secretPlaces(raw json.RawMessage, byName bool) [][]string {
	if !bytes.Contains(raw, []byte("writeOnly")) && !bytes.Contains(raw, []byte("password")) {
		return nil // most schemas mark nothing: skip decoding them
	}
	doc, err := schema.Decode(raw)
	root, ok := doc.(*schema.Object)
	if err != nil || !ok {
		return nil
	}
	nodes := map[string]*secretNode{"": {}}
	type item struct {
		o   *schema.Object
		ptr string
	}
	queue := []item{{root, ""}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		n := nodes[it.ptr]
		n.marked = schema.MarksSecret(schema.View{{Schema: it.o, Ptr: it.ptr}})
		link := func(v any, ptr, tok string) {
			o, ok := v.(*schema.Object)
			if !ok {
				return // true, false: no keyword marks anything
			}
			c := nodes[ptr]
			if c == nil {
				c = &secretNode{}
				nodes[ptr] = c
				queue = append(queue, item{o, ptr})
			}
			c.parents = append(c.parents, it.ptr)
			if tok == "" {
				n.same = append(n.same, ptr)
			} else {
				n.next = append(n.next, secretEdge{tok, ptr})
			}
		}
		if it.o.Has("$ref") {
			if v := schema.Resolve(doc, it.o, it.ptr); len(v) > 1 {
				link(v[1].Schema, v[1].Ptr, "")
			}
		}
		for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
			for i, s := range it.o.Array(kw) {
				link(s, schema.PtrJoin(it.ptr, kw, strconv.Itoa(i)), "")
			}
		}
		props := it.o.Object("properties")
		for _, k := range props.Keys() {
			v, _ := props.Get(k)
			link(v, schema.PtrJoin(it.ptr, "properties", k), escapeToken(k))
		}
		switch items, _ := it.o.Get("items"); items := items.(type) {
		case *schema.Object:
			link(items, schema.PtrJoin(it.ptr, "items"), anyItem)
		case []any: // draft-07's tuples
			for i, s := range items {
				link(s, schema.PtrJoin(it.ptr, "items", strconv.Itoa(i)), strconv.Itoa(i))
			}
		}
		for i, s := range it.o.Array("prefixItems") {
			link(s, schema.PtrJoin(it.ptr, "prefixItems", strconv.Itoa(i)), strconv.Itoa(i))
		}
		// A map's values (the form shows them as secret too); a pattern's stand for
		// every member, which masks more than the pattern names, never less.
		if v, ok := it.o.Get("additionalProperties"); ok {
			link(v, schema.PtrJoin(it.ptr, "additionalProperties"), anyItem)
		}
		pp := it.o.Object("patternProperties")
		for _, k := range pp.Keys() {
			v, _ := pp.Get(k)
			link(v, schema.PtrJoin(it.ptr, "patternProperties", k), anyItem)
		}
	}
	var stack []string
	for p, n := range nodes {
		if n.marked {
			n.reach = true
			stack = append(stack, p)
		}
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, q := range nodes[p].parents {
			if m := nodes[q]; !m.reach {
				m.reach = true
				stack = append(stack, q)
			}
		}
	}
	w := placeWalk{nodes: nodes, byName: byName, depth: maxSecretDepth, max: maxSecretPlaces}
	if !w.walk([]string{""}, nil) {
		// Too many places (a recursive schema fanning out): whole top-level arguments.
		w = placeWalk{nodes: nodes, byName: byName, depth: 1}
		w.walk([]string{""}, nil)
	}
	return w.places
}

// placeWalk lists the secret places of a schema's nodes (secretPlaces): to depth, where
// a value that may hold a secret deeper is a place as a whole, and at most max (0: no
// bound).
type placeWalk struct {
	nodes      map[string]*secretNode
	byName     bool
	depth, max int
	places     [][]string
}

// walk lists the places at and under at, where the schemas ptrs apply; false when there
// are more than max.
func (w *placeWalk) walk(ptrs []string, at []string) bool {
	seen := map[string]bool{}
	var here []*secretNode
	for i := 0; i < len(ptrs); i++ {
		if seen[ptrs[i]] {
			continue
		}
		seen[ptrs[i]] = true
		n := w.nodes[ptrs[i]]
		here = append(here, n)
		ptrs = append(ptrs, n.same...)
	}
	if len(at) > 0 {
		secret := len(at) == 1 && w.byName && secrets.LooksSecretName(unescapeToken(at[0]))
		for _, n := range here {
			secret = secret || n.marked || len(at) == w.depth && n.reach
		}
		if secret {
			w.places = append(w.places, at)
		}
		if secret || len(at) == w.depth {
			return w.max == 0 || len(w.places) <= w.max
		}
	}
	next := map[string][]string{}
	var toks []string
	for _, n := range here {
		for _, e := range n.next {
			if !w.nodes[e.ptr].reach && !(len(at) == 0 && w.byName && secrets.LooksSecretName(unescapeToken(e.tok))) {
				continue
			}
			if _, ok := next[e.tok]; !ok {
				toks = append(toks, e.tok)
			}
			next[e.tok] = append(next[e.tok], e.ptr)
		}
	}
	slices.Sort(toks)
	for _, tok := range toks {
		if !w.walk(next[tok], append(slices.Clip(at), tok)) {
			return false
		}
	}
	return true
}

// argTrie holds secret places (secretPlaces) by their tokens.
type argTrie struct {
	secret bool
	next   map[string]*argTrie
}

func newArgTrie(places [][]string) *argTrie {
	root := &argTrie{}
	for _, p := range places {
		t := root
		for _, tok := range p {
			c := t.next[tok]
			if c == nil {
				if t.next == nil {
					t.next = map[string]*argTrie{}
				}
				c = &argTrie{}
				t.next[tok] = c
			}
			t = c
		}
		t.secret = true
	}
	return root
}

// argStep is where ts lead in an object's member key (escaped), or in an array's element
// key (its index): by the key, and by anyItem (every element or member).
func argStep(ts []*argTrie, key string) []*argTrie {
	var out []*argTrie
	for _, t := range ts {
		if c := t.next[key]; c != nil {
			out = append(out, c)
		}
		if c := t.next[anyItem]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

func anySecret(ts []*argTrie) bool {
	return slices.ContainsFunc(ts, func(t *argTrie) bool { return t.secret })
}

// MaskArgs masks the argument values at names (SecretArgNames: top-level names and JSON
// pointers) that are not null; args is returned as is when nothing is masked.
func MaskArgs(args json.RawMessage, names []string) json.RawMessage {
	if len(names) == 0 {
		return args
	}
	places := make([][]string, 0, len(names))
	for _, n := range names {
		if !strings.HasPrefix(n, "/") {
			places = append(places, []string{escapeToken(n)})
		} else {
			places = append(places, strings.Split(n[1:], "/"))
		}
	}
	if out, masked := maskAt(args, []*argTrie{newArgTrie(places)}); masked {
		return out
	}
	return args
}

// maskAt is v with the values at the places ts masked, and whether any was.
func maskAt(v json.RawMessage, ts []*argTrie) (json.RawMessage, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return v, false
	}
	if anySecret(ts) {
		m, _ := json.Marshal(usage.Mask)
		return m, true
	}
	masked := false
	var out any
	switch v[0] {
	case '{':
		var o map[string]json.RawMessage
		if json.Unmarshal(v, &o) != nil {
			return v, false
		}
		for k, x := range o {
			if next := argStep(ts, escapeToken(k)); len(next) > 0 {
				if m, ok := maskAt(x, next); ok {
					o[k], masked = m, true
				}
			}
		}
		out = o
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(v, &a) != nil {
			return v, false
		}
		for i, x := range a {
			if next := argStep(ts, strconv.Itoa(i)); len(next) > 0 {
				if m, ok := maskAt(x, next); ok {
					a[i], masked = m, true
				}
			}
		}
		out = a
	}
	if !masked {
		return v, false
	}
	b, err := json.Marshal(out)
	if err != nil {
		return v, false
	}
	return b, true
}

// ArgMasker masks, in step arguments shown (plans, executions, rollbacks), the
// arguments each step's tool schema marks secret (MaskSecretArgs): send_input's text may
// be a password typed at a hidden prompt; and, as the call's records are
// (usage.Redact), every value under a secret-looking name (api_key) or shaped like a
// credential, which no schema needs to mark. It reads each tool once.
type ArgMasker struct {
	s     *Service
	names map[string][]string // secret argument names, by tool reference
}

// NewArgMasker returns a masker for one page or response.
func (s *Service) NewArgMasker() *ArgMasker {
	return &ArgMasker{s: s, names: map[string][]string{}}
}

// Mask is args with the secrets of the tool toolID (else the one named tool) masked.
func (m *ArgMasker) Mask(ctx context.Context, toolID, tool string, args json.RawMessage) (json.RawMessage, error) {
	return m.MaskStep(ctx, toolID, tool, nil, args)
}

// MaskStep is Mask of a planned step's arguments that also masks planned, where its plan
// recorded them secret (SecretArgNames of the definition pinned when it was planned): a
// plan shows its arguments long after, when the tool's definition may no longer mark
// them (a server dropped writeOnly) or be gone, and what was typed as a secret stays one.
func (m *ArgMasker) MaskStep(ctx context.Context, toolID, tool string, planned []string, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		return args, nil
	}
	ref := toolID
	if ref == "" {
		ref = tool
	}
	var names []string
	if ref != "" {
		var ok bool
		if names, ok = m.names[ref]; !ok {
			t, err := m.s.Target(ctx, ref)
			switch {
			case errors.Is(err, ErrNotFound): // a deleted tool: only its plan says what is secret
			case err != nil:
				return nil, err
			default:
				names = SecretArgNames(t.InputSchema)
			}
			m.names[ref] = names
		}
	}
	return usage.Redact(MaskArgs(args, slices.Concat(names, planned))), nil
}
