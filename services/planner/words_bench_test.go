package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// many is a large catalogue: the everyday tools and 2,000 more, each with a
// description and a schema of its own.
var many = func() []planner.Tool {
	tools := append([]planner.Tool(nil), everyday...)
	for i := range 2000 {
		tools = append(tools, planner.Tool{
			Name:        fmt.Sprintf("srv%d__tool_%d_thing", i%40, i),
			Description: fmt.Sprintf("Does thing number %d with the given widget, gadget and sprocket values for server %d", i, i%40),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"widget%d":{"type":"string"},"count":{"type":"integer"},"mode":{"type":"string","enum":["fast","slow"]}},"required":["widget%d"]}`, i, i)),
		})
	}
	return tools
}()

func benchPlan(b *testing.B, prompt string) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = planner.NewRules().Plan(context.Background(), prompt, many)
	}
}

// The longest prompt the API accepts (8,000 characters) as ~1,100 steps.
func BenchmarkSentencesLongPrompt(b *testing.B) {
	benchPlan(b, strings.Repeat("echo x;", 8000/len("echo x;")))
}

// Fifty steps, the most a plan may have.
func BenchmarkSentencesFiftySteps(b *testing.B) {
	benchPlan(b, strings.Repeat("echo x;", 50))
}

// One step no tool fits, of many words: each would be compared with every tool's name.
func BenchmarkSentencesNoFitManyWords(b *testing.B) {
	benchPlan(b, strings.Repeat("zqxv ", 1600))
}

// What a step costs is its own reading, not every tool's again: each tool's words and
// parameters are read once per catalogue, and a step no tool fits looks up only its
// first words among the tools' names. Counted in allocations, which do not vary from
// run to run as time does. Not parallel: allocations are counted for the whole process.
func TestSentencesCostPerStep(t *testing.T) {
	tools := many[:len(everyday)+200]
	allocs := func(prompt string) float64 {
		return testing.AllocsPerRun(2, func() { _, _ = planner.NewRules().Plan(context.Background(), prompt, tools) })
	}
	one, fifty := allocs("echo x"), allocs(strings.TrimSuffix(strings.Repeat("echo x; ", 50), " "))
	if fifty > 5*one {
		t.Errorf("50 steps allocate %.0f times, 1 step %.0f: each step reads every tool again", fifty, one)
	}
	var words []string
	for i := range 200 {
		words = append(words, fmt.Sprintf("zqxv%d", i))
	}
	one, all := allocs("zqxv"), allocs(strings.Join(words, " "))
	if all > 10*one {
		t.Errorf("a step of 200 words no tool fits allocates %.0f times, of 1 word %.0f: every word is compared with every name", all, one)
	}
}
