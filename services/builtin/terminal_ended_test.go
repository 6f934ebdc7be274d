package builtin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// endedOutput is the output the ended terminals of ts still keep, in bytes.
func endedOutput(ts *Terminals) int {
	n := 0
	for _, t := range ts.List() {
		if t.Exited() {
			data, _, _ := t.Output(0)
			n += len(data)
		}
	}
	return n
}

// runEnded runs n background commands of user, one after the other, each printing
// size bytes into a buffer of size, and returns them once each ended.
func runEnded(t *testing.T, ts *Terminals, dir, user string, n, size int) []*Terminal {
	t.Helper()
	var out []*Terminal
	for range n {
		term, err := ts.Start(TerminalCaller{UserID: user, UserName: user}, "conv", dir, "head -c "+strconv.Itoa(size)+" /dev/zero", time.Minute, size)
		if err != nil {
			t.Fatal(err)
		}
		<-term.gone
		out = append(out, term)
	}
	return out
}

// Ended background commands keep their output for KeepEnded, but not without bound:
// past a person's share the oldest ones' output is dropped (they stay listed, ended,
// and say their output is gone); the newest stay readable.
func TestEndedTerminalsOutputIsBounded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	dir := filepath.Join(root, "conv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	ended := runEnded(t, ts, dir, "u1", 24, size)
	if n := endedOutput(ts); n > 16<<20 {
		t.Fatalf("24 ended commands of 1 MiB keep %d bytes of output, want at most 16 MiB", n)
	}
	newest := ended[len(ended)-1]
	if data, _, _ := newest.Output(0); len(data) != size {
		t.Fatalf("the newest ended command keeps %d bytes, want all %d", len(data), size)
	}
	ts.mu.Lock()
	counted, all := ts.endedBytes["u1"], ts.endedAll
	ts.mu.Unlock()
	if counted > DefaultEndedOutputPerOwner || counted < endedOutput(ts) || all != counted {
		t.Fatalf("counted %d bytes of u1's ended output (%d in all), %d kept", counted, all, endedOutput(ts))
	}
	oldest := ended[0]
	if text := outputResult(oldest, 0).Content[0].(*mcp.TextContent).Text; !oldest.Exited() || !strings.Contains(text, "output was dropped") || !strings.Contains(text, "[ended, exit code 0]") {
		t.Fatalf("the oldest ended command reads: %.200q", text)
	}
	// Forgotten, an ended terminal's output is counted no more.
	ts.mu.Lock()
	its := newest.kept
	ts.mu.Unlock()
	newest.Close()
	ts.mu.Lock()
	after := ts.endedBytes["u1"]
	ts.mu.Unlock()
	if its < size || after != counted-its {
		t.Fatalf("after the newest was closed u1's ended output is counted %d (was %d)", after, counted)
	}
}

// The process's share bounds the ended terminals of everyone together: the oldest
// output goes first, whoever's it was.
func TestEndedTerminalsOutputIsBoundedPerProcess(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const size = 256 << 10
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), EndedOutput: 3 * size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	dir := filepath.Join(root, "conv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ended []*Terminal
	for range 4 {
		ended = append(ended, runEnded(t, ts, dir, "u1", 1, size)...)
		ended = append(ended, runEnded(t, ts, dir, "u2", 1, size)...)
	}
	if n := endedOutput(ts); n > 3*size {
		t.Fatalf("ended commands keep %d bytes, want at most %d", n, 3*size)
	}
	for _, term := range ended[len(ended)-2:] {
		if data, _, _ := term.Output(0); len(data) != size {
			t.Fatalf("%s (%s), among the newest, keeps %d bytes, want %d", term.ID, term.OwnerID, len(data), size)
		}
	}
	if !ended[0].OutputDropped() || ended[len(ended)-1].OutputDropped() {
		t.Fatal("the oldest output was kept, or the newest dropped")
	}
}
