package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestResult is what "Test connection" reports.
type TestResult struct {
	OK        bool                `json:"ok"`
	Error     string              `json:"error,omitempty"`
	ConnectMS float64             `json:"connect_ms"` // start to initialized
	LatencyMS float64             `json:"latency_ms"` // one ping round trip, the health probe
	Info      registry.ServerInfo `json:"server_info"`
	ToolCount int                 `json:"tool_count"`
	Tools     []string            `json:"tools,omitempty"` // the first few names
	// ToolsCut says why the listing stopped before its end (past the test's limit):
	// ToolCount is then the tools counted until there. "" when the list was read whole.
	ToolsCut string   `json:"tools_cut,omitempty"`
	Stderr   []string `json:"stderr,omitempty"`
	// TimedOutAfter is the limit that ran out when the server did not answer in time (0
	// when it failed otherwise), so a reply can say so in people's words (seed 004: "The
	// connection timed out after 30 seconds").
	TimedOutAfter time.Duration `json:"-"`
	// Busy: the test did not run, Options.MaxTests others were running (ErrTestsBusy).
	// The API answers it as that error (503), not as a server that failed.
	Busy bool `json:"-"`
}

// Test opens a throwaway session with cfg, runs the health probe and lists the tools,
// then closes it. Nothing is stored: this is "Test connection" before Save. The whole
// attempt ends after Options.TestTimeout (or the server's own timeout, when shorter), or
// when ctx ends (the person cancelled, or closed the page).
func (m *Manager) Test(ctx context.Context, cfg registry.Connection) TestResult {
	return m.test(ctx, cfg, func(string) {})
}

// Steps of a connection test, as progress reports them.
const (
	StepStarting   = "starting the server"
	StepConnecting = "connecting and initializing"
	StepPinging    = "checking health (ping)"
	StepListing    = "listing tools"
)

func (m *Manager) test(ctx context.Context, cfg registry.Connection, step func(string)) TestResult {
	release, err := m.acquireTest(ctx)
	if errors.Is(err, ErrTestsBusy) {
		return TestResult{Busy: true, Error: "the test did not run: " + err.Error()}
	}
	if err != nil {
		return TestResult{Error: err.Error()}
	}
	// The session is closed after the result is given (a stdio server may take seconds
	// to stop), still holding the test's slot: the person waits at most the bound.
	var s *session
	defer func() {
		if s == nil {
			release()
			return
		}
		go func() {
			defer release()
			s.close()
		}()
	}()
	bound := m.opts.TestTimeout
	if cfg.Timeout > 0 && cfg.Timeout < bound {
		bound = cfg.Timeout
	}
	cfg.Timeout = bound
	ctx, cancelAll := context.WithTimeout(ctx, bound)
	defer cancelAll()
	parent := ctx
	stderr := newLineBuffer(50, 2048)
	mask := redactor(cfg)
	// As conn.redact: NULs replaced and cut, since the server picks its error's length
	// and the test's page polls the result.
	redact := func(s string) string { return registry.ClipError(textcheck.Storable(mask(s))) }
	stderr.setRedact(redact)
	var res TestResult
	fail := func(err error) TestResult {
		res.OK = false
		res.Error = redact(err.Error())
		if errors.Is(err, ErrTimeout) || errors.Is(parent.Err(), context.DeadlineExceeded) {
			res.TimedOutAfter = bound
		}
		if parent.Err() != nil && !errors.Is(err, ErrTimeout) {
			if errors.Is(parent.Err(), context.DeadlineExceeded) {
				res.Error = fmt.Sprintf("no complete answer within %s (the test's limit): %s", bound, res.Error)
			} else {
				res.Error = "cancelled: " + res.Error
			}
		}
		res.Stderr = stderr.Lines()
		return res
	}
	if cfg.Type == registry.TypeStdio {
		step(StepStarting)
	}
	lim := m.msgLimit(cfg)
	ep, err := newEndpoint(cfg, m.opts.InheritEnv, m.confiner, stderr, lim, m.templateOptions(), m.opts.Builtin, m.opts.Egress)
	if err != nil {
		return fail(err)
	}
	m.track(ep)
	start := time.Now()
	step(StepConnecting)
	cs, cancel, err := connect(ctx, m.newClient(lim.sdk, nil), ep, cfg.Timeout)
	if err != nil {
		return fail(err)
	}
	s = &session{cs: cs, ep: ep, cancel: cancel}
	res.ConnectMS = ms(time.Since(start))
	res.Info = *serverInfo(cs, maskerOf(cfg))
	step(StepPinging)
	lat, err := probe(ctx, cs, cfg.Timeout)
	if err != nil {
		return fail(err)
	}
	res.LatencyMS = ms(lat)
	step(StepListing)
	lctx, lcancel := context.WithTimeout(ctx, cfg.Timeout)
	defer lcancel()
	count, err := countTools(lctx, cs, listLimits{maxPages: m.opts.MaxPages, timeout: cfg.Timeout}, &res)
	if err != nil {
		return fail(err)
	}
	res.ToolCount = count
	res.OK = true
	res.Stderr = stderr.Lines()
	return res
}

// What a connection test reads of the tool list: it only counts the tools and names
// the first few, so it needs far less than a discovery, and several run at once.
const (
	testListBytes = 16 << 20 // the tools as the server sent them, all pages together
	testToolNames = 12
)

// countTools pages through tools/list counting the tools discovery would store
// (badToolName) and keeping the first testToolNames names in res.Tools; no definition
// is kept. Past testListBytes it stops and says so in res.ToolsCut, the count so far
// returned. Cursors and pages are bounded as discovery's are (lim).
func countTools(ctx context.Context, cs *mcp.ClientSession, lim listLimits, res *TestResult) (int, error) {
	seen := newCursorSet()
	cursor := ""
	count, size := 0, 0
	for pages := 1; ; pages++ {
		pctx, cancel := context.WithTimeout(ctx, lim.pageTimeout())
		page, err := cs.ListTools(pctx, &mcp.ListToolsParams{Cursor: cursor})
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
				return count, fmt.Errorf("tools/list page %d: no answer within %s: %w", pages, lim.pageTimeout(), ErrTimeout)
			}
			return count, fmt.Errorf("tools/list page %d: %w", pages, err)
		}
		for _, t := range page.Tools {
			if t == nil || badToolName(t.Name) != "" {
				continue
			}
			count++
			size += len(mustJSON(t))
			if len(res.Tools) < testToolNames {
				res.Tools = append(res.Tools, textcheck.Storable(t.Name))
			}
		}
		if page.NextCursor == "" {
			return count, nil
		}
		if size > testListBytes {
			res.ToolsCut = fmt.Sprintf("the tool list passed %d MiB after %d pages, the test's limit: %d tools counted, more not read (discovery reads up to %d MiB)",
				testListBytes>>20, pages, count, maxListBytes>>20)
			return count, nil
		}
		if err := lim.next(seen, page.NextCursor, pages); err != nil {
			return count, fmt.Errorf("tools/list %w", err)
		}
		cursor = page.NextCursor
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
