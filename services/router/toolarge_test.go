package router_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// Security finding 11 of issue #17: a result over --max-message-size answers
// result_too_large on every transport, is not retried, does not open the circuit, and
// leaves the session as it was: the next call goes through the same session (for stdio,
// the same process), and a result just under the cap passes.
func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	const max = 256 << 10
	for _, kind := range []string{"stdio", "sse", "streamable_http", "streamable_http_json"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			// Two failures in a row would open the circuit; three oversized answers must not.
			e := startWith(t, &router.Options{BreakerFailures: 2}, func(o *mcpclient.Options) { o.MaxMessageBytes = max })
			opts := &mcptest.Options{Name: "huge", Big: true, JSONResponse: kind == "streamable_http_json"}
			var spec registry.Spec
			pid := func() int { return 0 }
			switch kind {
			case "stdio":
				control := filepath.Join(t.TempDir(), "control")
				cmd, args, env := mcptest.StdioCommand(opts, control)
				spec = registry.Spec{Type: registry.TypeStdio, Command: cmd, Args: args, Env: env}
				pid = func() int {
					p, err := mcptest.WaitControl(t, control).PID()
					if err != nil {
						t.Fatal(err)
					}
					return p
				}
			case "sse":
				spec = registry.Spec{Type: registry.TypeSSE, URL: mcptest.StartHTTP(t, opts).SSEURL()}
			default:
				spec = registry.Spec{Type: registry.TypeStreamableHTTP, URL: mcptest.StartHTTP(t, opts).URL()}
			}
			spec.Name, spec.Enabled, spec.Trusted = "huge", true, true // trusted and read-only: retryable
			sv := e.register(spec, "big", "echo")
			before, err := e.mgr.Session(sv.ID)
			if err != nil {
				t.Fatal(err)
			}
			pidBefore := pid()

			for _, n := range []int{4 * max, max + 1, 64 * max} {
				res, err := e.call("huge__big", fmt.Sprintf(`{"bytes":%d}`, n))
				var re *router.Error
				if !errors.As(err, &re) || re.Code != router.CodeResultTooLarge {
					t.Fatalf("big %d: got %s, %v, want result_too_large", n, summary(res), err)
				}
				want := "result too large: huge sent more than 256 KiB; raise --max-message-size or ask for less"
				if re.Message != want || re.Kind != fault.KindUpstream || !re.Ran {
					t.Errorf("big %d: got %q (kind %s, ran %v), want %q (upstream, ran)", n, re.Message, re.Kind, re.Ran, want)
				}
			}
			res, err := e.call("huge__echo", `{"message":"after"}`)
			if err != nil || router.TextOf(res.Content) != "Echo: after" {
				t.Fatalf("echo after: got %s, %v, want Echo: after", summary(res), err)
			}
			res, err = e.call("huge__big", fmt.Sprintf(`{"bytes":%d}`, max-1024))
			if err != nil {
				t.Fatalf("big just under the cap: %v", err)
			}
			if text := router.TextOf(res.Content); len(text) != max-1024 || strings.Trim(text, "x") != "" {
				t.Errorf("big just under the cap: got %d bytes, want %d x", len(text), max-1024)
			}

			after, err := e.mgr.Session(sv.ID)
			if err != nil || after != before {
				t.Errorf("session: got %p (%v), want the one from before, %p", after, err, before)
			}
			if got := pid(); got != pidBefore {
				t.Errorf("server process: got pid %d, want %d (not restarted)", got, pidBefore)
			}
			if snap := e.mgr.Snapshot(sv.ID); snap.Status != registry.StatusConnected || snap.Failures != 0 || snap.BreakerOpen {
				t.Errorf("server: got %+v, want connected without failures", snap)
			}
			e.flush()
			if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE NOT success AND error_code = 'result_too_large'
				AND error->>'message' LIKE 'result too large: huge sent more than 256 KiB%' AND metadata->>'attempts' IS NULL`); n != 3 {
				t.Errorf("failed usage rows tried once: got %d, want 3", n)
			}
			if n := e.count(`SELECT count(*) FROM events WHERE topic = 'calls' AND kind = 'tool.failed' AND payload->>'code' = 'result_too_large'`); n != 3 {
				t.Errorf("tool.failed events: got %d, want 3", n)
			}
		})
	}
}

// summary is a result's text, shortened: a result over the cap is no message for a log.
func summary(res *router.Result) string {
	if res == nil {
		return "no result"
	}
	text := router.TextOf(res.Content)
	if len(text) > 80 {
		return fmt.Sprintf("%.80q... (%d bytes)", text, len(text))
	}
	return fmt.Sprintf("%q", text)
}
