package planner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

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

// distinctSchemas gives each tool a schema of its own (a description naming it), as
// a real catalogue's are, so that no two share a decoding.
func distinctSchemas(tools []planner.Tool) []planner.Tool {
	for i := range tools {
		tools[i].InputSchema = json.RawMessage(fmt.Sprintf(`{"description":"tool %d",%s`, i, tools[i].InputSchema[1:]))
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
		{"2000x50distinct", distinctSchemas(enumTools(2000, enumValues(50)))},
		{"2000x1", enumTools(2000, enumValues(1))},
		{"1x20000", enumTools(1, enumValues(20000))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				_, _ = planner.NewRules().Plan(context.Background(), prompt, bc.tools)
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has used (the garbage collector's too), which
// a shared machine disturbs less than the wall time ns/op is.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
