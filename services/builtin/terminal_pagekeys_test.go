package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
)

// Keys a person typed on the page are rated by no one: an agent's call that joins the
// line they left (its Enter, or keys that finish it) is rated with them, so an agent's
// "\n" cannot run the rm -rf a person left typed. Once the agent clears the line first
// (Ctrl-U), or the person ends it, its own input is rated alone again.
func TestTerminalAgentJoiningPageKeys(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	victim := filepath.Join(root, "victim")
	if err := os.MkdirAll(filepath.Join(victim, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, _, err := ts.OpenPTY(TerminalCaller{UserID: "u1", UserName: "alice"}, "conv", root)
	if err != nil {
		t.Fatal(err)
	}
	person := TerminalCaller{UserID: "u1", Source: BrowserSource}
	agent := TerminalCaller{UserID: "u1", Source: "mcp", Level: "low"}
	if err := p.Input(person, "rm -rf "+victim); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"\n", "/sub\n", " \r"} {
		if err := p.Input(agent, in); err == nil || !strings.Contains(err.Error(), "deletes recursively") {
			t.Fatalf("an agent's %q after a person's unfinished rm -rf: %v", in, err)
		}
	}
	// Cleared first: the agent's own line, rated alone.
	marker := filepath.Join(root, "made")
	if err := p.Input(agent, "\x15touch "+marker+"\n"); err != nil {
		t.Fatalf("an agent's line after Ctrl-U: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool { _, err := os.Stat(marker); return err == nil }, "the agent's own line did not run")
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the person's line ran: %v", err)
	}
	// A line the agent started stays its own: a person's keys are not needed to finish it.
	if err := p.Input(agent, "touch "+marker+"2"); err != nil {
		t.Fatal(err)
	}
	if err := p.Input(agent, "\n"); err != nil {
		t.Fatalf("an agent's Enter on its own line: %v", err)
	}
}
