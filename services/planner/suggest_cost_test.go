package planner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// A prompt of long words no tool fits must not compare each word with every tool's
// name in full: an edit distance is at least the difference in length, so names far
// shorter than the word are skipped. Counted in cells filled, which do not vary from
// run to run as time does. Not parallel: the count is for the whole process.
func TestSuggestLongWordsCost(t *testing.T) {
	tools := make([]planner.Tool, 2000)
	for i := range tools {
		tools[i] = planner.Tool{Name: fmt.Sprintf("srv%d__tool_%d_thing", i%40, i)}
	}
	var words []string
	for _, c := range "zyxwv" {
		words = append(words, strings.Repeat(string(c), 200))
	}
	before := planner.EditCells()
	_, err := planner.NewRules().Plan(context.Background(), strings.Join(words, " "), tools)
	if err == nil {
		t.Fatal("a prompt of nonsense words was planned")
	}
	if cells := planner.EditCells() - before; cells > 10_000 {
		t.Errorf("5 words of 200 characters against 2,000 tools filled %d edit-distance cells; names far shorter than a word cannot be close to it", cells)
	}

	// An ordinary typo is still compared, and still suggested.
	before = planner.EditCells()
	_, err = planner.NewRules().Plan(context.Background(), "srv1__tool_1_thng", tools)
	if err == nil || !strings.Contains(err.Error(), "srv1__tool_1_thing") {
		t.Errorf("a mistyped name: got %v, want a suggestion of srv1__tool_1_thing", err)
	}
	if planner.EditCells() == before {
		t.Error("no edit distance was computed for a mistyped name: the count is not counting")
	}
}
