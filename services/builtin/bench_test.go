package builtin_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The file operations' timings (seed 001's table), through the MCP server in process:
// read_file of a small file, of a 10 MiB one with a limit, and grep_search over
// 10,000 files. Each reports named figures (p50-ms, p95-ms per call; files/s for grep)
// because internal/benchdoc leaves ns/op out of docs/benchmarks.md.

// opTimes collects one duration per iteration.
type opTimes []time.Duration

// percentile is the nearest-rank percentile p (0..1) in milliseconds.
func (d opTimes) percentile(p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := max(0, min(int(math.Ceil(p*float64(len(s))))-1, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// report reports p50-ms and p95-ms of the iterations.
func (d opTimes) report(b *testing.B) {
	b.ReportMetric(d.percentile(0.50), "p50-ms")
	b.ReportMetric(d.percentile(0.95), "p95-ms")
}

func BenchmarkReadFileSmall(b *testing.B) {
	f := newFilesFx(b)
	line := strings.Repeat("x", 63) + "\n"
	if err := os.WriteFile(filepath.Join(f.ws("c1"), "small.txt"), []byte(strings.Repeat(line, 16)), 0o644); err != nil {
		b.Fatal(err)
	}
	a := args{"operation": "read_file", "filePath": "small.txt"}
	var times opTimes
	for b.Loop() {
		start := time.Now()
		res := f.call("c1", a)
		times = append(times, time.Since(start))
		if res.IsError {
			b.Fatal(text(res))
		}
	}
	times.report(b)
}

func BenchmarkReadFileLarge(b *testing.B) {
	f := newFilesFx(b)
	line := strings.Repeat("y", 99) + "\n"
	if err := os.WriteFile(filepath.Join(f.ws("c1"), "large.txt"), []byte(strings.Repeat(line, 10<<20/100)), 0o644); err != nil {
		b.Fatal(err)
	}
	a := args{"operation": "read_file", "filePath": "large.txt", "offset": 50000, "limit": 1000}
	var times opTimes
	for b.Loop() {
		start := time.Now()
		res := f.call("c1", a)
		times = append(times, time.Since(start))
		if res.IsError {
			b.Fatal(text(res))
		}
	}
	times.report(b)
}

func BenchmarkGrepSearch10kFiles(b *testing.B) {
	f := newFilesFx(b)
	ws := f.ws("c1")
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			body := fmt.Sprintf("package pkg%03d\n\n// file %d\nfunc F%d() int { return %d }\n", d, i, i, i)
			if d == 42 && i == 7 {
				body += "// NEEDLE here\n"
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", i)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	a := args{"operation": "grep_search", "pattern": "NEEDLE"}
	var times opTimes
	for b.Loop() {
		start := time.Now()
		res := f.call("c1", a)
		times = append(times, time.Since(start))
		if res.IsError || !strings.Contains(text(res), "pkg042/f007.go:5:") {
			b.Fatal(text(res))
		}
	}
	times.report(b)
	// Files searched per second, at the median search.
	b.ReportMetric(10000/(times.percentile(0.50)/1000), "files/s")
}
