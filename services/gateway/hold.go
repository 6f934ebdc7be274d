package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/router"
)

// The approval inside the call (docs/api.md, The MCP endpoint): a MEDIUM or HIGH call
// becomes an execution of one step awaiting a person's decision, and the request is
// held until the decision and the step's result, or until the hold ends.

// progressEvery is how often a held call tells a client that gave a progress token
// that it still waits.
const progressEvery = 5 * time.Second

// ask turns a call that needs approval into an execution of one step and holds the
// request for the decision.
func (g *Gateway) ask(ctx context.Context, c *caller, req *mcp.CallToolRequest, call router.Call) (*mcp.CallToolResult, error) {
	p := req.Params
	args := p.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	// An agent in a loop must not bury the approvers: past this many of its user's
	// calls waiting, it is told to wait for them first.
	// Created whatever the client does meanwhile: a client that went away during the
	// commit could leave the execution committed but reported as failed (the commit's
	// answer lost to the cancelled context), waiting with nobody to take its result;
	// created, it is withdrawn by the hold below, which sees the client gone.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ex, err := g.exec.Create(cctx, executions.Caller{Actor: call.Actor, Role: call.Role}, executions.Input{
		Plan:   &executions.Request{Steps: []executions.RequestStep{{Tool: p.Name, Arguments: args}}},
		Source: executions.SourceMCP, Client: call.Client, ConversationID: call.ConversationID, MaxWaiting: g.opts.MaxWaiting})
	if tw := (*executions.TooManyWaitingError)(nil); errors.As(err, &tw) {
		return errorResult(fmt.Sprintf("Not run: %d of your calls already wait for a person's approval. Wait for them with %s "+
			"(%s lists them) before asking for more.", tw.Waiting, AwaitTool, PendingTool)), nil
	}
	if err != nil {
		return g.refused(p.Name, err)
	}
	if multiRoundTrip(req) && urlElicitation(req) && g.opts.Keys != nil {
		return g.inputRequired(c, req, ex), nil
	}
	return g.hold(ctx, c, req, ex)
}

// hold waits until execution ex is decided and, when approved, run; the outcome is the
// call's result. The wait ends after the gateway's hold time with a pending result
// naming the execution, so the agent can wait again with toolwarden__await_execution.
// A client that gives up (ctx cancelled: notifications/cancelled, a closed stream on
// the stateless protocol, or its session ended, sessioncalls.go) cancels an execution
// nobody has decided on yet.
func (g *Gateway) hold(ctx context.Context, c *caller, req *mcp.CallToolRequest, ex *executions.Execution) (*mcp.CallToolResult, error) {
	id := ex.ID
	mark := g.holding.enter(id)
	defer mark.leave()
	// Subscribed before the state is read, so no decision falls between the two.
	sub := g.bus.Subscribe(executions.TopicOf(id))
	defer func() { sub.Close() }()
	cur, err := g.exec.Get(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, g.abandoned(c, ex, mark, ctx.Err())
		}
		return g.unread(ctx, c, req, ex, err), nil
	}
	ex = cur
	deadline := time.NewTimer(g.holdFor(req))
	defer deadline.Stop()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	started := time.Now()
	g.waiting(ctx, req, ex, started)
	decided := false
	elicited := g.elicitWhileHeld(ctx, req, ex, c.client.base+"/executions/"+ex.ID)
	defer func() { elicited(decided) }()
	for {
		if out, done := g.outcome(ctx, ex); done {
			decided = true
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, g.abandoned(c, ex, mark, ctx.Err())
		case <-g.stop.Done():
			return g.pending(ctx, c, req, ex, "Toolwarden is restarting"), nil
		case <-deadline.C:
			return g.pending(ctx, c, req, ex, ""), nil
		case <-tick.C:
			g.waiting(ctx, req, ex, started)
			if ex.Status != executions.Cancelled {
				continue
			}
			// Cancelled while its step runs: nothing is published when the step ends, so
			// look again now and then.
		case _, ok := <-sub.C:
			if !ok { // dropped for falling behind: the state is read again below
				sub = g.bus.Subscribe(executions.TopicOf(id))
			}
		}
		cur, err = g.exec.Get(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, g.abandoned(c, ex, mark, ctx.Err())
			}
			return g.unread(ctx, c, req, ex, err), nil
		}
		ex = cur
	}
}

// unread is the answer of a hold whose execution could not be read again: pending on
// it, as last read, so the agent waits on with toolwarden__await_execution. An error
// that named no execution would leave it awaiting approval while the agent, calling
// again, asked for a second one.
func (g *Gateway) unread(ctx context.Context, c *caller, req *mcp.CallToolRequest, ex *executions.Execution, err error) *mcp.CallToolResult {
	g.log.Error("gateway: read a held execution", "execution", ex.ID, "err", err)
	return g.pending(ctx, c, req, ex, "its state could not be read just now")
}

// HoldMeta is the _meta key in which a client whose own call timeout is short asks
// for a shorter hold, in seconds; the server's hold is the most it gets.
const HoldMeta = "toolwarden/hold"

// holdFor is how long req is held: the server's hold, or less if the client asks.
func (g *Gateway) holdFor(req *mcp.CallToolRequest) time.Duration {
	if sec, ok := req.Params.Meta[HoldMeta].(float64); ok && sec > 0 {
		// Compared in seconds before converting: a Duration of more than about 292
		// years overflows to a negative one, which would hold the call not at all.
		if sec >= g.opts.Hold.Seconds() {
			return g.opts.Hold
		}
		return time.Duration(sec * float64(time.Second))
	}
	return g.opts.Hold
}

// waiting tells a client that asked for progress that the call waits for a person.
func (g *Gateway) waiting(ctx context.Context, req *mcp.CallToolRequest, ex *executions.Execution, since time.Time) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return
	}
	msg := fmt.Sprintf("Waiting for a person to approve %s (%s risk) in Toolwarden", ex.Title(), ex.Risk)
	switch ex.Status {
	case executions.Executing:
		msg = fmt.Sprintf("Approved by %s; running %s", ex.ApproverName, ex.Title())
	case executions.Cancelled:
		msg = fmt.Sprintf("Cancelled by %s; the running call is finishing: %s", orSomeone(ex.DecidedBy), ex.Title())
	}
	// Progress must grow with every notification: the seconds waited do.
	_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
		Progress: time.Since(since).Seconds(), Message: msg})
}

// abandoned cancels an execution its client stopped waiting for, unless someone
// decided on it already or another hold of it is still open here (mark is this one's),
// and returns the context's error (the SDK answers nothing to a cancelled request).
func (g *Gateway) abandoned(c *caller, ex *executions.Execution, mark *holdMark, cause error) error {
	if last := mark.leave(); !last || g.stop.Err() != nil || ex == nil || ex.Status != executions.AwaitingApproval {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 10*time.Second)
	defer cancel()
	_, err := g.exec.Withdraw(ctx, executions.Caller{Actor: c.actor(), Role: c.p.User.Role}, ex.ID, "cancelled by the client")
	if _, conflict := executions.ConflictStatus(err); err != nil && !conflict {
		g.log.Error("gateway: cancel an abandoned execution", "execution", ex.ID, "err", err)
	}
	return cause
}

// outcome is the held call's result once ex has one: its step's result when it ran,
// or why it did not run. done is false while it waits or runs.
func (g *Gateway) outcome(ctx context.Context, ex *executions.Execution) (*mcp.CallToolResult, bool) {
	switch ex.Status {
	case executions.Planning, executions.AwaitingApproval, executions.Executing:
		return nil, false
	case executions.Expired:
		return errorResult(fmt.Sprintf("Not run: nobody approved %s before its approval expired.", ex.Title())), true
	}
	steps, err := g.exec.Steps(ctx, ex.ID)
	if err != nil {
		g.log.Error("gateway: read the steps of an execution", "execution", ex.ID, "err", err)
		return errorResult(fmt.Sprintf("The call ran as execution %s, but its result could not be read; see it in Toolwarden.", ex.ID)), true
	}
	if ex.Status == executions.Cancelled {
		// Cancelled before its step started, it did not run. Cancelled while it ran, the
		// step finished on its own: its result is the call's, said to be cancelled late.
		for _, st := range steps {
			switch {
			case st.Phase != "run":
			case st.Status == executions.StepRunning:
				return nil, false
			case st.Status == executions.StepInterrupted:
				return errorResult(fmt.Sprintf("Cancelled by %s while the call ran, and Toolwarden stopped before its result was known: it may or may not have taken effect.",
					orSomeone(ex.DecidedBy))), true
			}
		}
	}
	for _, st := range steps {
		if st.Phase != "run" || len(st.Result) == 0 || string(st.Result) == "null" {
			continue
		}
		var res router.Result
		if err := json.Unmarshal(st.Result, &res); err == nil {
			server := ""
			if len(ex.Plan.Steps) > 0 {
				server = ex.Plan.Steps[0].Server
			}
			out := resultOf(&res, server)
			if ex.Status == executions.Cancelled {
				note := &mcp.TextContent{Text: fmt.Sprintf("(Cancelled by %s after the call had started: it ran to the end, and this is its result.)", orSomeone(ex.DecidedBy))}
				out.Content = append([]mcp.Content{note}, out.Content...)
			}
			return out, true
		}
	}
	if ex.Status == executions.Cancelled {
		return errorResult(decisionText(ex)), true
	}
	why := ex.Error
	if why == "" {
		why = "it ended " + string(ex.Status)
	}
	return errorResult(fmt.Sprintf("Approved by %s, but the call failed: %s.", orSomeone(ex.ApproverName), strings.TrimSuffix(why, "."))), true
}

// decisionText says who rejected or cancelled ex and why, as the reviewer wrote it.
func decisionText(ex *executions.Execution) string {
	verb := "Cancelled"
	if ex.Decision == "rejected" {
		verb = "Rejected"
	}
	by := orSomeone(ex.DecidedBy)
	if ex.Reason == "" {
		return fmt.Sprintf("%s by %s; the call did not run.", verb, by)
	}
	return fmt.Sprintf("%s by %s: %s", verb, by, ex.Reason)
}

func orSomeone(name string) string {
	if name == "" {
		return "someone"
	}
	return name
}

// Pending is the structured content of a call still waiting when its hold ended.
type Pending struct {
	Status      string `json:"status"`
	ExecutionID string `json:"execution_id"`
	ApproveURL  string `json:"approve_url"`
}

// PendingMeta is the _meta key of a pending result's Pending when the tool called
// declares an output schema.
const PendingMeta = "toolwarden/pending"

// pending is the result of a call whose hold ended undecided: an error result (the
// call did not run) that tells the agent how to wait on. Its Pending is the structured
// content, unless the tool called declares an output schema: a client may check
// structured content against that (the TypeScript SDK does, error results too, and
// throws instead of answering), so it goes in _meta (PendingMeta) and the text.
func (g *Gateway) pending(ctx context.Context, c *caller, req *mcp.CallToolRequest, ex *executions.Execution, why string) *mcp.CallToolResult {
	url := c.client.base + "/executions/" + ex.ID
	state := "awaiting_approval"
	text := fmt.Sprintf("Waiting for approval: %s (%s risk) has not run yet; a person approves or rejects it at %s.", ex.Title(), ex.Risk, url)
	switch ex.Status {
	case executions.Executing:
		state = "executing"
		text = fmt.Sprintf("Approved by %s and still running: %s.", orSomeone(ex.ApproverName), ex.Title())
	case executions.Cancelled:
		state = "executing"
		text = fmt.Sprintf("Cancelled by %s after it had started; it is finishing: %s.", orSomeone(ex.DecidedBy), ex.Title())
	}
	if why != "" {
		text += " (" + why + ".)"
	}
	text += fmt.Sprintf(` To wait for the outcome, call %s with {"execution_id": %q}.`, AwaitTool, ex.ID)
	res := errorResult(text)
	p := Pending{Status: state, ExecutionID: ex.ID, ApproveURL: url}
	if g.router.DeclaresOutput(context.WithoutCancel(ctx), req.Params.Name) {
		res.Meta = mcp.Meta{PendingMeta: p}
	} else {
		res.StructuredContent = p
	}
	return res
}

// notMine is the answer for an execution id that is not the caller's: the same as for
// one that does not exist, so ids of other people's executions are not revealed.
func notMine(id string) *mcp.CallToolResult {
	return errorResult(fmt.Sprintf("You have no execution with id %q; %s lists the ones waiting for a decision.", id, PendingTool))
}

// await is toolwarden__await_execution: the caller's own execution, held again.
func (g *Gateway) await(ctx context.Context, c *caller, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		ExecutionID string `json:"execution_id"`
	}
	if err := json.Unmarshal(argsOf(req), &in); err != nil || strings.TrimSpace(in.ExecutionID) == "" {
		return errorResult(`Invalid arguments; correct them and call again:` + "\n- execution_id: give the id a pending result named, as a string"), nil
	}
	ex, err := g.exec.Get(ctx, in.ExecutionID)
	if errors.Is(err, executions.ErrNotFound) {
		return notMine(in.ExecutionID), nil
	}
	if err != nil {
		return g.refused(AwaitTool, err)
	}
	if ex.RequestedBy == nil || *ex.RequestedBy != c.p.User.ID {
		return notMine(in.ExecutionID), nil
	}
	if ex.Source != executions.SourceMCP {
		// A plan made on a page or through the API is followed there: its outcome is not
		// one call's result, and an agent giving up must not withdraw it.
		return errorResult(fmt.Sprintf("Execution %s was not asked for by a call through MCP; follow it in Toolwarden at %s.",
			ex.ID, c.client.base+"/executions/"+ex.ID)), nil
	}
	// Each wait holds a goroutine, a bus subscription, timers and a read per event for
	// up to the hold; the rate limit alone would let one user open a thousand (or, with
	// no limit, any number). Past the cap the answer is the one a hold's end gives, so
	// the client simply asks again later.
	release, n, ok := g.awaits.admit(c.p.User.ID, g.opts.MaxAwaiting)
	if !ok {
		// A pause first, holding nothing: answered at once, a client told to call again
		// would spin on it, a read of the execution each turn.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(overAwaitPause):
		}
		if out, done := g.outcome(ctx, ex); done {
			return out, nil
		}
		return g.pending(ctx, c, req, ex, fmt.Sprintf("%d of your waits are already open, the most one person may; call again once one has ended", n)), nil
	}
	defer release()
	return g.hold(ctx, c, req, ex)
}

// overAwaitPause is how long a wait past MaxAwaiting pauses before it answers.
var overAwaitPause = 2 * time.Second

// awaits counts the open toolwarden__await_execution waits by user id.
type awaits struct {
	mu     sync.Mutex
	byUser map[string]int
}

// admit counts one more wait of user uid's unless they hold most already (n);
// release counts it off.
func (a *awaits) admit(uid string, most int) (release func(), n int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := a.byUser[uid]; n >= most {
		return nil, n, false
	}
	if a.byUser == nil {
		a.byUser = map[string]int{}
	}
	a.byUser[uid]++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.byUser[uid]--; a.byUser[uid] <= 0 {
			delete(a.byUser, uid)
		}
	}, 0, true
}

// holding counts the open holds of each execution on this replica. An execution may be
// held by more than one request: the call that asked for it and an await of it (from
// the same agent, or a second client of the same person); one of them giving up must
// not withdraw the execution another still waits on, so only the last one does.
type holding struct {
	mu   sync.Mutex
	byID map[string]int
}

// holdMark is one open hold of an execution.
type holdMark struct {
	h    *holding
	id   string
	once sync.Once
	last bool
}

func (h *holding) enter(id string) *holdMark {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID == nil {
		h.byID = map[string]int{}
	}
	h.byID[id]++
	return &holdMark{h: h, id: id}
}

// leave ends the hold (once, whoever calls it) and reports whether it was the last
// open hold of its execution: of two holds ending together, exactly one is last.
func (m *holdMark) leave() bool {
	m.once.Do(func() {
		m.h.mu.Lock()
		defer m.h.mu.Unlock()
		if m.h.byID[m.id]--; m.h.byID[m.id] <= 0 {
			delete(m.h.byID, m.id)
			m.last = true
		}
	})
	return m.last
}

// listPending is toolwarden__list_pending: the caller's executions waiting for a decision.
func (g *Gateway) listPending(ctx context.Context, c *caller) (*mcp.CallToolResult, error) {
	// Only calls through MCP: a plan of a page or the API is not a call to wait for, and
	// hundreds of them must not crowd the calls out of the page.
	page, err := g.exec.List(ctx, executions.Query{Status: []executions.Status{executions.AwaitingApproval},
		RequestedBy: c.p.User.ID, Source: executions.SourceMCP, Limit: 200})
	if err != nil {
		return g.refused(PendingTool, err)
	}
	type item struct {
		ExecutionID string    `json:"execution_id"`
		Title       string    `json:"title"`
		Risk        string    `json:"risk"`
		CreatedAt   time.Time `json:"created_at"`
		ExpiresAt   time.Time `json:"expires_at,omitzero"`
		ApproveURL  string    `json:"approve_url"`
	}
	out := struct {
		Pending []item `json:"pending"`
	}{Pending: []item{}}
	var b strings.Builder
	for _, ex := range page.Items {
		it := item{ExecutionID: ex.ID, Title: ex.Title(), Risk: ex.Risk, CreatedAt: ex.CreatedAt,
			ApproveURL: c.client.base + "/executions/" + ex.ID}
		if ex.ExpiresAt != nil {
			it.ExpiresAt = *ex.ExpiresAt
		}
		out.Pending = append(out.Pending, it)
		fmt.Fprintf(&b, "\n- %s: %s (%s risk), asked %s", ex.ID, it.Title, ex.Risk, ex.CreatedAt.UTC().Format(time.RFC3339))
	}
	text := "Nothing of yours waits for a decision."
	if len(out.Pending) > 0 {
		text = fmt.Sprintf("%d of your calls wait for a decision (call %s with an id to wait for one):%s", len(out.Pending), AwaitTool, b.String())
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
}

func argsOf(req *mcp.CallToolRequest) json.RawMessage {
	if len(req.Params.Arguments) == 0 {
		return json.RawMessage(`{}`)
	}
	return req.Params.Arguments
}
