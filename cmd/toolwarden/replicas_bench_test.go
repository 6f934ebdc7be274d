package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// Benchmarks of `toolwarden serve` as a process of its own (this test binary run as
// toolwarden, see TestMain): P7 (start-up and memory, startup_bench_test.go) and P10
// (calls/s with three replicas on one database, below). They start serve with the
// tests' launchEnv (faults_test.go) in the environment of `make run`.

// benchEnv is this process's environment for a serve: run as toolwarden, and with the
// embedded cluster's durable settings (as `make run`), which TestMain turns off for tests.
func benchEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "TOOLWARDEN_TEST_FAST_DB=")
	})
	return append(env, asToolwardenEnv+"=1")
}

// benchStartServe starts `toolwarden serve --data-dir dir args...` as `make run` would
// (benchEnv, no rate limit, quiet) and waits for its ready file; took is the time from
// the process's start to the file's existence.
func benchStartServe(tb testing.TB, dir string, args ...string) (p *serveProc, took time.Duration) {
	tb.Helper()
	p = launchEnv(tb, benchEnv(), dir, append([]string{"--rate-limit", "-1", "--log-level", "warn"}, args...)...)
	return p, p.waitReady(tb)
}

// benchToken creates an API token for admin with the CLI (`token create`), with the
// extra flags that name the database (--data-dir, --database-url).
func benchToken(tb testing.TB, flags ...string) string {
	tb.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"token", "create", "--user", "admin", "--name", "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)}, flags...)
	if err := run(context.Background(), args, strings.NewReader(""), &out, &errb); err != nil {
		tb.Fatalf("token create: %v\n%s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// benchRegister registers up as the trusted, enabled streamable HTTP server name through
// p's API and waits until it is connected with tools tools; it returns the server's id.
func benchRegister(tb testing.TB, p *serveProc, token, name, url string, tools int, within time.Duration) string {
	tb.Helper()
	var sv struct {
		ID string `json:"id"`
	}
	p.do(tb, token, http.MethodPost, "/api/v1/servers", map[string]any{"name": name, "type": "streamable_http",
		"url": url, "enabled": true, "trusted": true}, http.StatusCreated, &sv)
	deadline := time.Now().Add(within)
	for {
		var got struct {
			Status    string `json:"status"`
			ToolCount int    `json:"tool_count"`
		}
		p.do(tb, token, http.MethodGet, "/api/v1/servers/"+sv.ID, nil, http.StatusOK, &got)
		if got.Status == "connected" && got.ToolCount == tools {
			return sv.ID
		}
		if time.Now().After(deadline) {
			tb.Fatalf("server %s: %s with %d tools after %s, want connected with %d", name, got.Status, got.ToolCount, within, tools)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchEnable enables the tool qualified (once discovered and validated).
func benchEnable(tb testing.TB, p *serveProc, token, qualified string) {
	tb.Helper()
	server, _, _ := strings.Cut(qualified, "__")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out struct {
			Tools []struct {
				ID            string `json:"id"`
				QualifiedName string `json:"qualified_name"`
				Status        string `json:"status"`
			} `json:"tools"`
		}
		p.do(tb, token, http.MethodGet, "/api/v1/tools?limit=100&server="+server, nil, http.StatusOK, &out)
		for _, tl := range out.Tools {
			if tl.QualifiedName == qualified && tl.Status != "discovered" && tl.Status != "validating" {
				p.do(tb, token, http.MethodPost, "/api/v1/tools/"+tl.ID+"/enable", map[string]any{}, http.StatusOK, nil)
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the tool %s was never discovered", qualified)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchCallAPI is one LOW call through POST /api/v1/tools/call on addr.
func benchCallAPI(c *http.Client, addr, token string, body []byte) error {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/tools/call", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", addr, res.StatusCode, raw)
	}
	return nil
}

// BenchmarkReplicas is P10 (issue #23): calls/s through POST /api/v1/tools/call with
// 64 callers, first on one `serve` alone, then spread round-robin over three `serve`
// processes on the same external database (each its own data dir, one shared secret
// key). The upstream is the in-repo Go MCP server over streamable HTTP in this
// process, which costs next to nothing, so Toolwarden and its database are what is
// measured. "replicas=3" reports ratio: its calls/s ÷ replicas=1's. On a 2-core
// machine the three replicas, the database and the callers share the same two cores,
// so the ratio says what replication costs there, not what more machines would give.
//
//	go test ./cmd/toolwarden -run '^$' -bench 'Replicas' -count=1
func BenchmarkReplicas(b *testing.B) {
	url := dbtest.NewURL(b)
	appURL := dbtest.AppURL(b, url)
	key := filepath.Join(dbtest.TempDir(b), "secret.key")
	dbFlags := []string{"--database-url", appURL, "--migrate-database-url", url, "--secret-key-file", key}
	up := mcptest.StartHTTP(b, &mcptest.Options{Name: "bench"})

	first, _ := benchStartServe(b, dbtest.TempDir(b), dbFlags...)
	token := benchToken(b, "--data-dir", dbtest.TempDir(b), "--database-url", appURL)
	benchRegister(b, first, token, "bench", up.URL(), 5, 60*time.Second)
	benchEnable(b, first, token, "bench__echo")
	body := []byte(`{"tool":"bench__echo","arguments":{"message":"hi"}}`)
	ready := func(p *serveProc) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := benchCallAPI(http.DefaultClient, p.addr, token, body)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("replica %s never answered a call: %v\n%s", p.addr, err, p.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ready(first)
	replicas := []*serveProc{first}
	var oneRate float64
	for _, n := range []int{1, 3} {
		for len(replicas) < n {
			p, _ := benchStartServe(b, dbtest.TempDir(b), dbFlags...)
			ready(p)
			replicas = append(replicas, p)
		}
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := range 64 {
				addr := replicas[i%len(replicas)].addr
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := benchCallAPI(client, addr, token, body); err != nil {
							failed.Store(err)
							return
						}
					}
				})
			}
			wg.Wait()
			took := time.Since(start)
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			rate := float64(b.N) / took.Seconds()
			b.ReportMetric(rate, "calls/s")
			if n == 1 {
				oneRate = rate
			} else if oneRate > 0 {
				b.ReportMetric(rate/oneRate, "ratio")
			}
		})
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	dbtest.PrintSettings(b, conn)
}
