package executions_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// waitEnded waits until execution id has left executing, and returns it.
func (e *env) waitEnded(id string, d time.Duration) *executions.Execution {
	e.t.Helper()
	var ex *executions.Execution
	testkit.WaitFor(e.t, d, func() bool {
		ex = e.get(id)
		return ex.Status != executions.Executing
	}, "the execution never ended")
	return ex
}

// serverWith registers an mcptest server that also has tool name answering res, and
// enables that tool at LOW risk.
func (e *env) serverWith(name, tool string, res *mcp.CallToolResult) {
	e.t.Helper()
	hs := mcptest.StartHTTP(e.t, &mcptest.Options{Name: name})
	hs.Server().MCP().AddTool(&mcp.Tool{Name: tool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil })
	e.app.RegisterServer(e.t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, tool)
	if e.admin.Actor.ID == "" {
		e.admin = e.user("boss", auth.RoleAdmin)
	}
	e.setRisk(name+"__"+tool, risk.Low)
}

// briefMatches checks StepsBrief lists execution id's steps as Steps does, without
// their results but saying which have one.
func (e *env) briefMatches(id string) {
	e.t.Helper()
	brief, err := e.svc.StepsBrief(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	full := e.steps(id)
	if len(brief) != len(full) {
		e.t.Fatalf("StepsBrief: %d steps, Steps: %d", len(brief), len(full))
	}
	for i, b := range brief {
		f := full[i]
		has := len(f.Result) > 0 && string(f.Result) != "null"
		if b.Result != nil || b.HasResult != has || f.HasResult != has {
			e.t.Errorf("step %d: brief result %.20s, has %v / %v, want none, %v", i+1, b.Result, b.HasResult, f.HasResult, has)
		}
		b.Result, f.Result = nil, nil
		bj, _ := json.Marshal(b)
		fj, _ := json.Marshal(f)
		if string(bj) != string(fj) {
			e.t.Errorf("step %d: brief %s, full %s", i+1, bj, fj)
		}
	}
}

// A step refused by its tool's rate limit waits for it (the tool never saw the call):
// the plan runs every step once, in order, and succeeds.
func TestRunWaitsForRateLimit(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "echo")
	// 29 a minute: a burst of 2, then one call every ~2 s.
	n := 29
	e.update("mt__echo", tools.Patch{RateLimit: &n})
	// The runner's log says when a step was refused and put back to wait: without it,
	// a limit never applied would pass as well.
	var logs testkit.SyncBuffer
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: keys,
		Local: e.app.Local, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.run(runner)
	ex := e.create(e.admin, step("mt__echo", `{"message":"one"}`), step("mt__echo", `{"message":"two"}`),
		step("mt__echo", `{"message":"three"}`))
	done := e.waitEnded(ex.ID, 60*time.Second)
	if done.Status != executions.Success {
		t.Fatalf("got %s (%s), want success", done.Status, done.Error)
	}
	sts := e.steps(ex.ID)
	if got := stepStatuses(sts); !slices.Equal(got, []string{"succeeded", "succeeded", "succeeded"}) {
		t.Fatalf("steps: got %v, want all succeeded", got)
	}
	for i, want := range []string{"one", "two", "three"} {
		if !strings.Contains(string(sts[i].Result), "Echo: "+want) {
			t.Errorf("step %d result: got %s, want Echo: %s", i+1, sts[i].Result, want)
		}
		if i > 0 && sts[i].StartedAt.Before(*sts[i-1].FinishedAt) {
			t.Errorf("step %d started before step %d finished", i+1, i)
		}
	}
	e.briefMatches(ex.ID)
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_name = 'mt__echo'`); n != 3 {
		t.Errorf("calls of mt__echo: got %d, want 3", n)
	}
	if waited := strings.Count(logs.String(), `msg="executions: a step waits for a rate limit" execution=`+ex.ID+` step=3 `); waited == 0 {
		t.Errorf("step 3 never waited for the rate limit (a burst of 2): the runner's log is\n%s", logs.String())
	}
	if gap := sts[2].StartedAt.Sub(*sts[0].StartedAt); gap < time.Second {
		t.Errorf("step 3 started %s after step 1, want the ~2 s the limit makes it wait", gap)
	}
}

// A tool error of a megabyte is stored and announced clipped.
func TestRunHugeToolErrorClipped(t *testing.T) {
	t.Parallel()
	e := start(t)
	big := strings.Repeat("é", 1<<19) // 1 MiB
	e.serverWith("mt", "huge", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: big}}})
	e.run(nil)
	ex := e.create(e.admin, step("mt__huge", `{}`), step("mt__huge", `{}`))
	done := e.waitEnded(ex.ID, 30*time.Second)
	if done.Status != executions.Failed {
		t.Fatalf("got %s, want failed", done.Status)
	}
	const limit = 5 << 10 // the clip (4 KiB) and the words around it
	if len(done.Error) > limit || !strings.Contains(done.Error, "the tool reported an error: éé") {
		t.Errorf("execution error: %d bytes (%.80q), want at most %d", len(done.Error), done.Error, limit)
	}
	sts := e.steps(ex.ID)
	if len(sts[0].Error) > limit || !strings.HasPrefix(sts[0].Error, "the tool reported an error: éé") {
		t.Errorf("step error: %d bytes (%.80q), want at most %d", len(sts[0].Error), sts[0].Error, limit)
	}
	if got := stepStatuses(sts); !slices.Equal(got, []string{"failed", "skipped"}) {
		t.Errorf("steps: got %v, want failed, skipped", got)
	}
	e.briefMatches(ex.ID) // one with a result, one without
	e.flush()
	if n := e.count(`SELECT count(*) FROM events WHERE payload->>'execution_id' = $1 AND kind = 'execution.failed'
		AND length(payload::text) > $2`, ex.ID, 2*limit); n != 0 {
		t.Errorf("execution.failed events over %d bytes: %d", 2*limit, n)
	}
}

// A NUL in a tool's text and structured content (which jsonb and text columns refuse)
// is stored replaced: the step succeeds and the execution completes.
func TestRunOutputWithNUL(t *testing.T) {
	t.Parallel()
	e := start(t)
	text := strings.Repeat("a", 9000) + "\x00b"
	e.serverWith("mt", "nul", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"v\x00k": "x\x00y"}})
	e.run(nil)
	ex := e.create(e.admin, step("mt__nul", `{}`))
	done := e.waitEnded(ex.ID, 30*time.Second)
	if done.Status != executions.Success {
		t.Fatalf("got %s (%s), want success", done.Status, done.Error)
	}
	sts := e.steps(ex.ID)
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured map[string]string `json:"structured_content"`
	}
	if err := json.Unmarshal(sts[0].Result, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("result: %v %.200s", err, sts[0].Result)
	}
	if got := r.Content[0].Text; strings.ContainsRune(got, 0) || !strings.HasPrefix(got, strings.Repeat("a", 9000)) || !strings.HasSuffix(got, "b") {
		t.Errorf("stored text: %.40q…%q", got, got[len(got)-8:])
	}
	if got := r.Structured["v\uFFFDk"]; got != "x\uFFFDy" {
		t.Errorf("stored structured content: %v", r.Structured)
	}
}
