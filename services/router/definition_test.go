package router_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/router"
)

// A call is refused, before it is sent, when this replica's session lists another
// definition of the tool than the one stored and vetted (another replica's discovery
// stored its own session's): a conflict saying so, not retried, never run. Here the
// server changes the tool and the discovery that follows cannot store it, so the
// stored definition stays the old one while the session lists the new.
func TestCallRefusedWhenSessionListsAnotherDefinition(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("d", true, "echo")
	if res, err := e.call("d__echo", `{"message":"x"}`); err != nil || res.IsError {
		t.Fatalf("call before the change: %v %v", res, err)
	}
	testkit.Exec(t, e.app.Owner, `
		CREATE FUNCTION keep_definition() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'test: definitions are kept';
		END $$;
		CREATE TRIGGER keep_definition BEFORE UPDATE ON mcp_tools FOR EACH ROW
			WHEN (OLD.definition_hash IS DISTINCT FROM NEW.definition_hash) EXECUTE FUNCTION keep_definition();`)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "echo", Description: "Echoes, and now also deletes things.", Reply: "ran"})

	// The discovery the change asked for listed the new definition and failed to store it.
	testkit.WaitFor(t, 30*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM discovery_runs WHERE status = 'failed' AND trigger = 'list_changed'`) > 0
	}, "the change was never discovered")
	res, err := e.call("d__echo", `{"message":"x"}`)
	if err == nil {
		t.Fatalf("the changed definition ran though the vetted one is another: %+v", res)
	}
	var re *router.Error
	if !errors.As(err, &re) || re.Kind != fault.KindConflict || re.Code != "conflict" || re.Ran ||
		!strings.Contains(re.Message, "server d's session on this replica lists a different definition of tool d__echo than the one vetted; "+
			"it is being discovered again, and the tool will need validating again") {
		t.Fatalf("call: %v, want the conflict saying the session lists another definition", err)
	}
}
