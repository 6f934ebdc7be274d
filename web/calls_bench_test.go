package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// Issue #5 and #19 and the first two targets of docs/architecture.md, Performance: a call through
// Toolwarden against a direct SDK call to the same server, with 1 and 64 concurrent callers, for two
// upstreams: mcptest_http, the in-repo Go server over streamable HTTP on loopback in this process
// (an upstream that costs next to nothing, so Toolwarden's own cost shows), and everything_stdio,
// server-everything over stdio (the upstream P2 names).
//
//	go test ./web -run '^$' -bench 'ToolCall' -count=1
//
// direct: the SDK's own client session calling echo. mcpclient: the same call through
// Toolwarden's long-lived session (mcpclient.Manager.CallTool), the router's last step
// alone. router: router.Call (resolution, permission, validation, risk, rate limit, the
// audit row committed before the call, usage and events written behind it). api: POST
// /api/v1/tools/call with a bearer token over keep-alive HTTP, which adds
// authentication, JSON and HTTP. mcp: a go-sdk client session (protocol 2025-11-25,
// stateful) through Toolwarden's gateway, /mcp, with a bearer token: what an agent does.
// Each reports the p50 and p99 of one call's wall time, calls per second, and for the
// others the p50 added to direct's p50 measured just before with the same callers and
// calls/s as a share of direct's (x-direct, P2). At the end it prints them as a Markdown
// table with the machine and the database's settings.
//
// Benchmarks run on a durable cluster (fsync and synchronous_commit on, as `toolwarden serve`
// runs; see dbtest.Durable), so "committed" means flushed to disk.
func BenchmarkToolCall(b *testing.B) {
	srv := webtest.Start(b, &webtest.Options{Router: &router.Options{UserRate: -1}})
	hs := liveServer(b, srv, "bench", true, "echo")
	table := &benchTable{}
	benchCalls(b, srv, table, "mcptest_http", "bench", &mcp.StreamableClientTransport{Endpoint: hs.URL(),
		// As many idle connections as Toolwarden's sessions keep, or direct would
		// dial afresh for most of 64 callers' calls.
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}})
	// The throughput target's upstream: server-everything over stdio, a process of its own.
	cmd, args := everything.StdioCommand(b)
	registerServer(b, srv, registry.Spec{Name: "every", Type: registry.TypeStdio, Command: cmd, Args: args,
		Enabled: true, Trusted: true}, "echo")
	benchCalls(b, srv, table, "everything_stdio", "every", &mcp.CommandTransport{Command: exec.Command(cmd, args...)})
	table.print(b, srv)
}

// benchPaths are the paths benchCalls measures, in order (direct first: the others are
// compared with it).
var benchPaths = []string{"direct", "mcpclient", "router", "api", "mcp"}

// benchCallers are the concurrent callers of each measurement.
var benchCallers = []int{1, 64}

// benchBearer adds an API token to every request of an MCP client.
type benchBearer struct {
	token string
	next  http.RoundTripper
}

func (t benchBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// benchCalls runs the paths against server's echo; direct connects with transport.
func benchCalls(b *testing.B, srv *webtest.Server, table *benchTable, upstream, server string, transport mcp.Transport) {
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	admin, err := srv.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		b.Fatal(err)
	}
	tok, _, err := srv.Auth.CreateToken(ctx, audit.System, admin.ID, auth.NewToken{Name: "bench " + upstream})
	if err != nil {
		b.Fatal(err)
	}
	actor := audit.Actor{Kind: audit.ActorToken, ID: admin.ID, Name: admin.Username}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	tool := server + "__echo"
	body := []byte(`{"tool":"` + tool + `","arguments":{"message":"hi"}}`)
	tg, err := srv.Tools.Target(ctx, tool)
	if err != nil {
		b.Fatal(err)
	}
	sid := tg.ServerID
	gw, err := mcp.NewClient(&mcp.Implementation{Name: "bench-agent", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{
			Transport: benchBearer{token: tok, next: &http.Transport{MaxIdleConnsPerHost: 128}}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	sdkCall := func(cs *mcp.ClientSession, name string) func() error {
		return func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi"}})
			if err == nil && res.IsError {
				err = fmt.Errorf("%s: tool error", name)
			}
			return err
		}
	}
	paths := map[string]func() error{
		"direct": sdkCall(cs, "echo"),
		"mcpclient": func() error {
			_, err := srv.MCP.CallTool(ctx, sid, "echo", map[string]any{"message": "hi"}, nil)
			return err
		},
		"router": func() error {
			_, err := srv.Router.Call(ctx, router.Call{Tool: tool, Arguments: json.RawMessage(`{"message":"hi"}`),
				Actor: actor, Role: auth.RoleAdmin, Source: router.SourceAPI})
			return err
		},
		"api": func() error {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/tools/call", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			_, _ = io.Copy(io.Discard, res.Body)
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", res.StatusCode)
			}
			return nil
		},
		"mcp": sdkCall(gw, tool),
	}
	for _, callers := range benchCallers {
		for _, name := range benchPaths {
			call := paths[name]
			b.Run(fmt.Sprintf("%s/%s/callers=%d", upstream, name, callers), func(b *testing.B) {
				var times benchTimes
				var mu sync.Mutex
				var next atomic.Int64
				var failed atomic.Value
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var mine benchTimes
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if err := call(); err != nil {
								failed.Store(err)
								return
							}
							mine = append(mine, time.Since(t0))
						}
						mu.Lock()
						times = append(times, mine...)
						mu.Unlock()
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				m := benchMeasure{p50: times.percentile(0.50), p99: times.percentile(0.99), rate: float64(b.N) / elapsed.Seconds()}
				b.ReportMetric(m.p50, "p50-ms")
				b.ReportMetric(m.p99, "p99-ms")
				b.ReportMetric(m.rate, "calls/s")
				if d, ok := table.get(upstream, "direct", callers); ok && name != "direct" {
					b.ReportMetric(m.p50-d.p50, "added-p50-ms")
					b.ReportMetric(m.rate/d.rate, "x-direct") // P2: calls/s as a share of direct's
				}
				table.put(upstream, name, callers, m) // the last run, with the largest b.N, stays
			})
		}
	}
	if err := srv.Router.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// benchMeasure is one path's figures at one number of callers.
type benchMeasure struct{ p50, p99, rate float64 }

// benchTable collects the measures for the Markdown table.
type benchTable struct {
	mu        sync.Mutex
	upstreams []string
	m         map[string]benchMeasure
}

func benchKey(upstream, path string, callers int) string {
	return fmt.Sprintf("%s/%s/%d", upstream, path, callers)
}

func (t *benchTable) put(upstream, path string, callers int, m benchMeasure) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]benchMeasure{}
	}
	if !slices.Contains(t.upstreams, upstream) {
		t.upstreams = append(t.upstreams, upstream)
	}
	t.m[benchKey(upstream, path, callers)] = m
}

func (t *benchTable) get(upstream, path string, callers int) (benchMeasure, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.m[benchKey(upstream, path, callers)]
	return m, ok
}

// print writes the table to standard output (benchmark output), headed by the machine
// and the database settings it was measured with.
func (t *benchTable) print(b *testing.B, srv *webtest.Server) {
	var version, fsync, syncCommit, fpw string
	err := srv.Pool.QueryRow(context.Background(), `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes')`).Scan(&version, &fsync, &syncCommit, &fpw)
	if err != nil {
		b.Fatal(err)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "\n### Tool calls: direct, JSON API and /mcp (BenchmarkToolCall)\n\n")
	fmt.Fprintf(&w, "- machine: %d cores (GOMAXPROCS %d), %s, %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(&w, "- database: embedded PostgreSQL %s, fsync=%s, synchronous_commit=%s, full_page_writes=%s", version, fsync, syncCommit, fpw)
	if fsync == "on" && syncCommit == "on" {
		fmt.Fprintf(&w, " (the settings of `toolwarden serve`)")
	} else {
		fmt.Fprintf(&w, " (NOT durable: %s was set)", dbtest.DurableEnv)
	}
	fmt.Fprintf(&w, "\n- call: echo {\"message\":\"hi\"}, a LOW tool; added p50 = p50 − direct's p50 at the same callers; ×direct = calls/s ÷ direct's\n\n")
	fmt.Fprintf(&w, "| upstream | path | callers | p50 ms | added p50 ms | p99 ms | calls/s | ×direct |\n")
	fmt.Fprintf(&w, "|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, up := range t.upstreams {
		for _, callers := range benchCallers {
			for _, path := range []string{"direct", "api", "mcp", "router", "mcpclient"} {
				m, ok := t.get(up, path, callers)
				if !ok {
					continue
				}
				added, ratio := "", ""
				if d, ok := t.get(up, "direct", callers); ok && path != "direct" {
					added, ratio = fmt.Sprintf("%+.3f", m.p50-d.p50), fmt.Sprintf("%.2f", m.rate/d.rate)
				}
				fmt.Fprintf(&w, "| %s | %s | %d | %.3f | %s | %.3f | %.0f | %s |\n", up, path, callers, m.p50, added, m.p99, m.rate, ratio)
			}
		}
	}
	fmt.Fprintln(os.Stdout, w.String())
}

// cpuModel is the CPU's model name as Linux reports it ("unknown" elsewhere).
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
