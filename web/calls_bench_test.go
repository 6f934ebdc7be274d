package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/everything"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// Issue #5 and the first two targets of docs/architecture.md, Performance: a call through Toolwarden against a direct SDK call to
// the same server, with 1, 8 and 64 concurrent callers, for two upstreams: mcptest_http,
// the in-repo Go server over streamable HTTP on loopback in this process (an upstream
// that costs next to nothing, so Toolwarden's own cost shows), and everything_stdio,
// server-everything over stdio (the upstream P2 names).
//
//	go test ./web -run '^$' -bench 'ToolCall' -benchtime=3000x -count=1
//
// direct: the SDK's own client session calling echo. mcpclient: the same call through
// Toolwarden's long-lived session (mcpclient.Manager.CallTool), the router's last step
// alone. router: router.Call (resolution, permission, validation, risk, rate limit, the
// audit row committed before the call, usage and events written behind it). api: POST
// /api/v1/tools/call with a bearer token over keep-alive HTTP, which adds
// authentication, JSON and HTTP. Each reports the p50 and p99 of one call's wall time,
// calls per second, and for the others the p50 added to direct's p50 measured just
// before with the same callers and calls/s as a share of direct's (x-direct, P2). The
// test cluster runs with fsync off: "durable" here means committed, not flushed to disk.
func BenchmarkToolCall(b *testing.B) {
	srv := webtest.Start(b, &webtest.Options{Router: &router.Options{UserRate: -1}})
	hs := liveServer(b, srv, "bench", true, "echo")
	benchCalls(b, srv, "mcptest_http", "bench", &mcp.StreamableClientTransport{Endpoint: hs.URL(),
		// As many idle connections as Toolwarden's sessions keep, or direct would
		// dial afresh for most of 64 callers' calls.
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}})
	// The throughput target's upstream: server-everything over stdio, a process of its own.
	cmd, args := everything.StdioCommand(b)
	registerServer(b, srv, registry.Spec{Name: "every", Type: registry.TypeStdio, Command: cmd, Args: args,
		Enabled: true, Trusted: true}, "echo")
	benchCalls(b, srv, "everything_stdio", "every", &mcp.CommandTransport{Command: exec.Command(cmd, args...)})
}

// benchCalls runs the four paths against server's echo; direct connects with transport.
func benchCalls(b *testing.B, srv *webtest.Server, upstream, server string, transport mcp.Transport) {
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
	paths := map[string]func() error{
		"direct": func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error")
			}
			return err
		},
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
	}
	directP50, directRate := map[int]float64{}, map[int]float64{}
	for _, callers := range []int{1, 8, 64} {
		for _, name := range []string{"direct", "mcpclient", "router", "api"} {
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
				p50 := times.percentile(0.50)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(times.percentile(0.99), "p99-ms")
				rate := float64(b.N) / elapsed.Seconds()
				b.ReportMetric(rate, "calls/s")
				if name == "direct" {
					directP50[callers], directRate[callers] = p50, rate
				} else if d, ok := directP50[callers]; ok {
					b.ReportMetric(p50-d, "added-p50-ms")
					b.ReportMetric(rate/directRate[callers], "x-direct") // P2: calls/s as a share of direct's
				}
			})
		}
	}
	if err := srv.Router.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}
