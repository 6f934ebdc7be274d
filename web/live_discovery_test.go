package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// discoveredServer registers a server and stores a discovery of n tools for it (then of
// each of more, in turn), and returns the live renderer and the discovery.completed event
// the registry would publish for the last one.
func discoveredServer(t *testing.T, n int, more ...int) (handlers.Live, registry.Server, events.Event) {
	t.Helper()
	ctx := context.Background()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(dbtest.New(t), keys, nil)
	sv, err := reg.CreateServer(ctx, audit.System, disabledSpec(fmt.Sprintf("many-%d", n)))
	if err != nil {
		t.Fatal(err)
	}
	var res registry.DiscoveryResult
	for _, n := range append([]int{n}, more...) {
		defs := make([]registry.ToolDef, n)
		for i := range defs {
			name := fmt.Sprintf("tool_%05d", i)
			desc := fmt.Sprintf("Tool number %d reads a file from the workspace and returns its lines, numbered.", i)
			schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
			raw, _ := json.Marshal(map[string]any{"name": name, "description": desc, "inputSchema": schema})
			defs[i] = registry.ToolDef{Name: name, Description: desc, InputSchema: schema, Annotations: json.RawMessage(`{"readOnlyHint":true}`), Raw: raw}
		}
		if res, err = reg.ApplyDiscovery(ctx, sv.ID, registry.Discovery{Trigger: "manual", Actor: audit.System, StartedAt: time.Now(), Pages: 1, Tools: defs}); err != nil {
			t.Fatal(err)
		}
	}
	payload, _ := json.Marshal(events.DiscoveryResult{ServerID: sv.ID, Server: sv.Name, Trigger: "manual", RunID: res.RunID,
		Added: res.Added, Updated: res.Updated, Unchanged: res.Unchanged, Removed: res.Removed, Total: res.Total})
	ev := events.Event{ID: 1, Topic: registry.ServersTopic, Kind: string(events.DiscoveryCompleted), Payload: payload, CreatedAt: time.Now()}
	return handlers.Live{Deps: &handlers.Deps{Registry: reg}}, sv, ev
}

// A discovery's fragment goes to every page following "servers" (every servers list and
// server page), so a server with thousands of tools must not put its whole table in it:
// the table is replaced by a notice to reload, and the runs still come live.
func TestLiveDiscoveryOfManyToolsIsBounded(t *testing.T) {
	t.Parallel()
	live, sv, ev := discoveredServer(t, 2000)
	frag, err := live.Render(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	html := string(frag)
	if len(frag) > 200_000 {
		t.Errorf("the fragment of a 2,000-tool discovery is %d bytes, want at most 200,000", len(frag))
	}
	if !strings.Contains(html, "too many to show live") {
		t.Errorf("the fragment does not say the tool list is too long to show live")
	}
	for _, want := range []string{`id="server-tools-` + sv.ID + `"`, `data-count="2000"`, `data-testid="server-tools-reload"`,
		`id="discovery-runs-` + sv.ID + `"`, `data-testid="discovery-run"`, "Last discovery: 2000 tools"} {
		if !strings.Contains(html, want) {
			t.Errorf("the fragment lacks %s", want)
		}
	}
	if n := strings.Count(html, `data-testid="tool-row"`); n != 0 {
		t.Errorf("the fragment carries %d tool rows, want none", n)
	}
}

// A server of a few tools still gets its whole table live.
func TestLiveDiscoveryOfFewToolsListsThem(t *testing.T) {
	t.Parallel()
	live, sv, ev := discoveredServer(t, 3)
	frag, err := live.Render(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	html := string(frag)
	if n := strings.Count(html, `data-testid="tool-row"`); n != 3 {
		t.Errorf("the fragment carries %d tool rows, want 3", n)
	}
	if !strings.Contains(html, `id="server-tools-`+sv.ID+`"`) || !strings.Contains(html, `data-count="3"`) {
		t.Errorf("the fragment lacks the server's tool table: %s", html)
	}
	if strings.Contains(html, "too many to show live") {
		t.Errorf("a 3-tool server's fragment says its list is too long")
	}
}

// The table lists the tools a server no longer lists too: a server that dropped most of
// a long list is bounded by its rows, not by the tools it still lists.
func TestLiveDiscoveryCountsUnavailableTools(t *testing.T) {
	t.Parallel()
	live, _, ev := discoveredServer(t, 300, 5)
	frag, err := live.Render(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	html := string(frag)
	if !strings.Contains(html, "too many to show live") || !strings.Contains(html, `data-count="300"`) {
		t.Errorf("a table of 300 rows (295 unavailable) is not replaced by the notice")
	}
	if n := strings.Count(html, `data-testid="tool-row"`); n != 0 {
		t.Errorf("the fragment carries %d tool rows, want none", n)
	}
}
