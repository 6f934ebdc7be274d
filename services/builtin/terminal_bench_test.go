package builtin

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// BenchmarkRunCommand is run_command's round trip: bash -c starts in the workspace,
// confined as serve runs it (the data dir and the built-in root hidden but for the
// workspace; where this machine has namespaces), runs, is reaped, and its output and
// exit code come back.
func BenchmarkRunCommand(b *testing.B) {
	data := b.TempDir()
	root := filepath.Join(data, "workspaces")
	ws := filepath.Join(root, "bench")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(b), Confiner: confine.New(confine.Spec{Hide: []string{data, root}})})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	b.Logf("confinement: %s", ts.Confinement())
	run := TerminalTool(ts).Operations[0].Run
	c := Call{Workspace: ws}
	c.ConversationID = "bench"
	args := json.RawMessage(`{"operation":"run_command","command":"echo hello"}`)
	ctx := context.Background()
	b.ResetTimer()
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := run(ctx, c, args)
		times = append(times, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
	// Named figures: internal/benchdoc leaves ns/op out of docs/benchmarks.md.
	slices.Sort(times)
	ms := func(p float64) float64 {
		i := max(0, min(int(math.Ceil(p*float64(len(times))))-1, len(times)-1)) // nearest rank
		return float64(times[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.95), "p95-ms")
}

// BenchmarkPTYThroughput is how fast a PTY session's output reaches its buffer: the
// shell writes 1 MiB per iteration, read until its end marker arrives.
func BenchmarkPTYThroughput(b *testing.B) {
	root := b.TempDir()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(b), BufferBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	term, _, err := ts.OpenPTY(TerminalCaller{}, "bench", root)
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 20
	ch, cancel := term.Notify()
	defer cancel()
	b.SetBytes(size)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		marker := "END" + strconv.Itoa(i) + "X"
		from := term.out.End()
		// base64 of zeros: printable, so the terminal passes it as it is.
		_ = term.Input(TerminalCaller{}, "head -c "+strconv.Itoa(size*3/4)+" /dev/zero | base64 -w 0; echo; echo EN\"\"D"+strconv.Itoa(i)+"X\n")
		deadline := time.After(30 * time.Second)
		for {
			data, _, _ := term.Output(from)
			if containsLine(data, marker) {
				break
			}
			select {
			case <-ch:
			case <-deadline:
				b.Fatal("no end marker")
			}
		}
	}
}

func containsLine(data []byte, marker string) bool {
	m := []byte("\n" + marker)
	for i := 0; i+len(m) <= len(data); i++ {
		if string(data[i:i+len(m)]) == string(m) {
			return true
		}
	}
	return false
}
