package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/services/executions"
)

// The approval's extra channels, for clients that can open a URL for their user:
//
//   - a 2025-11-25 stateful session whose client declares URL-mode elicitation gets an
//     elicitation pointing at the approval page while its call is held, and
//     notifications/elicitation/complete once a person has decided;
//   - a 2026-07-28 client that declares it gets an input_required result at once: a URL
//     elicitation and a requestState, signed and bound to the user, the execution, the
//     call's tool and arguments and an expiry, usable once. Its retry is held like
//     any call and returns the result.
//
// No credential is ever in the URL: it is the execution's page, which asks the person
// to sign in.

// approvalInput is the id of the URL elicitation in an input_required result.
const approvalInput = "approval"

// stateTTL bounds how long a client may take to retry with a requestState.
const stateTTL = 15 * time.Minute

// urlElicitation reports whether the client of req can be sent a URL elicitation.
func urlElicitation(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// multiRoundTrip reports whether req follows the 2026-07-28 protocol, whose results
// may ask for input.
func multiRoundTrip(req *mcp.CallToolRequest) bool { return req.ProtocolVersion() >= statelessVersion }

func approvalMessage(ex *executions.Execution) string {
	return fmt.Sprintf("Toolwarden: %s (%s risk) needs a person's approval before it runs. Open the page to approve or reject it.",
		ex.Title(), ex.Risk)
}

// elicitWhileHeld sends a stateful session's client a URL elicitation for ex and
// returns what to call once the hold ends, which tells the client the elicitation is
// complete when ex was decided. The client's answer (it opened the page, or not)
// changes nothing: the decision is the person's, in the page. Once the client has
// answered, a later hold of ex in the same session (an agent waiting again with
// toolwarden__await_execution) does not ask again: an agent looping on the wait would
// otherwise prompt its person at every hold.
func (g *Gateway) elicitWhileHeld(ctx context.Context, req *mcp.CallToolRequest, ex *executions.Execution, url string) func(decided bool) {
	ss := req.Session
	if ss == nil || ss.ID() == "" || multiRoundTrip(req) || !urlElicitation(req) {
		return func(bool) {}
	}
	key := elicitKey{session: ss.ID(), execution: ex.ID}
	complete := func(decided bool) {
		if !decided {
			return
		}
		g.elicited.forget(key)
		nctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer stop()
		_ = ss.NotifyElicitationComplete(nctx, &mcp.ElicitationCompleteParams{ElicitationID: ex.ID})
	}
	if g.elicited.answered(key) {
		return complete
	}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer cancel()
		_, err := ss.Elicit(ectx, &mcp.ElicitParams{Mode: "url", URL: url, ElicitationID: ex.ID, Message: approvalMessage(ex)})
		switch {
		case err == nil:
			g.elicited.mark(key)
		case ectx.Err() == nil:
			g.log.Debug("gateway: the client did not take the approval link", "execution", ex.ID, "err", err)
		}
	}()
	return func(decided bool) {
		cancel()
		complete(decided)
	}
}

// elicited are the approval links a stateful session's client has answered, by session
// and execution, so that each is asked once per session. An entry ends when its
// execution is decided in a hold, when its session ends, or after elicitedFor (the
// person is asked again at most that often).
type elicited struct {
	mu    sync.Mutex
	at    map[elicitKey]time.Time
	swept time.Time // when entries past elicitedFor were last dropped
}

type elicitKey struct{ session, execution string }

const elicitedFor = time.Hour

func (e *elicited) mark(k elicitKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if now.Sub(e.swept) > time.Minute { // not at every mark: a sweep walks them all
		e.swept = now
		for old, at := range e.at {
			if now.Sub(at) > elicitedFor {
				delete(e.at, old)
			}
		}
	}
	if e.at == nil {
		e.at = map[elicitKey]time.Time{}
	}
	e.at[k] = now
}

// forgetSession drops the entries of a session that ended.
func (e *elicited) forgetSession(session string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.at {
		if k.session == session {
			delete(e.at, k)
		}
	}
}

func (e *elicited) answered(k elicitKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.at[k]
	return ok && time.Since(at) <= elicitedFor
}

func (e *elicited) forget(k elicitKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.at, k)
}

// retryState is what a requestState binds.
type retryState struct {
	User      string `json:"u"`
	Execution string `json:"e"`
	Digest    string `json:"d"` // callDigest of the call
	Expires   int64  `json:"x"` // unix seconds
	Nonce     string `json:"n"`
}

const stateDomain = "toolwarden mcp request state v1\x00"

// callDigest binds a state to the tool and arguments of the call it was given for.
func callDigest(name string, args json.RawMessage) string {
	canon, err := canonjson.Canonical(args)
	if err != nil || len(args) == 0 {
		canon = []byte("{}")
	}
	sum := sha256.Sum256(append([]byte(name+"\x00"), canon...))
	return hex.EncodeToString(sum[:])
}

// sign makes the requestState of st: its JSON and its MAC under the server's key.
func (g *Gateway) sign(st retryState) string {
	body, _ := json.Marshal(st)
	mac := g.opts.Keys.MAC(append([]byte(stateDomain), body...))
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(mac)
}

var errBadState = errors.New("this requestState was not made by this server for you and this call; call the tool again without it")

// errStaleState is a requestState this server made for the caller and the call, that
// has expired or was used already. Its execution may still be approved: calling the
// tool again would ask for a second approval and could run the tool twice, so the
// client is pointed at the execution instead (retried).
var errStaleState = errors.New("this requestState has expired or was used already")

// verify checks a requestState for caller c and the call req, and claims it. A state
// that is the caller's but stale comes back with errStaleState.
func (g *Gateway) verifyState(ctx context.Context, c *caller, req *mcp.CallToolRequest) (*retryState, error) {
	body64, mac64, ok := strings.Cut(req.Params.RequestState, ".")
	body, err1 := base64.RawURLEncoding.DecodeString(body64)
	mac, err2 := base64.RawURLEncoding.DecodeString(mac64)
	if !ok || err1 != nil || err2 != nil || !g.opts.Keys.VerifyMAC(append([]byte(stateDomain), body...), mac) {
		return nil, errBadState
	}
	var st retryState
	if json.Unmarshal(body, &st) != nil || st.User != c.p.User.ID || st.Digest != callDigest(req.Params.Name, req.Params.Arguments) {
		return nil, errBadState
	}
	if time.Now().Unix() > st.Expires {
		return &st, errStaleState
	}
	fresh, err := g.exec.ClaimRetry(ctx, st.Execution, st.Nonce, time.Unix(st.Expires, 0))
	if err != nil {
		return nil, err
	}
	if !fresh {
		return &st, errStaleState
	}
	return &st, nil
}

// inputRequired is the 2026-07-28 answer to a call that needs approval: open this
// page, then call again with this state.
func (g *Gateway) inputRequired(c *caller, req *mcp.CallToolRequest, ex *executions.Execution) *mcp.CallToolResult {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	st := retryState{User: c.p.User.ID, Execution: ex.ID, Digest: callDigest(req.Params.Name, req.Params.Arguments),
		Expires: time.Now().Add(stateTTL).Unix(), Nonce: hex.EncodeToString(nonce)}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approvalInput: &mcp.ElicitParams{Mode: "url", URL: c.client.base + "/executions/" + ex.ID,
			ElicitationID: ex.ID, Message: approvalMessage(ex)}},
		RequestState: g.sign(st),
	}
}

// retried serves a 2026-07-28 call that comes back with its requestState: the
// execution it names, held until decided.
func (g *Gateway) retried(ctx context.Context, c *caller, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	st, err := g.verifyState(ctx, c, req)
	if errors.Is(err, errBadState) {
		return errorResult("Not run: " + err.Error() + "."), nil
	}
	stale := errors.Is(err, errStaleState)
	if err != nil && !stale {
		return g.refused(req.Params.Name, err)
	}
	ex, err := g.exec.Get(ctx, st.Execution)
	if stale && errors.Is(err, executions.ErrNotFound) {
		return errorResult("Not run: " + errStaleState.Error() + ", and its execution is gone; call the tool again without it."), nil
	}
	if err != nil {
		return g.refused(req.Params.Name, err)
	}
	if stale {
		// Answered as a hold's end is, without holding: the outcome once there is one,
		// else the execution to wait on.
		if out, done := g.outcome(ctx, ex); done {
			return out, nil
		}
		return g.pending(ctx, c, req, ex, errStaleState.Error()+"; calling the tool again would ask for another approval"), nil
	}
	return g.hold(ctx, c, req, ex)
}

// relayTool is a tool of the SDK's own table, never listed, through which an
// input_required result leaves: the SDK marks a result input_required only on its own
// tools/call path (the mark is unexported), so the gateway hands the result to that
// path. A client naming it reaches the router, which knows no such tool.
const relayTool = "toolwarden__relay"

type relayKey struct{}

// relay returns res through the SDK's tools/call.
func (g *Gateway) relay(ctx context.Context, method string, req *mcp.CallToolRequest, next mcp.MethodHandler, res *mcp.CallToolResult) (mcp.Result, error) {
	params := *req.Params
	params.Name, params.Arguments = relayTool, json.RawMessage(`{}`)
	rr := *req
	rr.Params = &params
	return next(context.WithValue(ctx, relayKey{}, res), method, &rr)
}

func (g *Gateway) relayed(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, ok := ctx.Value(relayKey{}).(*mcp.CallToolResult)
	if !ok {
		return nil, errNoCaller
	}
	return res, nil
}
