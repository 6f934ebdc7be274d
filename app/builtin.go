package app

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/internal/confine"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/usage"
)

// builtinDescription is the built-in server's description in the registry.
const builtinDescription = "Toolwarden's own tools: files in each conversation's workspace, terminals, memory, thinking, and asking a person."

// newBuiltin builds the built-in tools and makes sure the registry has their server. A
// server registered as builtin before the name was reserved keeps the name; the
// built-in tools then wait, and the log says why, until it is renamed.
func (a *App) newBuiltin(ctx context.Context, cfg Config) (*builtin.Server, error) {
	b, err := builtin.New(&builtin.Options{Root: cfg.BuiltinRoot, SnapshotBudget: cfg.SnapshotBudget, Logger: a.log, Version: cfg.Version, Grants: a.Grants,
		Conversations: a.Grants})
	if err != nil {
		return nil, err
	}
	b.Add(builtin.Memory(a.Memory))
	b.Add(builtin.Think())
	// Terminals are confined as stdio servers are, and the built-in root is hidden from
	// them too: each reaches only its own conversation's workspace there.
	spec := cfg.MCP.Confine
	spec.Hide = append(slices.Clip(spec.Hide), b.Root())
	ts, err := builtin.NewTerminals(builtin.TerminalOptions{Root: b.Root(), Logger: a.log, Env: cfg.TerminalEnv, OnInput: a.auditTerminalInput,
		OnChange: a.announceTerminal, Store: builtin.NewTerminalStore(a.Pool, a.Replicas), Forward: a.forwardTerminalOp,
		Confiner: confine.New(spec), MaxPerOwner: cfg.TerminalsPerPerson, MaxRunning: cfg.TerminalsMax, IdleTimeout: cfg.TerminalIdle})
	if err != nil {
		b.Close()
		return nil, err
	}
	a.Terminals = ts
	b.Add(builtin.TerminalTool(ts))
	b.OnClose(ts.Close)
	b.Add(b.FileOperations())
	// Its snapshots are pruned from Start on (the snapshots component), not from here.
	b.Add(builtin.UserCollaboration(asker{a.Grants}))
	if sv, err := a.Registry.EnsureBuiltin(ctx, builtinDescription); errors.Is(err, registry.ErrBuiltinNameTaken) {
		a.log.Warn(err.Error())
	} else if err != nil {
		b.Close() // the terminals
		return nil, err
	} else {
		a.builtinServerID = sv.ID
	}
	return b, nil
}

// builtinArgumentRisk rates a built-in tool's call by its arguments (the router's
// ArgumentRisk): a terminal command that deletes recursively, runs sudo and the like is
// HIGH whatever the tool's level.
func builtinArgumentRisk(qualified string, args json.RawMessage) (risk.Level, string, bool) {
	name := bare(qualified)
	if name == "" {
		return "", "", false
	}
	return builtin.ArgumentRisk(name, args)
}

// builtinPreflight is the router's Preflight for the built-in tools: why a call would
// be refused whatever a person decided, asked before anyone is asked to approve it.
func (a *App) builtinPreflight(ctx context.Context, qualified string, m callmeta.Meta, args json.RawMessage) error {
	name := bare(qualified)
	if name == "" || a.Builtin == nil {
		return nil
	}
	return a.Builtin.Preflight(ctx, name, m, args)
}

// builtinOperationRisk is the router's OperationRisk: the level of a built-in
// operation (a file read is low), for the built-in server's own tools only, never a
// server that kept the name builtin.
func (a *App) builtinOperationRisk(serverID, qualified string, args json.RawMessage) (risk.Level, string, bool) {
	name := bare(qualified)
	if name == "" || a.builtinServerID == "" || serverID != a.builtinServerID {
		return "", "", false
	}
	return builtin.OperationRisk(name, args)
}

// Previewer is the executions' previewer of the built-in file tools (nil without the
// built-in server): the diff a plan's file steps will make, and whether a file changed
// since.
func (a *App) Previewer() executions.Previewer {
	if a.Builtin == nil {
		return nil
	}
	return builtinPreviewer{a.Builtin}
}

type builtinPreviewer struct{ b *builtin.Server }

// bare is a qualified built-in tool name's bare name ("" for another server's tool).
func bare(qualified string) string {
	name, ok := strings.CutPrefix(qualified, registry.BuiltinName+"__")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, ".")
	return name
}

func (p builtinPreviewer) PreviewPlan(ctx context.Context, conversation, user string, steps []executions.PreviewCall) ([]*executions.StepPreview, error) {
	calls := make([]builtin.PreviewCall, len(steps))
	for i, st := range steps {
		calls[i] = builtin.PreviewCall{Tool: bare(st.Tool), Arguments: st.Arguments}
	}
	ps, err := p.b.PreviewPlan(ctx, conversation, user, calls)
	if err != nil {
		return nil, err
	}
	out := make([]*executions.StepPreview, len(ps))
	for i, fp := range ps {
		if fp != nil {
			out[i] = &executions.StepPreview{Path: fp.Path, Diff: fp.Diff, Fingerprint: fp.Fingerprint}
		}
	}
	return out, nil
}

func (p builtinPreviewer) Fingerprint(ctx context.Context, conversation string, st executions.PreviewCall) (string, error) {
	return p.b.Fingerprint(ctx, conversation, builtin.PreviewCall{Tool: bare(st.Tool), Arguments: st.Arguments})
}

func (p builtinPreviewer) SnapshotGone(_ context.Context, conversation, snapshotID string) (string, error) {
	return p.b.SnapshotGone(conversation, snapshotID)
}

// BuiltinDisplay is the short line that says what a call of a built-in tool does
// (qualified, with a dotted operation when the call named one), or "" for another
// server's tool. It is made from the masked arguments: the line goes into events, audit
// rows, plans and pages, and a command or a note may carry a credential
// ("GH_TOKEN=… gh api user").
func (a *App) BuiltinDisplay(qualified string, args json.RawMessage) string {
	if a.Builtin == nil {
		return ""
	}
	name, ok := strings.CutPrefix(qualified, registry.BuiltinName+"__")
	if !ok {
		return ""
	}
	name, op, dotted := strings.Cut(name, ".")
	if dotted {
		m := map[string]any{}
		_ = json.Unmarshal(args, &m)
		if m == nil {
			m = map[string]any{}
		}
		if _, has := m["operation"]; !has {
			m["operation"] = op
		}
		args, _ = json.Marshal(m)
	}
	return usage.RedactText(a.Builtin.Display(name, usage.Redact(args)))
}

// asker is user_collaboration's way to the person behind a call (services/grants).
type asker struct{ g *grants.Service }

func (a asker) Ask(ctx context.Context, q builtin.Question) (builtin.Answer, error) {
	c, err := a.g.Ask(ctx, grants.Question{UserID: q.Call.UserID, UserName: q.Call.UserName, ActorKind: q.Call.ActorKind,
		TokenID: q.Call.TokenID, ConversationID: q.Call.ConversationID,
		CallID: q.Call.CallID, ExecutionID: q.Call.ExecutionID, Source: q.Call.Source, Prompt: q.Prompt,
		AuthorizeOperation: q.AuthorizeOperation, Target: q.Target, OneTime: q.OneTime})
	if err != nil {
		return builtin.Answer{}, err
	}
	ans := builtin.Answer{ID: c.ID, Status: c.Status, Response: c.Response, Approved: c.Approved()}
	if c.GrantID != nil {
		ans.GrantID = *c.GrantID
	}
	return ans, nil
}
