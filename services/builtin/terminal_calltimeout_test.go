package builtin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A foreground run_command is bounded by its own timeout, not the tool's: with the
// tool's timeout at 1 s, a command given 10 s that sleeps 3 s answers its output, and
// one given 1 s that sleeps longer is killed by its own timeout and still answers.
// A background one answers at once as before.
func TestRunCommandOutlastsToolTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, terminalTool)
	low, short := "low", 1000
	// One change: once the router sees the risk, it sees the timeout too.
	if _, err := srv.App.Tools.Update(ctx, audit.System, tg.ID, tools.Patch{Risk: &low, MayLowerRisk: true, TimeoutMS: &short, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		d, err := srv.Router.RiskOf(ctx, terminalTool, json.RawMessage(`{"operation":"get_output","sessionId":"x"}`))
		return err == nil && d.Level == risk.Low
	}, "the tool's LOW risk in the router")
	admin := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	call := func(args string) (*router.Result, error) {
		return srv.Router.Call(ctx, router.Call{Tool: terminalTool, Arguments: json.RawMessage(args), Actor: admin, Role: auth.RoleAdmin,
			Source: router.SourceAPI, ConversationID: "conv-long"})
	}

	res, err := call(`{"operation":"run_command","command":"sleep 3; echo done","timeout":10}`)
	if err != nil || res.IsError || !strings.Contains(router.TextOf(res.Content), "done") || !strings.Contains(string(res.StructuredContent), `"exitCode":0`) {
		t.Fatalf("a command longer than the tool's timeout: %v %+v", err, res)
	}

	res, err = call(`{"operation":"run_command","command":"echo begun; sleep 30","timeout":1}`)
	if err != nil || !res.IsError || !strings.Contains(router.TextOf(res.Content), "begun") || !strings.Contains(router.TextOf(res.Content), "[timed out after 1s]") {
		t.Fatalf("a command past its own timeout: %v %+v", err, res)
	}

	res, err = call(`{"operation":"run_command","command":"echo bg","background":true,"timeout":10}`)
	if err != nil || res.IsError || !strings.Contains(string(res.StructuredContent), `"sessionId"`) {
		t.Fatalf("background: %v %+v", err, res)
	}
}

// CommandTimeout answers a foreground run_command's own timeout (as the tool applies
// it: 60 s by default, at most an hour) and nothing for other calls.
func TestCommandTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args string
		want time.Duration
		ok   bool
	}{
		{`{"operation":"run_command","command":"x"}`, time.Minute, true},
		{`{"operation":"run_command","command":"x","timeout":90}`, 90 * time.Second, true},
		{`{"operation":"run_command","command":"x","timeout":99999}`, time.Hour, true},
		{`{"operation":"run_command","command":"x","timeout":90,"background":true}`, 0, false},
		{`{"operation":"get_output","sessionId":"x"}`, 0, false},
		{`{"operation":"run_command","timeout":"soon"}`, 0, false},
	} {
		if got, ok := builtin.CommandTimeout(json.RawMessage(tc.args)); got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v %v, want %v %v", tc.args, got, ok, tc.want, tc.ok)
		}
	}
}
