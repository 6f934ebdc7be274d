package assistant

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkUnderstandLong reads the longest message allowed against 10,000 tools: what one
// message can cost (about 120 ms on the shared 2-core machine, issue #22 review).
func BenchmarkUnderstandLong(b *testing.B) {
	cat := fixture()
	for i := range 10000 {
		cat.Tools = append(cat.Tools, Tool{ID: fmt.Sprint("x", i), Name: fmt.Sprintf("tool_number_%d", i), Server: "ev2", ServerID: "s-ev2",
			Description: "Does something useful with widgets and gadgets number " + fmt.Sprint(i)})
	}
	msg := "enable " + strings.Repeat("widget gadget frobnicate ", 80)
	msg = msg[:1990]
	for b.Loop() {
		Decide(msg, Understand(msg, cat), State{}, cat)
	}
}
