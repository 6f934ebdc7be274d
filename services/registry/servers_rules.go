package registry

// Deleting a server deletes its tools, and with them (ON DELETE CASCADE) the per-user
// rules administrators set on them (user_tool_permissions, services/tools). Adding the
// server again creates new tools without those rules, so removing a refusal this way
// would lift it: only someone who may set the rules may do it, and each removed rule is
// audited as tool.permission, as if removed on the tool's Access tab.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
)

// CodeUserRules is the code of the conflict refusing to delete a server whose tools
// have per-user refusals the caller may not remove.
const CodeUserRules = "user_rules"

// userRule is one per-user rule on a tool of a server about to be deleted.
type userRule struct {
	ToolID   string `db:"tool_id"`
	Tool     string `db:"tool"`
	Username string `db:"username"`
	CanUse   bool   `db:"can_use"`
}

// userRulesOf locks the tools of server sv and returns their per-user rules, which
// deleting sv removes; it refuses (a fault.Conflict, CodeUserRules) when some of them
// refuse a tool and actor may not lift a refusal.
func userRulesOf(ctx context.Context, tx pgx.Tx, actor audit.Actor, sv Server) ([]userRule, error) {
	// Locked before the read, in id order as every change of several tools locks them:
	// a rule being set meanwhile (tools.SetPermission holds its tool's row FOR SHARE)
	// is either read here or waits for the deletion, never removed unseen.
	if _, err := tx.Exec(ctx, `/* registry.DeleteServer.lockTools */
		SELECT 1 FROM mcp_tools WHERE server_id = $1 ORDER BY id FOR UPDATE`, sv.ID); err != nil {
		return nil, fmt.Errorf("registry: lock the tools of %q: %w", sv.Name, err)
	}
	rules, err := serverRules(ctx, tx, sv)
	if err != nil {
		return nil, err
	}
	return rules, mayLiftRulesOf(ctx, tx, actor, sv, rules)
}

// serverRules reads the per-user rules on sv's tools, by tool and user.
func serverRules(ctx context.Context, tx pgx.Tx, sv Server) ([]userRule, error) {
	return db.All[userRule](ctx, tx, "registry: per-user rules of a server", `/* registry.DeleteServer.rules */
		SELECT t.id::text AS tool_id, t.name AS tool, u.username, p.can_use
		FROM user_tool_permissions p JOIN mcp_tools t ON t.id = p.tool_id JOIN users u ON u.id = p.user_id
		WHERE t.server_id = $1 ORDER BY t.name, u.username`, sv.ID)
}

// mayLiftRulesOf is mayLiftRefusals for the refusals among rules, sv's.
func mayLiftRulesOf(ctx context.Context, tx pgx.Tx, actor audit.Actor, sv Server, rules []userRule) error {
	var refusals []string
	for _, r := range rules {
		if !r.CanUse {
			refusals = append(refusals, r.Username+" on "+toolname.Join(sv.Name, r.Tool))
		}
	}
	if len(refusals) == 0 {
		return nil
	}
	return mayLiftRefusals(ctx, tx, actor, sv, refusals)
}

// mayLiftRefusals refuses unless actor may remove per-user refusals: the system, or a
// person whose role may manage users (auth.PermUsers, who alone sets the rules), signed
// in: an API token may take a tool away but never give one back
// (tools.ErrTokenGivesToolAccess).
func mayLiftRefusals(ctx context.Context, tx pgx.Tx, actor audit.Actor, sv Server, refusals []string) error {
	if actor.Kind == audit.ActorSystem {
		return nil
	}
	admin := false
	if actor.Kind == audit.ActorUser || actor.Kind == audit.ActorToken {
		// Read in the transaction: the role as it is now, not as the request began.
		var role auth.Role
		err := tx.QueryRow(ctx, `/* registry.DeleteServer.role */
			SELECT role FROM users WHERE id::text = $1 AND disabled_at IS NULL`, actor.ID).Scan(&role)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("registry: the role of %q: %w", actor.Name, err)
		}
		admin = err == nil && role.Can(auth.PermUsers)
	}
	if admin && actor.Kind == audit.ActorUser {
		return nil
	}
	what := fmt.Sprintf("deleting server %q would remove %s refusing its tools to people (%s), and adding the server again would let them call the tools",
		sv.Name, plural(len(refusals), "per-user rule"), listSome(refusals, 5))
	if admin {
		return fault.Conflict(CodeUserRules, what+"; an API token cannot lift a refusal: sign in to delete the server, or remove the rules on the tools' Access tab first").About("server")
	}
	return fault.Conflict(CodeUserRules, what+"; only an administrator (users.manage) can remove them: ask one to remove the rules on the tools' Access tab, or to delete the server").About("server")
}

// removedRuleEntries are the tool.permission audit entries of the rules a deletion
// (because: its audit action) removes, one per rule.
func removedRuleEntries(actor audit.Actor, sv Server, rules []userRule, because string) []audit.Entry {
	out := make([]audit.Entry, len(rules))
	for i, r := range rules {
		out[i] = audit.Entry{Actor: actor, Action: "tool.permission", TargetType: "tool", TargetID: r.ToolID,
			TargetName: toolname.Join(sv.Name, r.Tool), Payload: map[string]any{"user": r.Username, "can_use": nil,
				"removed_rule": r.CanUse, "because": because, "server": sv.Name}}
	}
	return out
}

// plural is "1 noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listSome joins the first n items and says how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
