package mcpclient_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// reportLatency adds p50 and p95 of the per-call durations to the benchmark output.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkEverythingEcho is the latency of one echo call over Toolwarden's long-lived
// session to server-everything, per transport (no router yet: the session itself).
func BenchmarkEverythingEcho(b *testing.B) {
	for _, tc := range []struct{ name, typ, mode string }{
		{"stdio", registry.TypeStdio, ""},
		{"sse", registry.TypeSSE, "sse"},
		{"streamable_http", registry.TypeStreamableHTTP, "streamableHttp"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := start(b, nil)
			spec := registry.Spec{Name: "everything", Type: tc.typ, Enabled: true}
			if tc.typ == registry.TypeStdio {
				spec.Command, spec.Args = everything.StdioCommand(b)
			} else {
				spec.URL = everything.StartHTTP(b, tc.mode).URL
			}
			sv := e.create(b, spec)
			e.waitStatus(b, sv.ID, registry.StatusConnected)
			cs, err := e.mgr.Session(sv.ID)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}
			for range 20 { // warm up
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkDiscovery5000 is a complete discovery of a 5,000-tool server: tools/list
// over every page, diff, and storage. "new" stores 5,000 new tools; "unchanged" finds
// all of them unchanged.
func BenchmarkDiscovery5000(b *testing.B) {
	for _, unchanged := range []bool{false, true} {
		name := "new"
		if unchanged {
			name = "unchanged"
		}
		b.Run(name, func(b *testing.B) {
			opts := fast()
			if !unchanged {
				// The discovery after connect never fires: the measured one adds every tool.
				opts.Debounce = time.Hour
			}
			e := start(b, opts)
			hs := mcptest.StartHTTP(b, &mcptest.Options{Name: "big", Generated: 4995})
			ctx := context.Background()
			n := 0
			for b.Loop() {
				b.StopTimer()
				n++
				sv := e.create(b, registry.Spec{Name: "big-" + itoa(n), Type: registry.TypeStreamableHTTP, URL: hs.URL(),
					Enabled: true, HealthIntervalMS: 3_600_000})
				e.waitStatus(b, sv.ID, registry.StatusConnected)
				if unchanged {
					e.waitRuns(b, sv.ID, 1)
				}
				b.StartTimer()
				res, err := e.mgr.Discover(ctx, sv.ID, audit.System)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				want := 5000
				got := res.Added
				if unchanged {
					got = res.Unchanged
				}
				if got != want {
					b.Fatalf("got %+v, want %d tools %s", res, want, name)
				}
				if err := e.reg.DeleteServer(ctx, audit.System, sv.ID); err != nil {
					b.Fatal(err)
				}
				e.mgr.Refresh(ctx, sv.ID)
				b.StartTimer()
			}
			// P5's figure (issue #23): seconds a discovery takes.
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/discovery")
			dbtest.PrintSettings(b, e.pool)
		})
	}
}

// BenchmarkReconnect is the time from an HTTP server coming back after an outage to
// the session being connected again, with the production backoff settings.
func BenchmarkReconnect(b *testing.B) {
	e := start(b, &mcpclient.Options{})
	hs := mcptest.StartHTTP(b, &mcptest.Options{Name: "flaky"})
	sv := e.create(b, registry.Spec{Name: "flaky", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true,
		HealthIntervalMS: 1000, TimeoutMS: 1000})
	e.waitStatus(b, sv.ID, registry.StatusConnected)
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		hs.Stop()
		testkit.WaitFor(b, 10*time.Second, func() bool { return e.mgr.Snapshot(sv.ID).Status == registry.StatusError }, "outage not seen")
		hs.Restart()
		t0 := time.Now()
		b.StartTimer()
		for e.mgr.Snapshot(sv.ID).Status != registry.StatusConnected {
			time.Sleep(time.Millisecond)
		}
		took = append(took, time.Since(t0))
	}
	reportLatency(b, took)
}

// BenchmarkStdioStart is how long a stdio server takes from start to initialized
// (Test's connect_ms), confined and not: what the confinement helper's re-execution
// adds to every start. The Go test server is this test binary, as big as toolwarden's;
// server-everything is a Node program.
func BenchmarkStdioStart(b *testing.B) {
	for _, server := range []string{"go", "node"} {
		for _, confined := range []bool{false, true} {
			name := server + "/unconfined"
			if confined {
				name = server + "/confined"
			}
			b.Run(name, func(b *testing.B) {
				opts := fast()
				opts.Confine.Off = !confined
				e := start(b, opts)
				if got := strings.HasPrefix(e.mgr.Confinement(), "none"); got == confined {
					b.Fatalf("confinement: %s", e.mgr.Confinement())
				}
				cfg := registry.Connection{Name: "start", Type: registry.TypeStdio, Timeout: 30 * time.Second}
				if server == "go" {
					cfg.Command, cfg.Args, cfg.Env = mcptest.StdioCommand(nil, "")
				} else {
					cfg.Command, cfg.Args = everything.StdioCommand(b)
				}
				var lat []time.Duration
				for b.Loop() {
					res := e.mgr.Test(context.Background(), cfg)
					if !res.OK {
						b.Fatalf("test connection: %s %v", res.Error, res.Stderr)
					}
					lat = append(lat, time.Duration(res.ConnectMS*float64(time.Millisecond)))
				}
				reportLatency(b, lat)
			})
		}
	}
}
