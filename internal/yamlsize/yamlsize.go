// Package yamlsize measures what a YAML document becomes once its aliases are followed.
// yaml.v3 refuses an alias bomb ("billion laughs") only when it decodes into Go values;
// decoded into a yaml.Node, which the configuration files and the templates walk to
// report lines, a few hundred bytes of nested aliases stand for billions of values.
package yamlsize

import (
	"math"

	"go.yaml.in/yaml/v3"
)

// Size is how many nodes n stands for with every alias followed, and how many bytes of
// text (scalars' values, keys included): few nodes can still stand for gigabytes when
// the anchor is one long string. Each count stops past its limit (at limit+1), and
// over says whether either did; the walk visits each distinct node once.
func Size(n *yaml.Node, nodeLimit, byteLimit int) (nodes, bytes int, over bool) {
	w := walk{memo: map[*yaml.Node]size{}, nodeCap: above(nodeLimit), byteCap: above(byteLimit)}
	s := w.size(n)
	return s.nodes, s.bytes, s.nodes > nodeLimit || s.bytes > byteLimit
}

// above is limit+1, where counting stops, without overflowing.
func above(limit int) int {
	if limit == math.MaxInt {
		return limit
	}
	return max(limit, -1) + 1
}

// add is a+b, stopping at ceiling; a and b are at most ceiling, so it cannot overflow.
func add(a, b, ceiling int) int {
	if b > ceiling-a {
		return ceiling
	}
	return a + b
}

type size struct {
	nodes, bytes int
	visiting     bool // being counted: met again, it is an alias inside its own anchor
}

type walk struct {
	memo             map[*yaml.Node]size
	nodeCap, byteCap int
}

func (w *walk) size(n *yaml.Node) size {
	if n == nil {
		return size{}
	}
	if s, ok := w.memo[n]; ok {
		if s.visiting { // endless
			return size{nodes: w.nodeCap, bytes: w.byteCap}
		}
		return s
	}
	w.memo[n] = size{visiting: true}
	total := size{nodes: 1}
	if n.Kind == yaml.ScalarNode {
		total.bytes = min(len(n.Value), w.byteCap)
	}
	if n.Kind == yaml.AliasNode {
		a := w.size(n.Alias)
		total.nodes = add(total.nodes, a.nodes, w.nodeCap)
		total.bytes = add(total.bytes, a.bytes, w.byteCap)
	}
	for _, c := range n.Content {
		s := w.size(c)
		total.nodes = add(total.nodes, s.nodes, w.nodeCap)
		total.bytes = add(total.bytes, s.bytes, w.byteCap)
	}
	total.nodes = min(total.nodes, w.nodeCap)
	w.memo[n] = total
	return total
}
