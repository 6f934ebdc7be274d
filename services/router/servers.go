package router

import (
	"context"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// ServerAccess is a server with at least one tool that can be called now (an enabled,
// available tool of an enabled server), and whether a caller may reach it.
type ServerAccess struct {
	ID   string
	Name string
	// Allowed: the caller may use at least one of those tools, by the rule Call and
	// Usable apply (the role's tool.use, unless the user's per-tool permission says
	// otherwise).
	Allowed bool
}

// Servers lists, by name, the servers with a tool that can be called now, each with
// whether caller (with role) may reach it. It is the gateway's server access: what a
// caller may read of a server's resources and prompts follows from the tools an
// administrator enabled there and the caller may use, so nothing of a server reaches
// a caller who may use none of it, and nothing of a server reaches anyone before an
// administrator has enabled one of its tools.
func (r *Router) Servers(ctx context.Context, caller audit.Actor, role auth.Role) ([]ServerAccess, error) {
	all, err := r.tools.Callable(ctx) // by server name, then tool name
	if err != nil {
		return nil, err
	}
	roleCan := role.Can(auth.PermToolUse)
	var out []ServerAccess
	for _, t := range all {
		if len(out) == 0 || out[len(out)-1].ID != t.ServerID {
			out = append(out, ServerAccess{ID: t.ServerID, Name: t.Server})
		}
		last := &out[len(out)-1]
		if last.Allowed {
			continue
		}
		if caller.Kind == audit.ActorSystem {
			last.Allowed = true
			continue
		}
		if last.Allowed, err = r.mayUse(ctx, caller.ID, t.ID, roleCan); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Throttle spends one of caller's calls a minute (Options.UserRate) on a request that
// reaches an upstream server without being a tool call (the gateway's resources/read
// and prompts/get), or refuses it with CodeRateLimited: such requests share the
// caller's budget with their tool calls.
func (r *Router) Throttle(caller audit.Actor) error {
	if wait, which := take(r.users.get(userKey(caller))); which >= 0 {
		re := fail(CodeRateLimited, "you have made too many calls; try again in %s", wait.Round(time.Millisecond))
		re.RetryAfter = wait
		return re
	}
	return nil
}
