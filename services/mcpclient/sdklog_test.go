package mcpclient_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// What the SDK logs about a server (here: a tool it drops for an invalid x-mcp-header
// annotation) reaches the manager's log, tagged with the server, with the server's
// secrets and credential-like words masked and each value cut to a bound.
func TestSDKLogsMaskedAndBounded(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	opts := fast()
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e := start(t, opts)
	const canary = "sk-canary-sdklog-24680"
	const ghp = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
	// An invalid header name (it has spaces) that quotes the server's key, a GitHub
	// token and a flood of padding; the tool's name is long too.
	header := "X-Key " + canary + " " + ghp + " " + strings.Repeat("pad ", 2000)
	name := "leaky-" + strings.Repeat("n", 3000)
	bad, _ := json.Marshal(map[string]any{"name": name, "inputSchema": map[string]any{"type": "object",
		"properties": map[string]any{"k": map[string]any{"type": "string", "x-mcp-header": header}}}})
	u := interposed(t, &mcptest.Options{Name: "sdklog"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "tools/list" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s,{"name":"kept","inputSchema":{"type":"object"}}]}}`, id, bad)
		return true
	})
	sv := e.create(t, registry.Spec{Name: "sdklog", Type: registry.TypeStreamableHTTP, URL: u,
		AuthType: registry.AuthBearer, AuthToken: canary, Enabled: true})
	// The SDK filters the listing before the discovery sees it: once a run is
	// recorded, the line is written.
	e.waitRuns(t, sv.ID, 1)

	out := logs.String()
	if strings.Contains(out, canary) || strings.Contains(out, ghp) {
		t.Fatal("the manager's log holds the server's key or the GitHub token")
	}
	var line map[string]any
	for _, l := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(fmt.Sprint(m["msg"]), "excluding tool from tools/list") {
			line = m
			break
		}
	}
	if line == nil {
		t.Fatalf("no line about the excluded tool in the manager's log:\n%.4000s", out)
	}
	if line["server"] != "sdklog" || line["server_id"] != sv.ID {
		t.Errorf("the line names server %v (%v), want sdklog (%s)", line["server"], line["server_id"], sv.ID)
	}
	errText, _ := line["error"].(string)
	if !strings.Contains(errText, "x-mcp-header") || !strings.Contains(errText, "***") || !strings.Contains(errText, "********") {
		t.Errorf("the error attribute %q: want the reason, with the key and the token masked", errText)
	}
	tool, _ := line["tool"].(string)
	if !strings.HasPrefix(tool, "leaky-nnn") {
		t.Errorf("the tool attribute %.100q: want the tool's name", tool)
	}
	for k, v := range line {
		if s, ok := v.(string); ok && len(s) > 1100 {
			t.Errorf("attribute %s is %d bytes, want it cut to about 1 KiB", k, len(s))
		}
	}
}

// The SDK logs a line per invalid tool of a listing, whose length the server picks: a
// client's lines are budgeted (a burst, then one every few seconds), not one per tool.
func TestSDKLogsBudgeted(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	opts := fast()
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	e := start(t, opts)
	var list []string
	for i := range 500 {
		list = append(list, fmt.Sprintf(`{"name":"bad%d","inputSchema":{"type":"object","properties":{"k":{"type":"string","x-mcp-header":"has space"}}}}`, i))
	}
	u := interposed(t, &mcptest.Options{Name: "sdkflood"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, _ []byte) bool {
		if method != "tools/list" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}`, id, strings.Join(list, ","))
		return true
	})
	sv := e.create(t, registry.Spec{Name: "sdkflood", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	e.waitRuns(t, sv.ID, 1)
	if n := strings.Count(logs.String(), "excluding tool from tools/list"); n == 0 || n > 25 {
		t.Errorf("%d lines about excluded tools for a listing of 500 invalid ones; want some, and at most about 20", n)
	}
}
