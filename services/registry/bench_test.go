package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// benchTools is a 5,000-tool listing, each tool with a small input schema.
func benchTools(n int) []registry.ToolDef {
	out := make([]registry.ToolDef, n)
	for i := range out {
		name := fmt.Sprintf("tool_%05d", i)
		schema := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"path":{"type":"string","description":"file %d"},"limit":{"type":"integer","minimum":1}},"required":["path"]}`, i))
		desc := fmt.Sprintf("Tool number %d reads a file", i)
		raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": schema})
		out[i] = registry.ToolDef{Name: name, Description: desc, InputSchema: schema,
			Annotations: json.RawMessage(`{"readOnlyHint":true}`), Raw: raw}
	}
	return out
}

// BenchmarkApplyDiscovery5000 measures storing a 5,000-tool discovery (the discovery target
// of docs/architecture.md, Performance): "new" into a fresh server,
// "unchanged" the same list again.
func BenchmarkApplyDiscovery5000(b *testing.B) {
	const n = 5000
	ctx := context.Background()
	pool := dbtest.New(b)
	k := newKey(b)
	reg := registry.New(pool, newKeyring(b, k), nil)
	tools := benchTools(n)
	d := registry.Discovery{Trigger: "connect", Actor: audit.System, StartedAt: time.Now(), Pages: 50, Tools: tools}
	seq := 0
	newServer := func(b *testing.B) string {
		b.Helper()
		seq++
		sp := stdioSpec(fmt.Sprintf("bench-%d", seq))
		sv, err := reg.CreateServer(ctx, audit.System, sp)
		if err != nil {
			b.Fatal(err)
		}
		return sv.ID
	}
	apply := func(b *testing.B, id string, wantAdded, wantUnchanged int) {
		b.Helper()
		res, err := reg.ApplyDiscovery(ctx, id, d)
		if err != nil {
			b.Fatal(err)
		}
		if res.Added != wantAdded || res.Unchanged != wantUnchanged {
			b.Fatalf("got added %d unchanged %d, want %d %d", res.Added, res.Unchanged, wantAdded, wantUnchanged)
		}
	}

	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			id := newServer(b)
			b.StartTimer()
			apply(b, id, n, 0)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tools/s")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/discovery")
	})
	b.Run("unchanged", func(b *testing.B) {
		id := newServer(b)
		apply(b, id, n, 0)
		for b.Loop() {
			apply(b, id, 0, n)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tools/s")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/discovery")
	})
	dbtest.PrintSettings(b, pool)
}
