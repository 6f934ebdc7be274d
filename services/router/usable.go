package router

import (
	"context"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Usable lists the tools caller (with role) may call now, by server name then tool
// name: the enabled tools of enabled servers, after the same permission rule Call
// applies (the role's tool.use, unless the user's per-tool permission says otherwise).
// It is what an MCP client of the gateway sees in tools/list.
func (r *Router) Usable(ctx context.Context, caller audit.Actor, role auth.Role) ([]tools.CallableItem, error) {
	all, err := r.tools.Callable(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, t := range all {
		ok, err := r.MayUse(ctx, caller, role, t.ID)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// MayUse reports whether caller (with role) may call tool toolID, by the rule Call
// applies: the role's tool.use, unless the user's per-tool permission says otherwise.
// Whether the tool can be called now (enabled, offered) is not asked here.
func (r *Router) MayUse(ctx context.Context, caller audit.Actor, role auth.Role, toolID string) (bool, error) {
	if caller.Kind == audit.ActorSystem {
		return true, nil
	}
	return r.mayUse(ctx, caller.ID, toolID, role.Can(auth.PermToolUse))
}

// DeclaresOutput reports whether the tool a call names declares an output schema, as
// tools/list offers it. A client may check any structured content against that schema,
// an error result's too (the TypeScript SDK does), so a result Toolwarden gives in the
// tool's place must not carry structured content of its own shape.
func (r *Router) DeclaresOutput(ctx context.Context, ref string) bool {
	res, err := r.resolve(ctx, ref)
	return err == nil && res.e != nil && tools.DeclaresOutput(res.e.t.OutputSchema)
}

// Admits returns nil when caller (with role) may call the tool ref now, as Call would
// admit it (enabled on an enabled server, offered, and MayUse), else the *Error Call
// would refuse it with: for what reaches a tool's effect past the router (a person
// typing into a built-in terminal).
func (r *Router) Admits(ctx context.Context, caller audit.Actor, role auth.Role, ref string) error {
	res, err := r.resolve(ctx, ref)
	if err != nil {
		return err
	}
	return r.admit(ctx, res.e, Call{Actor: caller, Role: role})
}
