package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// When the replica that runs a session does not answer a forwarded operation, the
// agent is told to try again only where that is harmless: send_input and close_session
// may have run there before the answer was lost, so it is told to look first.
func TestForwardedOperationNotAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	if _, err := pool.Exec(ctx, `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
		VALUES ('term-far', $1, 'far', 'pty', 'conv', '/tmp', now())`, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	refused := false // the owner refused the operation before running it (a hop refused, busy)
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: t.TempDir(), Env: []string{"HOME=" + t.TempDir()},
		Store: builtin.NewTerminalStore(pool, replicas.New(pool, replicas.Options{})),
		Forward: func(context.Context, builtin.TerminalRecord, string, builtin.Call, json.RawMessage) (*mcp.CallToolResult, error) {
			if refused {
				return nil, fmt.Errorf("%w: replica far answered 503: too many forwarded requests", builtin.ErrNotRun)
			}
			return nil, errors.New("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	for _, tc := range []struct {
		op, args, want string
		refused        bool
	}{
		{"send_input", `{"sessionId":"term-far","input":"make deploy\n"}`, "the send_input may have run there: check with get_output before trying again", false},
		{"close_session", `{"sessionId":"term-far"}`, "the close_session may have run there: check with get_output", false},
		{"get_output", `{"sessionId":"term-far"}`, "which did not answer; try again", false},
		{"send_input", `{"sessionId":"term-far","input":"make deploy\n"}`, "which did not answer; try again", true},
	} {
		refused = tc.refused
		for _, op := range builtin.TerminalTool(ts).Operations {
			if op.Name != tc.op {
				continue
			}
			c := builtin.Call{}
			c.ConversationID = "conv"
			res, err := op.Run(ctx, c, json.RawMessage(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if text := resultText(res); !res.IsError || !strings.Contains(text, tc.want) {
				t.Errorf("%s whose replica did not answer: isError %v, %q; want %q", tc.op, res.IsError, text, tc.want)
			}
		}
	}
}
