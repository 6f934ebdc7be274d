package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sony/gobreaker/v2"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// blockingTimeout bounds a call that waits for a person (Blocking): no tool timeout,
// only a day, after which nobody is waiting any more.
const blockingTimeout = 24 * time.Hour

// Blocking reports whether the tool waits for a person to answer
// (builtin__user_collaboration, seed 000 §4: no timeout, the person has full control),
// so its call is not cut off by the tool's timeout; the caller giving up still ends it.
func Blocking(qualified string) bool { return qualified == "builtin__user_collaboration" }

// commandMargin is how long a call of a foreground run_command outlasts its command's
// timeout: the command is killed first and its output still answers.
const commandMargin = 5 * time.Second

// commandTimeout is the command's own timeout when the call is a foreground
// run_command of the built-in terminal tool (builtin.CommandTimeout): its timeout may
// be longer than any tool timeout (an hour against 10 minutes), and the tool kills it then.
func commandTimeout(qualified string, args json.RawMessage) (time.Duration, bool) {
	if qualified != builtin.TerminalToolName {
		return 0, false
	}
	return builtin.CommandTimeout(args)
}

// maxProgressMessage bounds a progress notification's message as recorded and shown.
const maxProgressMessage = 1024

// execute calls the server with the tool's timeout, waiting for a server that is
// still connecting, retrying a retryable tool after transport failures, behind the
// server's circuit breaker (except a Blocking call). It returns the masks for what the
// call returned: those of the session its last attempt ran on.
func (r *Router) execute(ctx context.Context, e *entry, args json.RawMessage, identity string, onProgress func(Progress), rec *callRecord) (*mcp.CallToolResult, int, masks, error) {
	timeout := time.Duration(e.t.Timeout()) * time.Millisecond
	blocking := Blocking(e.t.QualifiedName())
	if blocking {
		timeout = blockingTimeout
	} else if d, ok := commandTimeout(e.t.QualifiedName(), args); ok {
		timeout = max(timeout, d+commandMargin)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The masker of the session the current attempt runs on; set before its call is
	// sent, so before any of its progress, and read by progress on another goroutine.
	var served atomic.Pointer[secrets.Masker]
	progress := func(p *mcp.ProgressNotificationParams) {
		pr := Progress{Progress: p.Progress, Total: p.Total, Message: r.masksOf(e, served.Load()).progress(p.Message)}
		if onProgress != nil {
			onProgress(pr)
		}
		rec.progress(pr)
	}
	cb := r.breaker(e.t.ServerID, e.t.Server).cb
	attempts := 0
	op := func() (*mcp.CallToolResult, error) {
		attempts++
		if err := r.waitConnected(cctx, e); err != nil {
			return nil, err
		}
		call := func() (*mcp.CallToolResult, error) {
			// Pinned to the definition the call was vetted against (the tool row check
			// read): this replica's session may list another, since another replica's
			// discovery may have stored what its own session lists.
			res, err := r.mcp.CallToolServed(cctx, e.t.ServerID, identity, e.t.Name, e.t.DefinitionHash, args, progress, func(m *secrets.Masker) { served.Store(m) })
			if err != nil && cctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				// A context error while the call's own context is alive is the session's:
				// it ended under the call (a crashed server's session is closed, which can
				// reach its pending calls before the read error does). That is the server
				// failing, not the caller giving up, so it must count against the circuit.
				err = fmt.Errorf("the server's session ended during the call (%v)", err)
			}
			return res, err
		}
		var res *mcp.CallToolResult
		var err error
		if blocking {
			// A call waiting hours for a person says nothing of the server's health, and
			// as a half-open circuit's one trial call it would pause everyone's calls.
			res, err = call()
		} else {
			res, err = cb.Execute(call)
		}
		if err == nil {
			return res, nil
		}
		ce := r.classify(cctx, ctx, e, err, timeout)
		// A server's refusal (bad arguments) gets the same answer when asked again. A
		// question to a person is not asked again either: its session ending cancelled it,
		// and a second would hide an answer given just then (the agent may ask anew).
		if !e.retry || blocking || ce.Code != CodeUpstream || paused(err) || serverRefused(err) || errors.Is(err, mcpclient.ErrIdentityChanged) {
			return nil, backoff.Permanent(ce)
		}
		return nil, ce
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = r.opts.RetryBackoff
	res, err := backoff.Retry(cctx, op, backoff.WithBackOff(bo), backoff.WithMaxTries(r.opts.RetryAttempts),
		backoff.WithMaxElapsedTime(timeout))
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			ce = r.classify(cctx, ctx, e, err, timeout)
		}
		return nil, attempts, r.masksOf(e, served.Load()), ce
	}
	return res, attempts, r.masksOf(e, served.Load()), nil
}

// classify turns a failed call into the caller's error: the caller went away, the
// tool's timeout passed, or the server failed.
func (r *Router) classify(cctx, ctx context.Context, e *entry, err error, timeout time.Duration) *Error {
	switch {
	case ctx.Err() != nil:
		return errorOf(CodeCancelled, "the caller cancelled the call").ran()
	case cctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return fail(CodeTimeout, "%s did not answer within %s (its timeout); "+
			"raise the tool's timeout or ask for less", e.t.QualifiedName(), timeout).ran()
	case errors.Is(err, gobreaker.ErrOpenState):
		return fail(CodeUpstream, "calls to %s are paused after %d failures in a row; they resume within %s",
			e.t.Server, r.opts.BreakerFailures, r.opts.BreakerCooldown)
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return fail(CodeUpstream, "calls to %s are paused after %d failures in a row, while a trial call tests the server",
			e.t.Server, r.opts.BreakerFailures)
	case errors.Is(err, mcpclient.ErrIdentityChanged):
		return fail(CodeStale, "the connection settings of server %s changed since %s was approved; plan and approve it again",
			e.t.Server, e.t.QualifiedName())
	case errors.Is(err, mcpclient.ErrDefinitionDiffers):
		// Refused before it was sent: this replica's session runs another definition than
		// the vetted one. Not retried (asking again meets the same session).
		lists := "lists a different definition of tool " + e.t.QualifiedName() + " than the one vetted"
		if de := (*mcpclient.DefinitionError)(nil); errors.As(err, &de) {
			switch {
			case !de.Listed:
				lists = "does not list tool " + e.t.QualifiedName()
			case de.Differing:
				lists = "lists tool " + e.t.QualifiedName() + " more than once, with different definitions (which one runs is the server's choice)"
			}
		}
		return &Error{Fault: fault.Conflict(fault.KindConflict.String(), fmt.Sprintf(
			"server %s's session on this replica %s; it is being discovered again, and the tool will need validating again",
			e.t.Server, lists)).About("call")}
	case errors.Is(err, mcpclient.ErrNotConnected):
		return fail(CodeUpstream, "server %s is not connected: %s", e.t.Server, strings.TrimPrefix(err.Error(), mcpclient.ErrNotConnected.Error()+": "))
	case errors.Is(err, mcpclient.ErrResultTooLarge):
		// Not upstream_error: asking again gets the same answer, so it is never retried.
		return errorOf(CodeResultTooLarge, strings.TrimPrefix(err.Error(), "mcpclient: call "+e.t.Name+": ")).ran()
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "mcpclient: call "+e.t.Name+": ")
	// The server chooses its error message's length; it goes into events, logs and pages.
	msg = registry.ClipError("server " + e.t.Server + " failed the call: " + msg)
	return errorOf(CodeUpstream, msg).ran()
}

// paused reports whether the server's circuit refused the call without running it:
// open, or half-open with its one trial call in flight.
func paused(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// waitConnected waits while the server is connecting (at most ConnectWait).
func (r *Router) waitConnected(ctx context.Context, e *entry) error {
	deadline := time.Now().Add(r.opts.ConnectWait)
	for {
		if _, err := r.mcp.Session(e.t.ServerID); err == nil {
			return nil
		}
		snap := r.mcp.Snapshot(e.t.ServerID)
		if snap.Status != registry.StatusConnecting || snap.BreakerOpen || time.Now().After(deadline) {
			_, err := r.mcp.Session(e.t.ServerID)
			return err
		}
		r.setRuntime(e.t.ID, StateConnecting, 0, "", 0)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkOutput validates structured content against the tool's output schema (a tool
// with an output schema must return conforming structured content, unless its result
// is an error).
func checkOutput(e *entry, isError bool, structured json.RawMessage) error {
	if e.output == nil || isError {
		return nil
	}
	if len(structured) == 0 || string(structured) == "null" {
		return fail(CodeUpstream, "%s declares an output schema but returned no structured content", e.t.QualifiedName()).ran()
	}
	if err := schema.CheckSize(e.output, len(structured)); err != nil {
		// Not checked is not trusted: content the patterns cannot be run on in bounded
		// time counts as not matching.
		return fail(CodeUpstream, "%s returned structured content that does not match its output schema: it is too large to check against the schema's patterns (%s)",
			e.t.QualifiedName(), strings.TrimPrefix(err.Error(), schema.ErrTooLarge.Error()+": ")).ran()
	}
	if err := schema.ValidateOutput(e.output, structured); err != nil {
		if errors.Is(err, schema.ErrUnchecked) {
			// Likewise for more values (or a larger number) than the validator is given.
			return fail(CodeUpstream, "%s returned structured content that does not match its output schema: it is too large to check against the schema (%s)",
				e.t.QualifiedName(), strings.TrimPrefix(err.Error(), schema.ErrUnchecked.Error()+": ")).ran()
		}
		var ve *verr.Error
		errors.As(err, &ve)
		out := fail(CodeUpstream, "%s returned structured content that does not match its output schema: %v",
			e.t.QualifiedName(), strings.TrimPrefix(err.Error(), "invalid input: ")).ran()
		if ve != nil {
			out.Details = ve.Fields
		}
		return out
	}
	return nil
}
