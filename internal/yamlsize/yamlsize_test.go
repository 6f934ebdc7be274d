package yamlsize

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestNodes(t *testing.T) {
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
		if got, _, _ := Size(&n, 1000, math.MaxInt); got != c.want {
			t.Errorf("Size(%.30q…) = %d nodes, want %d", c.doc, got, c.want)
		}
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	// A 1,000-byte string used 10^5 times through five levels of ten aliases: 10^8
	// bytes from 1.3 KB, in 246,914 nodes.
	var b strings.Builder
	b.WriteString("s: &s " + strings.Repeat("x", 1000) + "\n")
	prev := "s"
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		b.WriteString(name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ",") + "]\n")
		prev = name
	}
	big := b.String()
	// Twenty levels: 10^20 uses of the string, more than an int holds.
	for i := range 15 {
		name := "z" + strconv.Itoa(i)
		b.WriteString(name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 10), ",") + "]\n")
		prev = name
	}
	huge := b.String()
	for _, c := range []struct {
		doc                  string
		nodeLimit, byteLimit int
		wantNodes, wantBytes int
		wantOver             bool
	}{
		{"a: 1\nb: [xy, z]\n", 100, 100, 8, 6, false},              // keys count: a, 1, b, xy, z
		{"a: &x [ab, c]\nb: *x\nc: *x\n", 100, 100, 16, 12, false}, // a, b, c and abc at each of three uses
		{"a: &x [ab, c]\nb: *x\nc: *x\n", 100, 11, 16, 12, true},   // one byte too many
		{"a: &x [ab, c]\nb: *x\nc: *x\n", 15, 100, 16, 12, true},   // one node too many
		{big, 100_000, 1 << 20, 100_000 + 1, 1<<20 + 1, true},      // both stop past their limits
		{big, 2_000_000, 200_000_000, 246_914, 111_111_006, false},
		{big, math.MaxInt, math.MaxInt, 246_914, 111_111_006, false},      // no overflow at the largest limits
		{huge, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, false}, // counts stop at the largest int
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(c.doc), &n); err != nil {
			t.Fatal(err)
		}
		nodes, size, over := Size(&n, c.nodeLimit, c.byteLimit)
		if nodes != c.wantNodes || size != c.wantBytes || over != c.wantOver {
			t.Errorf("Size(%.30q…, %d, %d) = %d, %d, %v; want %d, %d, %v", c.doc, c.nodeLimit, c.byteLimit,
				nodes, size, over, c.wantNodes, c.wantBytes, c.wantOver)
		}
	}
}
