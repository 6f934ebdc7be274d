package main

import (
	"fmt"
	"strings"
)

// BuiltinRow is one row of the built-in tools' table: an operation of seed 001's
// table of timings, measured by the benchmarks of services/builtin. These have no
// target of issue #23, so the table gives seed 001's figure beside the measured one
// and no verdict.
type BuiltinRow struct {
	Op, Seed, Benchmark string
	// Eval returns the measured text; ok is false when the run did not measure it.
	Eval func(r *Run) (measured string, ok bool)
}

// latency reads a benchmark's p50-ms and p95-ms.
func latency(name string) func(r *Run) (string, bool) {
	return func(r *Run) (string, bool) {
		p50, ok1 := r.Get(name, "p50-ms")
		p95, ok2 := r.Get(name, "p95-ms")
		if !ok1 || !ok2 {
			return "", false
		}
		return fmt.Sprintf("p50 %s ms, p95 %s ms", figure(p50), figure(p95)), true
	}
}

// BuiltinRows are the rows of the built-in tools' table, in order; the first cell
// names the row when a later run of a subset keeps it.
var BuiltinRows = []BuiltinRow{
	{Op: "read_file 1 KiB", Seed: "1–5 ms (100 lines)",
		Benchmark: "`BenchmarkReadFileSmall` (services/builtin/bench_test.go)", Eval: latency("BenchmarkReadFileSmall")},
	{Op: "read_file 10 MiB with a limit (1,000 lines from line 50,000)", Seed: "10–50 ms (1,000+ lines)",
		Benchmark: "`BenchmarkReadFileLarge` (services/builtin/bench_test.go)", Eval: latency("BenchmarkReadFileLarge")},
	{Op: "grep_search over 10,000 files", Seed: "50–200 ms (depends on the workspace)",
		Benchmark: "`BenchmarkGrepSearch10kFiles` (services/builtin/bench_test.go)",
		Eval: func(r *Run) (string, bool) {
			s, ok := latency("BenchmarkGrepSearch10kFiles")(r)
			if !ok {
				return "", false
			}
			if rate, ok := r.Get("BenchmarkGrepSearch10kFiles", "files/s"); ok {
				s += fmt.Sprintf(" (%s files/s)", num(rate, 0))
			}
			return s, true
		}},
	{Op: "run_command round trip (`echo hello`)", Seed: "100 ms–5 s (depends on the command)",
		Benchmark: "`BenchmarkRunCommand` (services/builtin/terminal_bench_test.go)", Eval: latency("BenchmarkRunCommand")},
	{Op: "PTY output throughput", Seed: "—",
		Benchmark: "`BenchmarkPTYThroughput` (services/builtin/terminal_bench_test.go)",
		Eval: func(r *Run) (string, bool) {
			v, ok := r.Get("BenchmarkPTYThroughput", "MB/s")
			if !ok {
				return "", false
			}
			return fmt.Sprintf("%s MB/s (1 MiB of output per round, read into the session's buffer)", figure(v)), true
		}},
}

const builtinHeading = "## Built-in tools"

// previousBuiltinRows reads the built-in tools' rows of an earlier document, by
// operation: cells measured and run.
func previousBuiltinRows(doc string) map[string][2]string {
	known := map[string]bool{}
	for _, b := range BuiltinRows {
		known[b.Op] = true
	}
	rows := map[string][2]string{}
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if known[cells[0]] {
			rows[cells[0]] = [2]string{cells[2], cells[4]}
		}
	}
	return rows
}

// renderBuiltin writes the built-in tools' table: this run's figures, else the
// previous document's, else "not measured". It returns how many rows this run
// measured and adds the dates of the earlier runs kept rows come from to kept.
func renderBuiltin(w *strings.Builder, r *Run, date, previous string, kept map[string]bool) (measured int) {
	prev := previousBuiltinRows(previous)
	w.WriteString(builtinHeading + "\n\n")
	w.WriteString("The built-in server's operations (services/builtin, called through its in-process MCP\n")
	w.WriteString("server) beside the timings expected of the same operations. They have no target, so\n")
	w.WriteString("no verdict.\n\n")
	w.WriteString("| operation | expected | measured | benchmark | run |\n|---|---|---|---|---|\n")
	for _, b := range BuiltinRows {
		got, run := "not measured", "—"
		if s, ok := b.Eval(r); ok {
			got, run = s, date
			measured++
		} else if p, ok := prev[b.Op]; ok {
			got, run = p[0], p[1]
			kept[p[1]] = true
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", b.Op, b.Seed, got, b.Benchmark, run)
	}
	w.WriteString("\n")
	return measured
}
