// Package yamlsize measures what a YAML document becomes once its aliases are followed.
// yaml.v3 refuses an alias bomb ("billion laughs") only when it decodes into Go values;
// decoded into a yaml.Node, which the configuration files and the templates walk to
// report lines, a few hundred bytes of nested aliases stand for billions of values.
package yamlsize

import "go.yaml.in/yaml/v3"

// Expanded is how many nodes n stands for with every alias followed, counting each
// use of an anchor anew. It stops counting past limit (and returns limit+1): the walk
// costs one visit per distinct node, however far the aliases multiply.
func Expanded(n *yaml.Node, limit int) int {
	w := walk{memo: map[*yaml.Node]int{}, limit: limit}
	return w.size(n)
}

type walk struct {
	memo  map[*yaml.Node]int
	limit int
}

func (w *walk) size(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	if v, ok := w.memo[n]; ok {
		if v < 0 { // an alias inside its own anchor: endless
			return w.limit + 1
		}
		return v
	}
	w.memo[n] = -1
	total := 1
	if n.Kind == yaml.AliasNode {
		total += w.size(n.Alias)
	}
	for _, c := range n.Content {
		total = min(total+w.size(c), w.limit+1)
	}
	total = min(total, w.limit+1)
	w.memo[n] = total
	return total
}
