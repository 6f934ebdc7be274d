package builtin

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// run_command keeps the last maxOutput bytes of a command's output (64 KiB without
// it) and says how many earlier bytes were dropped; the output here is larger than
// either cap, so a command that kept everything fails the test.
func TestRunCommandOutputCap(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	run := TerminalTool(ts).Operations[0].Run
	c := Call{Workspace: root}
	c.ConversationID = "caps"
	for _, tc := range []struct {
		name, args  string
		total, kept int
	}{
		{"maxOutput 1024", `{"operation":"run_command","command":"head -c 5000 /dev/zero | tr '\\0' a; echo END","maxOutput":1024}`, 5004, 1024},
		{"the default", `{"operation":"run_command","command":"head -c 70000 /dev/zero | tr '\\0' a; echo END"}`, 70004, 64 << 10},
	} {
		res, err := run(context.Background(), c, json.RawMessage(tc.args))
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tc.name, err, res)
		}
		sc := res.StructuredContent.(map[string]any)
		out, _ := sc["output"].(string)
		if len(out) != tc.kept || out != strings.Repeat("a", tc.kept-4)+"END\n" || sc["truncated"] != true || sc["bytes"] != int64(tc.total) {
			t.Fatalf("%s: kept %d bytes (want the last %d), truncated %v, bytes %v: %q", tc.name, len(out), tc.kept, sc["truncated"], sc["bytes"], out)
		}
		want := "[the first " + strconv.Itoa(tc.total-tc.kept) + " bytes of output were dropped]\n"
		if txt := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(txt, want) || !strings.HasSuffix(txt, "END\n\n[exit code 0]") {
			t.Fatalf("%s: the text says %.80q … %q", tc.name, txt, txt[max(0, len(txt)-20):])
		}
	}
}
