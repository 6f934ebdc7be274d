package web_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

var dashboardTopics = regexp.MustCompile(`data-topics="([^"]*)"`)

// Issue #21: open dashboards must cost little while nobody looks at them. Calls/s
// through POST /api/v1/tools/call with 64 callers, first with no websocket client, then
// with 1,000 idle dashboards connected (each subscribed to what the dashboard page
// follows: sign-ins and the audit log, so every batch of calls reaches all of them).
// The figure to watch is the ratio: the same calls/s with and without them.
//
//	go test ./web -run '^$' -bench 'CallsWithIdleDashboards' -count=1
func BenchmarkCallsWithIdleDashboards(b *testing.B) {
	// One admin stands in for as many people as there are clients: no cap on one person's sockets.
	srv := webtest.Start(b, &webtest.Options{Router: &router.Options{UserRate: -1}, SocketsPerPerson: -1, SocketsPerProcess: -1})
	liveServer(b, srv, "bench", true, "echo")
	ctx := context.Background()
	admin, err := srv.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		b.Fatal(err)
	}
	tok, _, err := srv.Auth.CreateToken(ctx, audit.System, admin.ID, auth.NewToken{Name: "bench dashboards"})
	if err != nil {
		b.Fatal(err)
	}
	browser := srv.Login(b, "admin", webtest.AdminPassword)
	res := srv.Get(b, browser, "/")
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := dashboardTopics.FindSubmatch(page)
	if m == nil {
		b.Fatal("the dashboard names no topics")
	}
	topics := strings.Split(html.UnescapeString(string(m[1])), ",")
	var received atomic.Int64
	var conns []*websocket.Conn
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for _, clients := range []int{0, 1000} {
		for len(conns) < clients {
			conns = append(conns, idleDashboard(b, srv, browser, topics, &received))
		}
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			received.Store(0)
			body := []byte(`{"tool":"bench__echo","arguments":{"message":"hi"}}`)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
			var next atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Value
			b.ResetTimer()
			start := time.Now()
			for range 64 {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/tools/call", bytes.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+tok)
						req.Header.Set("Content-Type", "application/json")
						res, err := client.Do(req)
						if err != nil {
							failed.Store(err)
							return
						}
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						if res.StatusCode != http.StatusOK {
							failed.Store(fmt.Errorf("HTTP %d", res.StatusCode))
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
			b.ReportMetric(float64(b.N)/took.Seconds(), "calls/s")
			b.ReportMetric(float64(received.Load())/took.Seconds(), "ws-msgs/s")
		})
	}
}

// idleDashboard opens a websocket as the dashboard does and reads (and drops) what
// comes, as an idle browser tab would.
func idleDashboard(b *testing.B, srv *webtest.Server, c *http.Client, topics []string, received *atomic.Int64) *websocket.Conn {
	b.Helper()
	h := wsHeader(srv, c)
	d := websocket.Dialer{EnableCompression: true, HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", h)
	if err != nil {
		b.Fatal(err)
	}
	last, err := srv.Bus.LatestID(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if err := conn.WriteJSON(map[string]any{"subscribe": topics, "last_id": last}); err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
			received.Add(1)
		}
	}()
	return conn
}
