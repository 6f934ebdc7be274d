package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func parseSample(t *testing.T) *Run {
	t.Helper()
	f, err := os.Open("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The sample holds results on one line and split by a log line, several packages,
// the database line, the load averages and a failed package.
func TestParse(t *testing.T) {
	r := parseSample(t)
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkReplicas/replicas=3", "ratio", 0.8136},
		{"BenchmarkReplicas/replicas=1", "calls/s", 870.8},
		{"BenchmarkServeStartup/tools=10000", "rss-MB", 155.5},
		{"BenchmarkToolCall/mcptest_http/mcp/callers=1", "added-p50-ms", 0.3},
		{"BenchmarkHeldCallApproval", "p99-ms", 77.41},
		{"BenchmarkHeldCallApproval", "ns/op", 43945408},
	} {
		if got, ok := r.Get(c.name, c.unit); !ok || got != c.want {
			t.Errorf("%s %s: got %v (found %v), want %v", c.name, c.unit, got, ok, c.want)
		}
	}
	if r.CPU != "AMD EPYC" || r.LoadStart != "1.50 2.25 3.00" || r.LoadEnd != "4.00 3.00 2.50" {
		t.Errorf("cpu %q, load %q → %q", r.CPU, r.LoadStart, r.LoadEnd)
	}
	want := Database{Version: "15.18 (Debian 15.18-0+deb12u1)", Fsync: "on", SynchronousCommit: "on", FullPageWrites: "on"}
	if r.Database != want {
		t.Errorf("database: got %+v, want %+v", r.Database, want)
	}
	if len(r.Failed) != 1 || r.Failed[0] != "github.com/toolwarden/toolwarden/web" {
		t.Errorf("failed: %v", r.Failed)
	}
	if v, from, ok := r.Max("BenchmarkAuditPage/", "p95-ms"); !ok || v != 45.5 || from != "BenchmarkAuditPage/q" {
		t.Errorf("max p95: %v from %s (%v)", v, from, ok)
	}
}

func row(t *testing.T, doc, id string) string {
	t.Helper()
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, "| "+id+" |") {
			return line
		}
	}
	t.Fatalf("no row %s in:\n%s", id, doc)
	return ""
}

func TestRender(t *testing.T) {
	r := parseSample(t)
	m := Machine{CPU: "AMD EPYC 7B13", Cores: 2, RAM: "23.4 GiB", Kernel: "Linux 6.1.0", Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64"}
	now := time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)
	previous := "| P3 | old | old | p95 4.2 ms | old | met | 2026-11-01 10:00 UTC |\n" +
		"| P1 | old | old | +9 ms | old | not met | 2026-11-01 10:00 UTC |\n"
	// A run of one half of P6 keeps the previous row whole.
	half := &Run{Results: map[string]map[string]float64{"BenchmarkVerify/workers=2": {"rows/s": 1, "rows": 1}}}
	if d, _ := Render(half, m, now, "make bench", nil, "| P6 | a | b | p95 9 ms; verify 3 rows/s | c | met | 2026-11-01 10:00 UTC |\n"); !strings.Contains(row(t, d, "P6"), "p95 9 ms; verify 3 rows/s") {
		t.Errorf("a run of verify alone replaced P6's row: %s", row(t, d, "P6"))
	}
	doc, measured := Render(r, m, now, "make bench", map[string]string{"TOOLWARDEN_BENCH_AUDIT_ROWS": "1000000"}, previous)
	// P1, P6, P7, P8, P9, P10 are in the sample; P2 lacks mcptest_http but has its
	// own upstream; P3, P4, P5 are not.
	if measured != 7 {
		t.Errorf("measured %d targets, want 7:\n%s", measured, doc)
	}
	for id, want := range map[string][]string{
		"P1":  {"+0.250 ms (mcptest_http)", "| met |", "| 2026-11-28 16:55 UTC |"},
		"P2":  {"0.82× at 4,100 calls/s (everything_stdio)", "| not met |"},
		"P3":  {"p95 4.2 ms", "| met | 2026-11-01 10:00 UTC |"}, // kept from the previous document
		"P4":  {"| not measured | — |"},
		"P6":  {"p95 45.5 ms at worst (filter q) at 1,000,000 rows; verify 2,500,000 rows/s over 1,000,000 rows; reading the rows alone, hashing nothing, caps this machine at 1,008,522 rows/s", "| reported |"},
		"P7":  {"2.49 s on an empty data dir", "0.31 s on an existing one", "RSS 156 MB", "| not met |"},
		"P8":  {"+0.300 ms (mcptest_http); 0.78× at 3,900 calls/s", "| met |"},
		"P9":  {"p99 77.4 ms (p50 39.1) over 100 held calls", "| met |"},
		"P10": {"0.81× (708 calls/s on 3 replicas, 871 on 1; 2 cores", "| reported |"},
	} {
		line := row(t, doc, id)
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", id, line, w)
			}
		}
	}
	for _, w := range []string{
		"- machine: AMD EPYC 7B13, 2 cores, 23.4 GiB RAM, Linux 6.1.0, linux/amd64",
		"- PostgreSQL: 15.18 (Debian 15.18-0+deb12u1); fsync=on, synchronous_commit=on, full_page_writes=on (durable",
		"at the start 1.50 2.25 3.00, at the end 4.00 3.00 2.50",
		"`TOOLWARDEN_BENCH_AUDIT_ROWS=1000000`",
		"audit log of the `/audit` benchmark: 1,000,000 rows (fewer than P6's 10 M",
		"FAILED in this run: github.com/toolwarden/toolwarden/web",
		"it measured 7 of the 10 targets",
		"| `BenchmarkReplicas/replicas=3` | 708.4 calls/s, 0.814 ratio |",
	} {
		if !strings.Contains(doc, w) {
			t.Errorf("the document lacks %q:\n%s", w, doc)
		}
	}
	// The document it wrote is read back: a later run of a subset keeps its rows.
	again, _ := Render(&Run{Results: map[string]map[string]float64{}}, m, now.Add(time.Hour), "make bench", nil, doc)
	if got, want := row(t, again, "P9"), row(t, doc, "P9"); got != want {
		t.Errorf("a run without P9 changed its row:\n got %s\nwant %s", got, want)
	}
	// ... and the description of the run its rows come from, figures included, after its own.
	_, earlier, _ := strings.Cut(doc, "## The run of 2026-11-28 16:55 UTC")
	this := strings.Index(again, "## The run of 2026-11-28 18:00 UTC")
	kept := strings.Index(again, "## The run of 2026-11-28 16:55 UTC"+earlier)
	if this < 0 || kept < this {
		t.Errorf("a later run of a subset: its section at %d, the earlier run's kept whole at %d:\n%s", this, kept, again)
	}
	if strings.Contains(again, "2026-11-01 10:00 UTC\n") {
		t.Errorf("a run no row came from any more is described")
	}
	// The same run rendered again describes itself once.
	full, _ := Render(r, m, now.Add(2*time.Hour), "make bench", nil, again)
	if strings.Count(full, "## The run of ") != 1 {
		t.Errorf("after a full run, %d runs are described", strings.Count(full, "## The run of "))
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{1234567.891: "1,234,568", 999: "999", -1234.5: "-1,234", 0.5: "0"} {
		if got := num(v, 0); got != want {
			t.Errorf("num(%v): got %s, want %s", v, got, want)
		}
	}
	if got := num(12345.678, 2); got != "12,345.68" {
		t.Errorf("num 2 decimals: %s", got)
	}
}

// A run that measured no target (a failed benchmark, a subset of others) leaves the
// document as it was; one that did rewrites it.
func TestRunWritesOnlyWhatItMeasured(t *testing.T) {
	dir := t.TempDir()
	in, out := dir+"/bench.txt", dir+"/benchmarks.md"
	if err := os.WriteFile(in, []byte("pkg: x\nBenchmarkOther-2 \t 10\t 100 ns/op\t 3.0 widgets/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out, "make bench"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != "before\n" {
		t.Errorf("a run without targets rewrote the document: %q", got)
	}
	if err := run("testdata/bench.txt", out, "make bench"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !strings.Contains(string(got), "| P10 |") {
		t.Errorf("a run with targets did not write the table:\n%s", got)
	}
	if err := run("", out, "make bench"); err == nil || !strings.Contains(err.Error(), "-in") {
		t.Errorf("no -in: got %v, want an error naming -in", err)
	}
}

// builtinSample is the output of the built-in tools' benchmarks (services/builtin).
const builtinSample = `benchdoc-start: 2026-11-29 09:00 UTC
pkg: github.com/toolwarden/toolwarden/services/builtin
BenchmarkRunCommand-2           	      20	  29807855 ns/op	        20.42 p50-ms	        85.55 p95-ms
BenchmarkPTYThroughput-2        	      20	 174343032 ns/op	   6.01 MB/s
BenchmarkReadFileSmall-2        	      20	   2064583 ns/op	         0.3301 p50-ms	        10.51 p95-ms
BenchmarkReadFileLarge-2        	      20	  21698995 ns/op	        10.81 p50-ms	        79.41 p95-ms
BenchmarkGrepSearch10kFiles-2   	      20	 235060205 ns/op	     44735 files/s	       223.5 p50-ms	       349.1 p95-ms
PASS
`

func builtinRow(t *testing.T, doc, op string) string {
	t.Helper()
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(line, "| "+op+" |") {
			return line
		}
	}
	t.Fatalf("no row %q in:\n%s", op, doc)
	return ""
}

// The built-in tools' benchmarks fill their own table (seed 001's operations), a run
// of them alone counts as measuring something, and a later run of other benchmarks
// keeps their rows and the description of the run they come from.
func TestRenderBuiltin(t *testing.T) {
	r, err := Parse(strings.NewReader(builtinSample))
	if err != nil {
		t.Fatal(err)
	}
	m := Machine{CPU: "Xeon", Cores: 2, Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64"}
	now := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	doc, measured := Render(r, m, now, "BENCH=ReadFile make bench", nil, "")
	if measured != len(BuiltinRows) {
		t.Errorf("measured %d rows, want the %d built-in ones:\n%s", measured, len(BuiltinRows), doc)
	}
	for op, want := range map[string]string{
		"read_file 1 KiB": "| p50 0.33 ms, p95 10.51 ms | `BenchmarkReadFileSmall` (services/builtin/bench_test.go) | 2026-11-29 09:00 UTC |",
		"read_file 10 MiB with a limit (1,000 lines from line 50,000)": "| p50 10.81 ms, p95 79.41 ms |",
		"grep_search over 10,000 files":                                "| p50 223.5 ms, p95 349.1 ms (44,735 files/s) |",
		"run_command round trip (`echo hello`)":                        "| p50 20.42 ms, p95 85.55 ms |",
		"PTY output throughput":                                        "| 6.01 MB/s (1 MiB of output per round",
	} {
		if line := builtinRow(t, doc, op); !strings.Contains(line, want) {
			t.Errorf("%s: %q lacks %q", op, line, want)
		}
	}
	for _, w := range []string{builtinHeading + "\n", "it measured 0 of the 10 targets", "| P1 |"} {
		if !strings.Contains(doc, w) {
			t.Errorf("the document lacks %q:\n%s", w, doc)
		}
	}
	if strings.Contains(doc, "built-in tools' rows; the others") {
		t.Errorf("a run of every built-in benchmark says some rows come from earlier runs:\n%s", doc)
	}
	// The table comes before the run's description, which ends at the next "## ".
	if b, run := strings.Index(doc, builtinHeading), strings.Index(doc, runHeading); b < 0 || run < b {
		t.Errorf("built-in table at %d, run section at %d", b, run)
	}

	// A later run of the P-targets alone keeps the built-in rows and their run's section.
	later, _ := Render(parseSample(t), m, now.Add(24*time.Hour), "make bench", nil, doc)
	for _, b := range BuiltinRows {
		if got, want := builtinRow(t, later, b.Op), builtinRow(t, doc, b.Op); got != want {
			t.Errorf("a run without %s changed its row:\n got %s\nwant %s", b.Op, got, want)
		}
	}
	if !strings.Contains(later, runHeading+"2026-11-29 09:00 UTC") || !strings.Contains(later, "it measured 0 of the 5 built-in tools' rows") {
		t.Errorf("the run the built-in rows come from is not described:\n%s", later)
	}
	// A run of one of them replaces that row only.
	one, _ := Parse(strings.NewReader("benchdoc-start: 2026-12-01 08:00 UTC\nBenchmarkReadFileSmall-2 \t 20\t 1 ns/op\t 0.5 p50-ms\t 0.9 p95-ms\n"))
	third, n := Render(one, m, now.Add(48*time.Hour), "make bench", nil, later)
	if n != 1 || !strings.Contains(builtinRow(t, third, "read_file 1 KiB"), "| p50 0.5 ms, p95 0.9 ms |") {
		t.Errorf("a run of one built-in benchmark (%d measured): %s", n, builtinRow(t, third, "read_file 1 KiB"))
	}
	if got, want := builtinRow(t, third, "PTY output throughput"), builtinRow(t, doc, "PTY output throughput"); got != want {
		t.Errorf("a run of read_file changed the PTY row:\n got %s\nwant %s", got, want)
	}

	// run() writes the document for a run of the built-in benchmarks alone.
	dir := t.TempDir()
	in, out := dir+"/bench.txt", dir+"/benchmarks.md"
	if err := os.WriteFile(in, []byte(builtinSample), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out, "make bench"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !strings.Contains(string(got), "| read_file 1 KiB |") {
		t.Errorf("a run of the built-in benchmarks did not write the document:\n%s", got)
	}
}
