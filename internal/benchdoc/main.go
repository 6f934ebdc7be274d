// Command benchdoc writes docs/benchmarks.md from the output of `make bench`: the table
// of the targets of issue #23 (P1–P10) with the figures measured, the table of the
// built-in tools' operations beside seed 001's timings, the machine and the database
// settings, and the date.
//
//	go run ./internal/benchdoc -in bin/bench.txt -out docs/benchmarks.md -command "make bench"
//
// It reads the text output of `go test -bench` (the named figures the benchmarks
// report with b.ReportMetric). A run of a subset (BENCH=regexp make bench) updates the
// rows of the targets it measured and keeps the others as the previous document had
// them, each with the date of the run that measured it.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	in := flag.String("in", "", "output of go test -bench (text)")
	out := flag.String("out", "docs/benchmarks.md", "the document to write (its table rows are kept for targets this run did not measure)")
	command := flag.String("command", "make bench", "the command that produced -in, as the document states it")
	flag.Parse()
	if err := run(*in, *out, *command); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

func run(in, out, command string) error {
	if in == "" {
		return fmt.Errorf("-in: the benchmark output file is required")
	}
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("-in: %w", err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		return fmt.Errorf("-in %s: %w", in, err)
	}
	var previous string
	if raw, err := os.ReadFile(out); err == nil {
		previous = string(raw)
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("-out: %w", err)
	}
	m := ThisMachine()
	m.CPU = firstNonEmpty(m.CPU, r.CPU)
	doc, measured := Render(r, m, time.Now().UTC(), command, benchEnv(), previous)
	if measured == 0 {
		fmt.Fprintf(os.Stderr, "benchdoc: this run measured none of the targets or built-in tools' rows; %s is left as it was\n", out)
		return nil
	}
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	fmt.Fprintf(os.Stderr, "benchdoc: wrote %s (%d of %d rows measured in this run)\n", out, measured, len(Targets)+len(BuiltinRows))
	return nil
}

// Machine describes where the benchmarks ran.
type Machine struct {
	CPU           string
	Cores         int
	RAM           string
	Kernel        string
	Go            string
	GOOS, GOARCH  string
	LoadAvgAtDocs string
}

// ThisMachine reads this machine's description (Linux's /proc).
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.RAM = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvgAtDocs = loadavg(string(raw))
	}
	return m
}

// benchEnv lists the environment variables that change what the benchmarks measure, as
// they were set for this run.
func benchEnv() map[string]string {
	env := map[string]string{}
	for _, k := range []string{"TOOLWARDEN_BENCH_AUDIT_ROWS", "TOOLWARDEN_TEST_DURABLE", "TOOLWARDEN_BENCH_WS_CLIENTS"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// previousRows reads the table rows of an earlier document, by target id.
func previousRows(doc string) map[string]Row {
	rows := map[string]Row{}
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "| P") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 7 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = Row{ID: cells[0], Measure: cells[1], Target: cells[2], Measured: cells[3], Benchmark: cells[4],
			Verdict: cells[5], Date: cells[6]}
	}
	return rows
}

// Render writes the document: every target's row and every built-in tool's row (this
// run's, else the previous document's, else "not measured"), the machine, the settings
// and the figures. measured counts the rows of both tables this run measured.
func Render(r *Run, m Machine, now time.Time, command string, env map[string]string, previous string) (doc string, measured int) {
	date := now.Format("2006-01-02 15:04 UTC")
	if r.Started != "" {
		date = r.Started
	}
	prev := previousRows(previous)
	kept := map[string]bool{} // dates of earlier runs some row still comes from
	var w strings.Builder
	w.WriteString("# Benchmarks\n\n")
	w.WriteString("Toolwarden's performance targets and what `make bench` measured. This file is written by\n")
	w.WriteString("`make bench` (`internal/benchdoc`, from the benchmarks' named figures): run it again rather than\n")
	w.WriteString("editing it. `BENCH=regexp make bench` runs a subset and updates only the rows it measured; the\n")
	w.WriteString("last column says which run each row comes from. What each benchmark does is said in its doc\n")
	w.WriteString("comment; [architecture.md](architecture.md#performance) says what keeps the figures low.\n\n")
	w.WriteString("| # | measure | target | measured | benchmark | verdict | run |\n|---|---|---|---|---|---|---|\n")
	for _, t := range Targets {
		row := Row{ID: t.ID, Measure: t.Measure, Target: t.Target, Benchmark: t.Benchmark, Verdict: "not measured", Date: "—", Measured: "—"}
		if s, v, ok := t.Eval(r, m); ok {
			row.Measured, row.Verdict, row.Date = s, v, date
			measured++
		} else if p, ok := prev[t.ID]; ok {
			row.Measured, row.Verdict, row.Date = p.Measured, p.Verdict, p.Date
			kept[p.Date] = true
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s | %s |\n", row.ID, row.Measure, row.Target, row.Measured, row.Benchmark, row.Verdict, row.Date)
	}
	w.WriteString("\nVerdicts: *met* and *not met* compare the figure with the target; *reported* is a figure the\n")
	w.WriteString("target only asks to report (P10 on fewer cores than three replicas, their database and the\n")
	w.WriteString("callers need), or one measured on a smaller set than the target names (P6 with\n")
	w.WriteString("`TOOLWARDEN_BENCH_AUDIT_ROWS` below 10 M). Where the JSON API and `/mcp` benchmarks measure two\n")
	w.WriteString("upstreams, latency targets are judged on `mcptest_http` (the in-repo Go server over HTTP, which\n")
	w.WriteString("costs next to nothing, so Toolwarden's own cost shows) and throughput on `everything_stdio`\n")
	w.WriteString("(server-everything over stdio, the upstream P2 names); both are shown.\n\n")
	targets := measured
	builtins := renderBuiltin(&w, r, date, previous, kept)
	measured += builtins

	fmt.Fprintf(&w, runHeading+"%s\n\n", date)
	fmt.Fprintf(&w, "- command: `%s`\n", command)
	if targets < len(Targets) {
		fmt.Fprintf(&w, "- it measured %d of the %d targets; the other rows come from the runs their last column names\n", targets, len(Targets))
	}
	if builtins < len(BuiltinRows) {
		fmt.Fprintf(&w, "- it measured %d of the %d built-in tools' rows; the others come from the runs their last column names\n", builtins, len(BuiltinRows))
	}
	fmt.Fprintf(&w, "- machine: %s, %d cores, %s RAM, %s, %s/%s\n", firstNonEmpty(m.CPU, "unknown CPU"), m.Cores,
		firstNonEmpty(m.RAM, "unknown"), firstNonEmpty(m.Kernel, "unknown kernel"), m.GOOS, m.GOARCH)
	fmt.Fprintf(&w, "- Go: %s\n", m.Go)
	if d := r.Database; d.Version != "" {
		durable := "durable: the settings of `toolwarden serve`"
		if d.Fsync != "on" || d.SynchronousCommit != "on" {
			durable = "NOT durable"
		}
		fmt.Fprintf(&w, "- PostgreSQL: %s; fsync=%s, synchronous_commit=%s", d.Version, d.Fsync, d.SynchronousCommit)
		if d.FullPageWrites != "" {
			fmt.Fprintf(&w, ", full_page_writes=%s", d.FullPageWrites)
		}
		fmt.Fprintf(&w, " (%s)\n", durable)
	} else {
		w.WriteString("- PostgreSQL: not reported by this run's benchmarks\n")
	}
	load := []string{}
	if r.LoadStart != "" {
		load = append(load, "at the start "+r.LoadStart)
	}
	if r.LoadEnd != "" {
		load = append(load, "at the end "+r.LoadEnd)
	}
	if len(load) > 0 {
		fmt.Fprintf(&w, "- load average (1, 5, 15 min; the machine is shared with other work): %s\n", strings.Join(load, ", "))
	}
	if len(env) > 0 {
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, fmt.Sprintf("`%s=%s`", k, env[k]))
		}
		fmt.Fprintf(&w, "- set for this run: %s\n", strings.Join(kv, ", "))
	}
	if rows, _, ok := r.Max("BenchmarkAuditPage/", "rows"); ok {
		fmt.Fprintf(&w, "- audit log of the `/audit` benchmark: %s rows", num(rows, 0))
		if rows < 10_000_000 {
			w.WriteString(" (fewer than P6's 10 M: `TOOLWARDEN_BENCH_AUDIT_ROWS` was set)")
		}
		w.WriteString("\n")
	}
	if len(r.Failed) > 0 {
		fmt.Fprintf(&w, "- packages whose benchmarks FAILED in this run: %s\n", strings.Join(r.Failed, ", "))
	}

	w.WriteString("\n### Every figure of the run\n\n")
	w.WriteString("The named figures each benchmark reported (ns/op and allocations left out).\n\n")
	w.WriteString("| benchmark | figures |\n|---|---|\n")
	for _, name := range r.Order {
		var units []string
		for u := range r.Results[name] {
			if u == "ns/op" || u == "B/op" || u == "allocs/op" {
				continue
			}
			units = append(units, u)
		}
		if len(units) == 0 {
			continue
		}
		sort.Strings(units)
		var parts []string
		for _, u := range units {
			parts = append(parts, figure(r.Results[name][u])+" "+u)
		}
		fmt.Fprintf(&w, "| `%s` | %s |\n", name, strings.Join(parts, ", "))
	}
	// The earlier runs rows still come from, as the previous document described them.
	for _, sec := range previousRuns(previous) {
		if sec.date != date && kept[sec.date] {
			w.WriteString("\n" + sec.text)
		}
	}
	return w.String(), measured
}

// runSection is one "## The run of …" section of an earlier document.
type runSection struct{ date, text string }

const runHeading = "## The run of "

// previousRuns reads the run sections of an earlier document, each up to the next
// second-level heading.
func previousRuns(doc string) []runSection {
	var out []runSection
	lines := strings.SplitAfter(doc, "\n")
	for i := 0; i < len(lines); i++ {
		date, ok := strings.CutPrefix(strings.TrimRight(lines[i], "\n"), runHeading)
		if !ok {
			continue
		}
		var b strings.Builder
		b.WriteString(lines[i])
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "## ") {
			i++
			b.WriteString(lines[i])
		}
		out = append(out, runSection{date: date, text: strings.TrimRight(b.String(), "\n") + "\n"})
	}
	return out
}

// figure formats a reported value with as many decimals as its size wants.
func figure(v float64) string {
	switch a := max(v, -v); {
	case a >= 1000:
		return num(v, 0)
	case a >= 100:
		return num(v, 1)
	case a >= 1:
		return num(v, 2)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
