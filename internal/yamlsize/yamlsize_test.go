package yamlsize

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestExpanded(t *testing.T) {
	t.Parallel()
	// Nine levels of ten aliases each: 10^9 leaves from a few hundred bytes.
	var b strings.Builder
	b.WriteString("a: &a [x,x,x,x,x,x,x,x,x,x]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b.WriteString(name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ",") + "]\n")
		prev = name
	}
	for _, c := range []struct {
		doc  string
		want int
	}{
		{"a: 1\nb: [x, y]\n", 8},             // document, mapping, a, 1, b, sequence, x, y
		{"a: &x [1, 2]\nb: *x\nc: *x\n", 16}, // the aliased sequence counted at each use
		{b.String(), 1001},                   // past the limit
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(c.doc), &n); err != nil {
			t.Fatal(err)
		}
		if got := Expanded(&n, 1000); got != c.want {
			t.Errorf("Expanded(%.30q…) = %d, want %d", c.doc, got, c.want)
		}
	}
}
