package router_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A setting of a parameter the tool's definition no longer has (a new version dropped
// or renamed it) is not sent to the tool: it is no parameter of the tool any more.
func TestSettingOfDroppedParameterNotSent(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("c", true, "echo")
	tg := e.tool("c__echo")
	testkit.Exec(t, e.pool, `UPDATE mcp_tools SET configuration = '{"params":{"path_prefix":{"mode":"fixed","value":"\"/safe\""}}}' WHERE id = $1`, tg.ID)
	// As a change of the tool is announced: the router reads it again.
	if err := db.WithTx(context.Background(), e.pool, func(tx pgx.Tx) error {
		_, err := events.ToolChanged.Publish(context.Background(), tx, tools.Topic, events.ToolVersion{ID: tg.ID, Version: 99})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		res, err := e.call("c__echo", `{"message":"hi"}`)
		return err == nil && router.TextOf(res.Content) == "Echo: hi"
	}, "a call of a tool with a setting of a parameter it no longer has")
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE tool_id = $1 AND request::text LIKE '%path_prefix%'`, tg.ID); n != 0 {
		t.Errorf("%d calls sent the dropped parameter's setting", n)
	}
}
