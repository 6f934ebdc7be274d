package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
)

// "Test connection" counts the tools and keeps a few names; it does not read a list
// of any size as discovery does: past its own cap (16 MiB) it stops and says so.
func TestConnectionTestListCapped(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.TestTimeout = time.Minute
	e := start(t, opts)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "wordy", PageSize: 2})
	desc := strings.Repeat("d", 1<<20)
	for i := range 20 {
		hs.Server().SetTool(mcptest.ToolSpec{Name: fmt.Sprintf("wordy-%02d", i), Description: desc})
	}
	total := len(hs.Server().Tools())
	res := e.mgr.Test(context.Background(), registry.Connection{Name: "wordy", Type: registry.TypeStreamableHTTP,
		URL: hs.URL(), Timeout: time.Minute})
	if !res.OK {
		t.Fatalf("test failed: %s", res.Error)
	}
	if res.ToolCount >= total || !strings.Contains(res.ToolsCut, "16 MiB") {
		t.Fatalf("the test counted %d of %d tools (cut: %q); want it stopped at 16 MiB, saying so", res.ToolCount, total, res.ToolsCut)
	}
	if len(res.Tools) != 12 {
		t.Fatalf("names kept: %d, want the first 12", len(res.Tools))
	}
}

// What a server sends that PostgreSQL cannot store (a NUL, a name over the index's
// limit) does not fail its discovery: such tools are left out, NULs elsewhere replaced,
// and the rest stored; its NUL-bearing instructions do not keep its status from being
// written.
func TestDiscoveryStoresWhatItCan(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "nuls", Instructions: "use\x00me"})
	srv := hs.Server()
	for _, name := range []string{"a\x00b", "tab\tname", strings.Repeat("x", 3000)} {
		srv.SetTool(mcptest.ToolSpec{Name: name})
	}
	srv.SetTool(mcptest.ToolSpec{Name: "kept", Title: "t\x00", Description: "nul\x00here",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q\u0000":{"type":"string","description":"x\u0000y"}}}`)})
	sv := e.create(t, registry.Spec{Name: "nuls", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	got := e.waitStatus(t, sv.ID, registry.StatusConnected)
	if strings.Contains(got.Info.Instructions, "\x00") || !strings.HasPrefix(got.Info.Instructions, "use") {
		t.Fatalf("instructions stored: %q", got.Info.Instructions)
	}
	res, err := e.mgr.Discover(context.Background(), sv.ID, audit.System)
	if err != nil {
		t.Fatalf("discover: %v", err)
	}
	if want := len(srv.Tools()) - 3; res.Total != want || res.LeftOut != 3 {
		t.Fatalf("discovery kept %d tools and left out %d, want %d and 3 (the unstorable names)", res.Total, res.LeftOut, want)
	}
	// The run says so, naming them readably (a control character as its escape).
	runs, err := e.reg.DiscoveryRuns(context.Background(), sv.ID, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	if r := runs[0]; r.LeftOut != 3 || len(r.LeftOutNames) != 3 || !strings.Contains(strings.Join(r.LeftOutNames, "\n"), `"tab\tname": a control character in its name`) {
		t.Fatalf("the run's tools left out: %d %q", r.LeftOut, r.LeftOutNames)
	}
	names := testkit.Strings(t, e.pool, `SELECT name FROM mcp_tools WHERE server_id = $1 AND (name LIKE 'tab%' OR name LIKE 'xxx%' OR name LIKE 'a%b')`, sv.ID)
	if len(names) != 0 {
		t.Fatalf("unstorable names stored: %q", names)
	}
	row := testkit.Strings(t, e.pool, `SELECT title || '|' || description || '|' || input_schema::text FROM mcp_tools WHERE server_id = $1 AND name = 'kept'`, sv.ID)
	if len(row) != 1 || !strings.Contains(row[0], "nul\ufffdhere") || !strings.Contains(row[0], "x\ufffdy") {
		t.Fatalf("kept tool stored as %q, want its NULs replaced", row)
	}
}

// A discovery whose list the database refuses is recorded as a failed run saying why,
// and answered as the server's fault (502), not as an internal error.
func TestDiscoveryStoreFailureRecorded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	if _, err := e.pool.Exec(context.Background(), `
		CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.name = 'boom' THEN
				RAISE EXCEPTION 'index row size 3000 exceeds btree version 4 maximum 2704' USING ERRCODE = '54000';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_boom BEFORE INSERT ON mcp_tools FOR EACH ROW EXECUTE FUNCTION refuse_boom();`); err != nil {
		t.Fatal(err)
	}
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "boom"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "boom"})
	sv := e.create(t, registry.Spec{Name: "boom", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	if got := e.failedDiscovery(t, sv.ID); !strings.Contains(got, "exceeds btree") {
		t.Fatalf("failed run's error: %q", got)
	}
	_, err := e.mgr.Discover(context.Background(), sv.ID, audit.System)
	if err == nil || fault.KindOf(err) != fault.KindUpstream || !strings.Contains(err.Error(), "exceeds btree") {
		t.Fatalf("discover: %v (kind %v), want an upstream fault saying why", err, fault.KindOf(err))
	}
}

// A server's error text with a NUL in it is recorded (the NUL replaced), not lost to
// the database refusing it.
func TestDiscoveryFailureWithNUL(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u := interposed(t, &mcptest.Options{Name: "nulerr"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "tools/list" {
			return false
		}
		rpcError(w, id, "bad\x00news")
		return true
	})
	sv := e.create(t, registry.Spec{Name: "nulerr", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	if got := e.failedDiscovery(t, sv.ID); !strings.Contains(got, "bad\ufffdnews") {
		t.Fatalf("failed run's error: %q", got)
	}
	_, err := e.mgr.Discover(context.Background(), sv.ID, audit.System)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("discover: %v", err)
	}
}
