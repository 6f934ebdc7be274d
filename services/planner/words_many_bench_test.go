package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// enumTools are n tools that all fit "get", each with one required string parameter
// of the given enum values.
func enumTools(n int, values []string) []planner.Tool {
	enum, _ := json.Marshal(values)
	tools := make([]planner.Tool, n)
	for i := range tools {
		tools[i] = planner.Tool{
			Name:        fmt.Sprintf("srv%d__get_thing_%d", i, i),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"kind":{"type":"string","enum":%s}},"required":["kind"]}`, enum)),
		}
	}
	return tools
}

func enumValues(n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("value_%d", i)
	}
	return vs
}

// A step many tools fit, of many words: each tool's enum values are compared with the
// step's words, and its leftover words gathered.
func BenchmarkRulesManyMatchingTools(b *testing.B) {
	prompt := "get " + strings.Repeat("zz ", 2600)
	for _, bc := range []struct {
		name  string
		tools []planner.Tool
	}{
		{"2000x50", enumTools(2000, enumValues(50))},
		{"2000x1", enumTools(2000, enumValues(1))},
		{"1x20000", enumTools(1, enumValues(20000))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = planner.NewRules().Plan(context.Background(), prompt, bc.tools)
			}
		})
	}
}
