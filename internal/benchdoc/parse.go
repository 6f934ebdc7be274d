package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Run is what one `go test -bench` output holds.
type Run struct {
	// Results maps a benchmark's full name (sub-benchmarks included, without the
	// -GOMAXPROCS suffix) to its figures, unit → value ("ns/op", "p99-ms", "calls/s").
	Results map[string]map[string]float64
	// Order lists the names in the order they were reported.
	Order []string
	// CPU is the "cpu:" line of the output (empty if none).
	CPU string
	// Database is the database's version and durability settings, from the line the
	// benchmarks that use one print ("PostgreSQL 15.18 (...), fsync=on, ...").
	Database Database
	// Started is when make bench started the run ("2006-01-02 15:04 UTC"), if it said.
	Started string
	// LoadStart and LoadEnd are the load averages make bench recorded around the run.
	LoadStart, LoadEnd string
	// Failed lists the packages whose benchmarks failed ("FAIL <pkg>").
	Failed []string
}

// Database is the database's version and settings as a benchmark printed them.
type Database struct {
	Version, Fsync, SynchronousCommit, FullPageWrites string
}

var (
	// "BenchmarkX/sub-2   \t  100\t  123 ns/op\t  1.2 p50-ms": name, iterations, figures.
	resultRE = regexp.MustCompile(`^(Benchmark\S*?)(?:-\d+)?\s+(\d+)\s+(-?[\d.]+(?:e[+-]?\d+)?\s+\S+.*)$`)
	// The name alone: the figures follow on a later line when the benchmark logged.
	nameRE = regexp.MustCompile(`^(Benchmark\S*?)(?:-\d+)?\s*$`)
	// The figures alone, after such a name.
	figuresRE = regexp.MustCompile(`^\s*(\d+)\s+(-?[\d.]+(?:e[+-]?\d+)?\s+\S+.*)$`)
	dbRE      = regexp.MustCompile(`PostgreSQL (.+?), fsync=(\w+), synchronous_commit=(\w+)(?:, full_page_writes=(\w+))?`)
)

// Parse reads the text output of `go test -bench` (several packages, in any order).
func Parse(r io.Reader) (*Run, error) {
	run := &Run{Results: map[string]map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	pending := ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "cpu: "):
			run.CPU = strings.TrimPrefix(line, "cpu: ")
			continue
		case strings.HasPrefix(line, "benchdoc-start: "):
			run.Started = strings.TrimSpace(strings.TrimPrefix(line, "benchdoc-start: "))
			continue
		case strings.HasPrefix(line, "benchdoc-load-start: "):
			run.LoadStart = loadavg(strings.TrimPrefix(line, "benchdoc-load-start: "))
			continue
		case strings.HasPrefix(line, "benchdoc-load-end: "):
			run.LoadEnd = loadavg(strings.TrimPrefix(line, "benchdoc-load-end: "))
			continue
		case strings.HasPrefix(line, "FAIL\t"):
			run.Failed = append(run.Failed, strings.Fields(line)[1])
			continue
		}
		if m := dbRE.FindStringSubmatch(line); m != nil {
			run.Database = Database{Version: m[1], Fsync: m[2], SynchronousCommit: m[3], FullPageWrites: m[4]}
			continue
		}
		if m := resultRE.FindStringSubmatch(line); m != nil {
			run.add(m[1], m[3])
			pending = ""
			continue
		}
		if m := nameRE.FindStringSubmatch(line); m != nil {
			pending = m[1]
			continue
		}
		if m := figuresRE.FindStringSubmatch(line); m != nil && pending != "" {
			run.add(pending, m[2])
			pending = ""
		}
	}
	return run, sc.Err()
}

// add records the figures ("123 ns/op\t1.2 p50-ms") of name.
func (r *Run) add(name, figures string) {
	f := strings.Fields(figures)
	m := map[string]float64{}
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			continue
		}
		m[f[i+1]] = v
	}
	if _, seen := r.Results[name]; !seen {
		r.Order = append(r.Order, name)
	}
	r.Results[name] = m // with -count > 1, the last run's
}

// loadavg keeps the three load averages of a /proc/loadavg line.
func loadavg(s string) string {
	f := strings.Fields(s)
	if len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return strings.TrimSpace(s)
}

// Get returns name's figure in unit.
func (r *Run) Get(name, unit string) (float64, bool) {
	v, ok := r.Results[name][unit]
	return v, ok
}

// Max returns the largest figure in unit among the benchmarks whose names start with
// prefix, and the name it came from.
func (r *Run) Max(prefix, unit string) (float64, string, bool) {
	best, from, ok := 0.0, "", false
	for _, name := range r.Order {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if v, has := r.Results[name][unit]; has && (!ok || v > best) {
			best, from, ok = v, name, true
		}
	}
	return best, from, ok
}
