package builtin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// Unconfined, a command that leaves a background job holding its output ends with
// its shell's exit code: Wait gives up on the pipe after WaitDelay (exec.ErrWaitDelay),
// which is not the command failing.
func TestRunCommandLeavesBackgroundJob(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root) // no Confiner: unconfined, as --confine=off
	run := TerminalTool(ts).Operations[0].Run
	c := Call{Workspace: root}
	c.ConversationID = "waitdelay"
	for _, tc := range []struct {
		command string
		code    int
	}{{"sleep 30 & echo started", 0}, {"sleep 30 & echo started; exit 3", 3}} {
		cmd, _ := json.Marshal(tc.command)
		res, err := run(context.Background(), c, json.RawMessage(`{"operation":"run_command","command":`+string(cmd)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		sc := res.StructuredContent.(map[string]any)
		if sc["exitCode"] != tc.code || res.IsError != (tc.code != 0) || !strings.Contains(sc["output"].(string), "started") {
			t.Fatalf("%s: exit code %v (want %v), isError %v, output %q", tc.command, sc["exitCode"], tc.code, res.IsError, sc["output"])
		}
	}
}
