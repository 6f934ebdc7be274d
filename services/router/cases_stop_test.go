package router_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
)

// saveCases saves n cases of tool id with args.
func (e *env) saveCases(id string, n int, args string) []tools.TestCase {
	e.t.Helper()
	var cases []tools.TestCase
	for i := range n {
		tc, err := e.tools.SaveTestCase(e.ctx, admin, id, tools.TestCase{Name: "case " + strconv.Itoa(i), Arguments: json.RawMessage(args)})
		if err != nil {
			e.t.Fatal(err)
		}
		cases = append(cases, tc)
	}
	return cases
}

// A tool limited to 60 calls a minute (a burst of 6) runs 8 saved cases: the run waits
// for the limit between cases rather than stop at the seventh. 20 cases need more than
// the limit lets through while a run may wait: refused before any case reaches the
// server, with a message that says the limit and how many cases fit.
func TestRunCasesWithinToolRate(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("rl", true, "add")
	sixty := 60
	id := e.tool("rl__add").ID
	if _, err := e.tools.Update(e.ctx, admin, id, tools.Patch{RateLimit: &sixty}); err != nil {
		t.Fatal(err)
	}
	base := router.Call{Tool: id, Actor: admin, Role: auth.RoleAdmin, Source: router.SourceTestPanel, Test: true}

	many := e.saveCases(id, 20, `{"a":1,"b":2}`)
	results, err := e.r.RunCases(e.ctx, base, many)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeRateLimited || results != nil {
		t.Fatalf("20 cases at 60 a minute: got %d results, %v; want rate_limited before any ran", len(results), err)
	}
	if !strings.Contains(re.Message, "60 calls a minute") || !strings.Contains(re.Message, "running 20 cases") || !strings.Contains(re.Message, "at most 16") {
		t.Errorf("the refusal %q: want the tool's limit, the cases and how many fit", re.Message)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE tool_id = $1 AND success`, id); n != 0 {
		t.Fatalf("calls of the tool after a run refused up front: %d, want 0", n)
	}

	began := time.Now()
	results, err = e.r.RunCases(e.ctx, base, many[:8])
	if err != nil || len(results) != 8 {
		t.Fatalf("8 cases at 60 a minute: got %d results, %v; want all 8 run", len(results), err)
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("case %s: %s", r.Name, r.Message)
		}
	}
	if took := time.Since(began); took < time.Second {
		t.Errorf("8 cases past a burst of 6 took %s: the run should have waited for the limit", took)
	}
}

// A run stopped part way (here the caller goes away during the third case) returns
// the outcomes of the cases that ran with a CasesStopped that says how far it went;
// the refusal is still found by errors.As.
func TestRunCasesStoppedPartWay(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("pw", true, "echo")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var calls atomic.Int32
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(c context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" && calls.Add(1) == 3 {
				cancel()
				<-c.Done() // the router gives up on the call
			}
			return next(c, method, req)
		}
	})
	id := e.tool("pw__echo").ID
	cases := e.saveCases(id, 5, `{"message":"hi"}`)
	results, err := e.r.RunCases(ctx, router.Call{Tool: id, Actor: admin, Role: auth.RoleAdmin, Source: router.SourceTestPanel, Test: true}, cases)
	var stop *router.CasesStopped
	if !errors.As(err, &stop) || len(results) != 2 || stop.Ran != 2 || stop.Of != 5 || codeOf(err) != router.CodeCancelled {
		t.Fatalf("a run whose caller left during case 3: got %d results, %v; want the 2 that ran and a cancelled stop", len(results), err)
	}
	if !strings.HasPrefix(stop.Message(), "2 of 5 cases ran, then") {
		t.Errorf("the stop says %q", stop.Message())
	}
}

// A server that does not answer stops a run after two cases in a row time out, not
// after every case waited the tool's timeout; the timed-out cases show the time they
// took and their message has no Go error prefix.
func TestRunCasesStopOnSilentServer(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.server("hung", true, "sleep")
	id := e.tool("hung__sleep").ID
	half := 500
	if _, err := e.tools.Update(e.ctx, admin, id, tools.Patch{TimeoutMS: &half}); err != nil {
		t.Fatal(err)
	}
	cases := e.saveCases(id, 12, `{"ms":60000}`)
	began := time.Now()
	results, err := e.r.RunCases(e.ctx, router.Call{Tool: id, Actor: admin, Role: auth.RoleAdmin, Source: router.SourceTestPanel, Test: true,
		Approval: router.Approval{Confirmed: true, Phrase: "hung__sleep"}}, cases)
	took := time.Since(began)
	var stop *router.CasesStopped
	if !errors.As(err, &stop) || !stop.Silent || len(results) != 2 || codeOf(err) != router.CodeTimeout {
		t.Fatalf("12 cases against a hung server: got %d results, %v; want a stop after 2 timeouts", len(results), err)
	}
	if !strings.Contains(stop.Message(), "the server is not answering: 2 of 12 cases ran") {
		t.Errorf("the stop says %q", stop.Message())
	}
	if took > 5*time.Second {
		t.Errorf("the run took %s", took)
	}
	for _, r := range results {
		if r.Passed || r.DurationMS < 400 || strings.Contains(r.Message, "router: timeout") || !strings.Contains(r.Message, "did not answer within") {
			t.Errorf("timed-out case %s: passed %v, %.0f ms, %q; want failed, its time, the message without the Go prefix", r.Name, r.Passed, r.DurationMS, r.Message)
		}
	}
}
