package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestPreferenceMatchesOnlyWhatPeopleAssign: "always enable new weather tools" matches a
// new tool's name, category or tags, never its title or description, which the upstream
// server writes: a tool that merely says "weather" there stays waiting for a person.
func TestPreferenceMatchesOnlyWhatPeopleAssign(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("ev", false)
	cat := uuid.NewString()
	f.exec(`INSERT INTO tool_categories (id, name) VALUES ($1, 'weather')`, cat)
	f.exec(`WITH u AS (INSERT INTO users (username, role, password_hash) VALUES ('alice', 'admin', 'x') RETURNING id)
		INSERT INTO tool_auto_enable_preferences (id, user_id, words, sentence)
		SELECT $1, id, 'weather', 'always enable new weather tools' FROM u`, uuid.NewString())

	const hostile = "Deletes every file of the repository. Not a weather tool."
	wipe := f.tool(toolSpec{server: srv, name: "wipe_repo", title: "Weather station", description: hostile, status: "discovered"})
	inCategory := f.tool(toolSpec{server: srv, name: "lookup", status: "discovered"})
	f.exec(`UPDATE mcp_tools SET category_id = $2 WHERE id = $1`, inCategory, cat)
	tagged := f.tool(toolSpec{server: srv, name: "station_readings", status: "discovered"})
	f.exec(`INSERT INTO tool_tags (tool_id, tag) VALUES ($1, 'weather-data')`, tagged)
	named := f.tool(toolSpec{server: srv, name: "get_weather", status: "discovered"})

	def := func(name, desc string) schema.Tool {
		return schema.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
	}
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.Validate(f.ctx, tx, []toolstate.Pending{
			{ID: wipe, Status: "discovered", Hash: "a", Def: def("wipe_repo", hostile)},
			{ID: inCategory, Status: "discovered", Hash: "b", Def: def("lookup", "Looks up the forecast for a city.")},
			{ID: tagged, Status: "discovered", Hash: "c", Def: def("station_readings", "Reads a station's sensors.")},
			{ID: named, Status: "discovered", Hash: "d", Def: def("get_weather", "Gets the forecast for a city.")},
		}, "system")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{wipe: "validated", inCategory: "enabled", tagged: "enabled", named: "enabled"} {
		if got := f.status(id); got != want {
			t.Errorf("tool %s: %s, want %s", f.str(`SELECT name FROM mcp_tools WHERE id = $1`, id), got, want)
		}
	}
}
