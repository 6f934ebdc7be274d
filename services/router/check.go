package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/verr"
)

// pinned refuses a call whose tool, or its server's connection, is no longer what
// was approved.
func (r *Router) pinned(ctx context.Context, e *entry, p *Pin) error {
	if p == nil {
		return nil
	}
	t := e.t
	switch {
	case t.ID == p.ToolID && !r.mcp.IdentityMatches(ctx, t.ServerID, p.ServerIdentity):
		return fail(CodeStale, "the connection settings of server %s (its command, environment, URL or credentials) changed since %s was approved; plan and approve it again",
			t.Server, t.QualifiedName())
	case t.ID != p.ToolID:
		return fail(CodeStale, "%s is no longer the tool that was approved", t.QualifiedName())
	case t.DefinitionHash != p.DefinitionHash:
		return fail(CodeStale, "%s changed its definition since it was approved (now version %s); plan and approve it again",
			t.QualifiedName(), t.Version())
	case t.ConfigVersion != p.ConfigVersion:
		return fail(CodeStale, "%s's configuration changed since it was approved (version %d, approved %d); plan and approve it again",
			t.QualifiedName(), t.ConfigVersion, p.ConfigVersion)
	}
	return nil
}

// Prepared is a call checked as far as it can be without running it: the tool it
// names, the arguments it would send (configured values merged, secret ones masked)
// and its risk. Plans are made of prepared calls.
type Prepared struct {
	Pin
	Tool      string          `json:"tool"` // qualified name
	Server    string          `json:"server"`
	Arguments json.RawMessage `json:"arguments"` // as given (plus a dotted name's operation)
	// Effective are the arguments the server would get; configured secret values
	// show as "••••••".
	Effective json.RawMessage `json:"effective_arguments"`
	Risk      risk.Decision   `json:"risk"`
}

// SameConnection reports whether identity (a Pin's ServerIdentity) is the connection
// identity of tool's server under any key the keyring holds: the same settings, pinned
// before a key rotation or on a replica that read the new key first.
func (r *Router) SameConnection(ctx context.Context, tool, identity string) bool {
	res, err := r.resolve(ctx, tool)
	return err == nil && res.e != nil && r.mcp.IdentityMatches(ctx, res.e.t.ServerID, identity)
}

// MaxConversationID is the longest conversation id a call may name (in characters).
const MaxConversationID = 200

// MaskedSecret stands for a configured secret value in Prepared.Effective.
const MaskedSecret = "••••••"

// Prepare resolves, admits, merges and validates c like Call, without approval, rate
// limits, records or running it. Errors are *Error with Call's codes.
func (r *Router) Prepare(ctx context.Context, c Call) (*Prepared, error) {
	e, args, err := r.check(ctx, c)
	if err != nil {
		return nil, err
	}
	if c.Preflight {
		if re := r.preflight(ctx, e, c, "", args.merged); re != nil {
			return nil, re
		}
	}
	given, err := json.Marshal(args.given)
	if err != nil {
		return nil, err
	}
	masked := maps.Clone(args.values)
	for name := range e.secrets {
		if _, ok := masked[name]; ok {
			masked[name], _ = json.Marshal(MaskedSecret)
		}
	}
	effective, err := json.Marshal(masked)
	if err != nil {
		return nil, err
	}
	t := e.t
	return &Prepared{Pin: Pin{ToolID: t.ID, DefinitionHash: t.DefinitionHash, ConfigVersion: t.ConfigVersion, ServerIdentity: r.mcp.Identity(ctx, t.ServerID)},
		Tool: t.QualifiedName(), Server: t.Server, Arguments: given, Effective: effective, Risk: e.risk}, nil
}

// checkedArgs are a call's arguments once checked: as given (plus a dotted name's
// operation), with configured values merged, and that merge as JSON.
type checkedArgs struct {
	given, values map[string]json.RawMessage
	merged        json.RawMessage
	// withOperation is given as JSON when a dotted name added its operation (nil
	// otherwise): what the call is recorded with, as its server gets it.
	withOperation json.RawMessage
}

// recorded is what a call with raw arguments is recorded with: its arguments with the
// operation its dotted name named.
func (a checkedArgs) recorded(raw json.RawMessage) json.RawMessage {
	if a.withOperation != nil {
		return a.withOperation
	}
	return raw
}

// check is what Call and Prepare share: resolve, parse, pin, admit, merge and
// validate. The entry is nil when the name did not resolve; an error with an entry
// is a refusal of that tool. The name is resolved first (it never depends on the
// arguments), so arguments that are not a JSON object are a refusal of the tool named,
// recorded as one; but only once the caller may call it: a caller the tool is
// forbidden to is told so (and audited as such) whatever its arguments.
func (r *Router) check(ctx context.Context, c Call) (*entry, checkedArgs, error) {
	res, err := r.resolve(ctx, c.Tool)
	if err != nil {
		return nil, checkedArgs{}, err
	}
	e := res.e
	args, argsErr := parseArguments(c.Arguments)
	if err := r.pinned(ctx, e, c.Pin); err != nil {
		return e, checkedArgs{}, err
	}
	var failed checkedArgs // what a refusal is recorded with
	if argsErr == nil && res.addOperation(args) {
		failed.withOperation, _ = json.Marshal(args)
	}
	if err := r.admit(ctx, e, c); err != nil {
		return e, failed, err
	}
	if argsErr != nil {
		return e, checkedArgs{}, argsErr
	}
	if utf8.RuneCountInString(c.ConversationID) > MaxConversationID {
		// Conversations, grants and executions keep it: too long is refused whatever the tool.
		return e, failed, errorOf(CodeInvalidArguments, fmt.Sprintf("conversation_id is longer than %d characters; use a shorter one", MaxConversationID)).
			with([]verr.Field{{Field: "/conversation_id", Message: fmt.Sprintf("is longer than %d characters", MaxConversationID), Kind: verr.KindValue}})
	}
	if reservedConversation(c.ConversationID, c.Actor) {
		// A person's default conversation is theirs alone: named by someone else first,
		// it would be theirs, and every call of its person without one refused.
		return e, failed, errorOf(CodeInvalidArguments, "conversation_id "+c.ConversationID+" is another person's default conversation; leave it out to use your own, or name another").
			with([]verr.Field{{Field: "/conversation_id", Message: "is another person's default conversation", Kind: verr.KindValue}})
	}
	merged, err := e.resolved.Merge(args)
	if err != nil {
		return e, failed, invalid(err)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return e, failed, err
	}
	if err := schema.ValidateArguments(e.input, json.RawMessage(raw)); err != nil {
		return e, failed, invalid(hideSecrets(err, e.secrets))
	}
	e = r.argumentRisk(e, raw)
	return e, checkedArgs{given: args, values: merged, merged: raw, withOperation: failed.withOperation}, nil
}

func parseArguments(raw json.RawMessage) (map[string]json.RawMessage, error) {
	args := map[string]json.RawMessage{}
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return args, nil
	}
	if !strings.HasPrefix(s, "{") {
		return nil, errorOf(CodeInvalidArguments, "arguments must be a JSON object").
			with([]verr.Field{{Field: "", Message: "must be a JSON object", Kind: verr.KindType}})
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, errorOf(CodeInvalidArguments, "arguments are not valid JSON: "+err.Error()).
			with([]verr.Field{{Field: "", Message: "is not valid JSON", Kind: verr.KindType}})
	}
	return args, nil
}

// invalid turns field errors into invalid_arguments naming every bad parameter.
func invalid(err error) error {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return err
	}
	return invalidFields(ve)
}

// invalidFields is invalid_arguments naming every field of ve.
func invalidFields(ve *verr.Error) *Error {
	parts := make([]string, len(ve.Fields))
	for i, f := range ve.Fields {
		where := strings.TrimPrefix(f.Field, "/")
		if where == "" {
			where = "arguments"
		}
		parts[i] = where + " " + f.Message
	}
	return errorOf(CodeInvalidArguments, strings.Join(parts, "; ")).with(ve.Fields)
}

// hideSecrets rewrites what validation says about configured secret values: its
// messages may quote the value (a pattern it does not match).
func hideSecrets(err error, secrets map[string]bool) error {
	var ve *verr.Error
	if len(secrets) == 0 || !errors.As(err, &ve) {
		return err
	}
	for i, f := range ve.Fields {
		name, _, _ := strings.Cut(strings.TrimPrefix(f.Field, "/"), "/")
		if secrets[name] {
			ve.Fields[i].Message = "the configured secret value is not accepted by the tool's schema; an administrator must set it again"
		}
	}
	return ve
}

// admit checks the tool may be called now and by this caller.
func (r *Router) admit(ctx context.Context, e *entry, c Call) error {
	t := e.t
	name := t.QualifiedName()
	switch {
	case !t.ServerEnabled:
		return fail(CodeToolDisabled, "%s cannot be called: its server %s is disabled", name, t.Server)
	case !t.Available:
		return fail(CodeToolDisabled, "%s cannot be called: its server no longer offers it", name)
	case t.Status == "enabled":
	case c.Test && Testable(t.Status):
	case c.Test:
		return fail(CodeToolDisabled, "%s cannot be tested while it is %s", name, t.Status)
	default:
		return fail(CodeToolDisabled, "%s is %s; an administrator must enable it before it can be called", name, t.Status)
	}
	if e.inputErr != nil {
		return fail(CodeToolDisabled, "%s cannot be called: its input schema is not usable (%v)", name, e.inputErr)
	}
	ok, err := r.MayUse(ctx, c.Actor, c.Role, t.ID)
	if err != nil {
		return err
	}
	if !ok {
		return fail(CodeForbidden, "you may not use %s; ask an administrator for access", name)
	}
	return nil
}

// argumentRisk is e with its risk as this call's arguments make it: the operation's own
// level in place of one derived from annotations (Options.OperationRisk), then raised
// to what the arguments carry (Options.ArgumentRisk). e itself, shared by every call,
// is not changed.
func (r *Router) argumentRisk(e *entry, args json.RawMessage) *entry {
	d := e.risk
	if r.opts.OperationRisk != nil && d.Source == risk.SourceAnnotations {
		if level, why, ok := r.opts.OperationRisk(e.t.ServerID, e.t.QualifiedName(), args); ok {
			d = risk.Decision{Level: level, Source: risk.SourceOperation, Why: why}
		}
	}
	if r.opts.ArgumentRisk != nil {
		if level, why, ok := r.opts.ArgumentRisk(e.t.QualifiedName(), args); ok && risk.Max(d.Level, level) != d.Level {
			d = risk.Decision{Level: level, Source: risk.SourceArguments, Why: why}
		}
	}
	if d == e.risk {
		return e
	}
	rated := *e
	rated.risk = d
	return &rated
}

// RiskOf is the level a call of tool (an id or a name) with args gets, as the router
// rates the call: with the tool's configured values merged in, whether or not the
// arguments are complete yet. The test panel shows it and asks for what it needs
// before a run.
func (r *Router) RiskOf(ctx context.Context, tool string, args json.RawMessage) (risk.Decision, error) {
	res, err := r.resolve(ctx, tool)
	if err != nil {
		return risk.Decision{}, err
	}
	rated := args
	if given, err := parseArguments(args); err == nil {
		res.addOperation(given)
		// Arguments that set a fixed parameter are refused at the run; rate them as given.
		if merged, err := res.e.resolved.Merge(given); err == nil {
			if b, err := json.Marshal(merged); err == nil {
				rated = b
			}
		}
	}
	return r.argumentRisk(res.e, rated).risk, nil
}

// preflight asks Options.Preflight whether c (checked as e, with merged args) could run
// at all, and is the refusal to answer with instead of asking anyone to approve it, or
// nil. When the check itself fails (the database), the call goes on: the tool checks
// again when it runs.
func (r *Router) preflight(ctx context.Context, e *entry, c Call, callID string, args json.RawMessage) *Error {
	if r.opts.Preflight == nil {
		return nil
	}
	err := r.opts.Preflight(ctx, e.t.QualifiedName(), metaOf(c, callID), args)
	if err == nil {
		return nil
	}
	if ve := (*verr.Error)(nil); errors.As(err, &ve) {
		return invalidFields(ve)
	}
	if f, ok := fault.As(err); ok && f.Kind == fault.KindForbidden {
		return fail(CodeForbidden, "%s", f.Message).with(f.Details)
	}
	r.log.Warn("router: the check before approval failed; the call goes on", "tool", e.t.QualifiedName(), "err", err)
	return nil
}
