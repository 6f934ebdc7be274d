package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// BenchmarkServeStartup is P7 (issue #23): `toolwarden serve` as a process of its own
// (what `make run` starts after its build), with the embedded PostgreSQL on its durable
// settings, timed from the process's start to its ready file (written once it listens).
//
//   - fresh: an empty data directory and the cluster template `make build` makes
//     (bin/pg-template; made here before the timer starts), so the time includes copying
//     the migrated cluster, starting it and the first admin: a first `make run`
//     (s-to-ready). Taking turns with those starts, the same without a template (an
//     installed binary without one), so initdb and every migration (initdb-s-to-ready).
//
//     Both report the median of their starts, and the slowest (max-). Note for reading the
//     figures: on the development machine's ext4 (no journal), for some minutes after
//     thousands of files were removed (a test run, a benchmark's clean-up), creating a
//     file costs about 1 ms instead of 50 µs, and a cluster is 1,000–1,500 files.
//
//   - restart: the data directory of a serve that ran and stopped: every later `make run`.
//
//   - tools=10000: a fresh serve given a streamable HTTP server with 10,000 tools (the
//     in-repo Go server, in this process); once they are discovered and stored and the
//     tools page was asked for, the serve process's resident memory (VmRSS of
//     /proc/<pid>/status, the Go process only: the embedded PostgreSQL runs as processes
//     of its own): rss-MB right after the discovery, rss-idle-MB once the process has
//     been idle for 5 s (internal/gctune gives the memory a burst left free back after
//     3 idle seconds), and its peak (VmHWM).
//
//     go test ./cmd/toolwarden -run '^$' -bench 'ServeStartup' -count=1
func BenchmarkServeStartup(b *testing.B) {
	tpl := filepath.Join(dbtest.TempDir(b), "pg-template")
	if _, err := db.MakeTemplate(context.Background(), tpl, slog.New(slog.DiscardHandler)); err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		var times, initdb []time.Duration
		for b.Loop() {
			// Five starts of each a round, taking turns (a start is a second or less,
			// so b.Loop would stop at one, and one start decides nothing on a shared
			// machine); only the starts from the template are timed.
			for i := range 10 {
				b.StopTimer()
				dir := dbtest.TempDir(b)
				template := tpl
				if i%2 == 1 {
					template = ""
				} else {
					b.StartTimer()
				}
				p, took := benchStartServe(b, dir, "--pg-template", template)
				b.StopTimer()
				if template == "" {
					initdb = append(initdb, took)
				} else {
					times = append(times, took)
				}
				p.stop()
				b.StartTimer()
			}
		}
		benchReportSeconds(b, times, "s-to-ready")
		benchReportSeconds(b, initdb, "initdb-s-to-ready")
	})
	b.Run("restart", func(b *testing.B) {
		dir := dbtest.TempDir(b)
		p, _ := benchStartServe(b, dir)
		p.stop()
		var times []time.Duration
		for b.Loop() {
			p, took := benchStartServe(b, dir)
			b.StopTimer()
			times = append(times, took)
			p.stop()
			b.StartTimer()
		}
		benchReportSeconds(b, times, "s-to-ready")
	})
	b.Run("tools=10000", func(b *testing.B) {
		up := mcptest.StartHTTP(b, &mcptest.Options{Name: "big", Generated: 10000 - 5})
		for b.Loop() {
			b.StopTimer()
			dir := dbtest.TempDir(b)
			p, _ := benchStartServe(b, dir, "--pg-template", tpl)
			token := benchToken(b, "--data-dir", dir)
			// Timed: registering the server until its 10,000 tools are stored.
			b.StartTimer()
			start := time.Now()
			benchRegister(b, p, token, "big", up.URL(), 10000, 5*time.Minute)
			discovered := time.Since(start)
			b.StopTimer()
			// What a person does next: the tools page, over all of them.
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/api/v1/tools?limit=100", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
				b.Fatalf("tools list: %v %v", res, err)
			} else {
				res.Body.Close()
			}
			rss, _ := benchRSS(b, p.cmd.Process.Pid)
			time.Sleep(5 * time.Second)
			idle, hwm := benchRSS(b, p.cmd.Process.Pid)
			p.stop()
			b.ReportMetric(rss, "rss-MB")
			b.ReportMetric(idle, "rss-idle-MB")
			b.ReportMetric(hwm, "peak-rss-MB")
			b.ReportMetric(discovered.Seconds(), "s-to-discover")
			b.StartTimer()
		}
	})
}

// benchReportSeconds reports the median of times as unit (seconds), and the slowest as
// max-<unit>.
func benchReportSeconds(b *testing.B, times []time.Duration, unit string) {
	if len(times) == 0 {
		return
	}
	s := slices.Clone(times)
	slices.Sort(s)
	b.ReportMetric(s[len(s)/2].Seconds(), unit)
	b.ReportMetric(s[len(s)-1].Seconds(), "max-"+unit)
}

// benchRSS reads VmRSS and VmHWM of pid in MB (10^6 bytes).
func benchRSS(tb testing.TB, pid int) (rss, hwm float64) {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			tb.Fatalf("%s: %q", k, v)
		}
		if k == "VmRSS" {
			rss = kb * 1024 / 1e6
		} else {
			hwm = kb * 1024 / 1e6
		}
	}
	return rss, hwm
}
