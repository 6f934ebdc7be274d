package assistant_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A yes to enabling several tools enables them as the question named them: one whose
// definition is rediscovered between the question and the yes is refused as stale, and
// the others are enabled in the same act.
func TestEnableYesIsOfTheDefinitionsAsked(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "y1"})
	a.RegisterServer(t, registry.Spec{Name: "y1", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	echo, add := a.ToolID(t, toolname.Join("y1", "echo")), a.ToolID(t, toolname.Join("y1", "add"))
	status := func(id string) string {
		var s string
		if err := a.Pool.QueryRow(t.Context(), `SELECT status FROM mcp_tools WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	c := newChat(t, a)
	r := c.say("enable all tools on y1 except sleep")
	if !strings.Contains(r.Reply, "yes") || status(echo) == "enabled" {
		t.Fatalf("enable all tools on y1 except sleep: %q (echo %s); want a yes asked first", r.Reply, status(echo))
	}
	// Rediscovered with another definition after the question.
	if _, err := a.Pool.Exec(t.Context(), `UPDATE mcp_tools SET definition_hash = 'changed-since' WHERE id = $1`, echo); err != nil {
		t.Fatal(err)
	}
	r = c.say("yes")
	if status(echo) == "enabled" || !strings.Contains(r.Reply, "changed since") {
		t.Errorf("yes, echo's definition changed since the question: echo %s, reply %q; want it refused as stale", status(echo), r.Reply)
	}
	if status(add) != "enabled" {
		t.Errorf("yes: add (unchanged) is %s, reply %q; want enabled", status(add), r.Reply)
	}
}
