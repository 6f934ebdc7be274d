package app

import (
	"context"
	"errors"

	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/registry"
)

// builtinDescription is the built-in server's description in the registry.
const builtinDescription = "Toolwarden's own tools: files in each conversation's workspace, terminals, memory, thinking, and asking a person."

// newBuiltin builds the built-in tools and makes sure the registry has their server. A
// server registered as builtin before the name was reserved keeps the name; the
// built-in tools then wait, and the log says why, until it is renamed.
func (a *App) newBuiltin(ctx context.Context, cfg Config) (*builtin.Server, error) {
	b, err := builtin.New(&builtin.Options{Root: cfg.BuiltinRoot, Logger: a.log, Version: cfg.Version, Grants: a.Grants})
	if err != nil {
		return nil, err
	}
	b.Add(builtin.Memory(a.Memory))
	b.Add(builtin.Think())
	b.Add(builtin.UserCollaboration(asker{a.Grants}))
	if _, err := a.Registry.EnsureBuiltin(ctx, builtinDescription); errors.Is(err, registry.ErrBuiltinNameTaken) {
		a.log.Warn(err.Error())
	} else if err != nil {
		return nil, err
	}
	return b, nil
}

// asker is user_collaboration's way to the person behind a call (services/grants).
type asker struct{ g *grants.Service }

func (a asker) Ask(ctx context.Context, q builtin.Question) (builtin.Answer, error) {
	c, err := a.g.Ask(ctx, grants.Question{UserID: q.Call.UserID, UserName: q.Call.UserName, ConversationID: q.Call.ConversationID,
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
