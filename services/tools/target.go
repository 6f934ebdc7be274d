package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Target is what the router needs to call one tool.
type Target struct {
	Item
	ServerEnabled   bool   `db:"server_enabled"`
	ServerTimeoutMS int    `db:"server_timeout_ms"`
	RawConfig       []byte `db:"configuration"`
}

// Configuration is the target's parameter configuration (secrets still encrypted).
func (t Target) Configuration() Configuration { return parseConfiguration(t.RawConfig) }

// Timeout is the tool's call timeout in milliseconds: its own setting, else its server's.
func (t Target) Timeout() int {
	if t.TimeoutMS != nil {
		return *t.TimeoutMS
	}
	return t.ServerTimeoutMS
}

const targetSQL = `SELECT ` + itemColumns + `, 0::real AS rank, s.enabled AS server_enabled,
	s.timeout_ms AS server_timeout_ms, t.configuration` + itemFrom

// Target finds a tool by id or by qualified name ("server__tool"); ErrNotFound when
// there is none.
func (s *Service) Target(ctx context.Context, ref string) (Target, error) {
	return TargetIn(ctx, s.pool, ref)
}

// TargetIn is Target read through q (a transaction sees its own changes).
func TargetIn(ctx context.Context, q db.Querier, ref string) (Target, error) {
	var ts []Target
	var err error
	if id, ok := normalID(ref); ok {
		ts, err = db.All[Target](ctx, q, "tools: target", `/* tools.Target.id */ `+targetSQL+` WHERE t.id = $1`, id)
	} else if server, name, ok := toolname.Split(ref); ok && server != "" && name != "" {
		ts, err = db.All[Target](ctx, q, "tools: target", `/* tools.Target.name */ `+targetSQL+`
			WHERE s.name = $1 AND t.name = $2`, server, name)
	}
	if err != nil {
		return Target{}, err
	}
	if len(ts) == 0 {
		return Target{}, ErrNotFound
	}
	return ts[0], nil
}

// TargetsNamed lists the tools called name on any server (a bare name is usable only
// when exactly one server has it).
func (s *Service) TargetsNamed(ctx context.Context, name string) ([]Target, error) {
	return db.All[Target](ctx, s.pool, "tools: targets named", `/* tools.TargetsNamed */ `+targetSQL+`
		WHERE t.name = $1 ORDER BY s.name LIMIT 10`, name)
}

// UsePermissions returns the per-tool overrides of user userID's role: tool id → may use.
func (s *Service) UsePermissions(ctx context.Context, userID string) (map[string]bool, error) {
	type row struct {
		ToolID string `db:"tool_id"`
		CanUse bool   `db:"can_use"`
	}
	rows, err := db.All[row](ctx, s.pool, "tools: permissions", `/* tools.UsePermissions */
		SELECT tool_id, can_use FROM user_tool_permissions WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(rows))
	for _, r := range rows {
		out[r.ToolID] = r.CanUse
	}
	return out, nil
}

// Permission is one user's override for one tool.
type Permission struct {
	UserID   string `db:"user_id" json:"user_id"`
	Username string `db:"username" json:"username"`
	CanUse   bool   `db:"can_use" json:"can_use"`
	// Role is the user's role, so a reader can tell whether the override changes
	// anything (an allow for a role that may use tools anyway does not).
	Role string `db:"role" json:"role"`
}

// Permissions lists the per-user overrides of tool id.
func (s *Service) Permissions(ctx context.Context, id string) ([]Permission, error) {
	id, ok := normalID(id)
	if !ok {
		return nil, ErrNotFound
	}
	return db.All[Permission](ctx, s.pool, "tools: permissions of tool", `/* tools.Permissions */
		SELECT p.user_id, u.username, p.can_use, u.role FROM user_tool_permissions p JOIN users u ON u.id = p.user_id
		WHERE p.tool_id = $1 ORDER BY u.username`, id)
}

// ErrTokenGivesToolAccess: a user's override changes what they may do, as a role does,
// and a leaked token must not widen anyone's access; it may still take a tool away.
var ErrTokenGivesToolAccess = fault.Forbidden("an API token cannot give a user a tool or lift a refusal (can_use true, or null over false): sign in to do it")

// SetPermission gives (canUse true), takes away (false) or returns to the role's rule
// (nil) user username's use of tool id; audited, and announced so routers forget what
// they cached.
func (s *Service) SetPermission(ctx context.Context, actor audit.Actor, id, username string, canUse *bool) error {
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if auth.NormalizeUsername(username) == "" {
		return verr.New("username", "is required: the user the rule is for")
	}
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		_, err := setPermissionTx(ctx, tx, actor, t, username, canUse)
		return err
	})
}

// SetPermissionTx is SetPermission in the caller's transaction; changed reports whether
// the rule changed (an unchanged rule writes no audit row).
func (s *Service) SetPermissionTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, id, username string, canUse *bool) (changed bool, err error) {
	t, err := getItem(ctx, tx, id, false)
	if err != nil {
		return false, err
	}
	return setPermissionTx(ctx, tx, actor, t, username, canUse)
}

// LockShared holds tool id's row in tx (FOR SHARE) while something that belongs to the
// tool but lives in another table changes (a permission, a test case, a compensation): a
// configuration import locks the rows of the tools it changes before it checks that
// nothing changed since its plan, so such an edit either lands before that check (and
// the import is refused) or waits for the import, instead of racing it.
func LockShared(ctx context.Context, tx pgx.Tx, id string) error {
	if _, err := tx.Exec(ctx, `/* tools.LockShared */ SELECT 1 FROM mcp_tools WHERE id = $1 FOR SHARE`, id); err != nil {
		return fmt.Errorf("tools: lock %s: %w", id, err)
	}
	return nil
}

func setPermissionTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, t Item, username string, canUse *bool) (bool, error) {
	// Names are stored as login writes them: "Bob" is bob.
	username = auth.NormalizeUsername(username)
	if err := LockShared(ctx, tx, t.ID); err != nil {
		return false, err
	}
	n, err := func() (int64, error) {
		var userID string
		err := tx.QueryRow(ctx, `/* tools.SetPermission.user */ SELECT id FROM users WHERE username = $1`, username).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, verr.New("username", fmt.Sprintf("there is no user %q", username))
		}
		if err != nil {
			return 0, fmt.Errorf("tools: permission: find user: %w", err)
		}
		var n int64
		widens := canUse != nil && *canUse
		if canUse == nil {
			// Removing a refusal widens access; removing a grant narrows it.
			var was bool
			err := tx.QueryRow(ctx, `/* tools.SetPermission.delete */
				DELETE FROM user_tool_permissions WHERE user_id = $1 AND tool_id = $2 RETURNING can_use`, userID, t.ID).Scan(&was)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return 0, fmt.Errorf("tools: permission: %w", err)
			default:
				n, widens = 1, !was
			}
		} else {
			tag, err := tx.Exec(ctx, `/* tools.SetPermission.upsert */
				INSERT INTO user_tool_permissions (user_id, tool_id, can_use) VALUES ($1, $2, $3)
				ON CONFLICT (user_id, tool_id) DO UPDATE SET can_use = EXCLUDED.can_use, updated_at = now()
				WHERE user_tool_permissions.can_use IS DISTINCT FROM EXCLUDED.can_use`, userID, t.ID, *canUse)
			if err != nil {
				return 0, fmt.Errorf("tools: permission: %w", err)
			}
			n = tag.RowsAffected()
		}
		if n == 0 {
			return 0, nil // nothing changed: nothing to record
		}
		if actor.Kind == audit.ActorToken && widens {
			return 0, ErrTokenGivesToolAccess // the change rolls back with the transaction
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "tool.permission", TargetType: "tool",
			TargetID: t.ID, TargetName: t.QualifiedName(), Payload: map[string]any{"user": username, "can_use": canUse}}); err != nil {
			return 0, err
		}
		_, err = events.ToolPermission.Publish(ctx, tx, Topic, events.ToolGrant{ToolID: t.ID, UserID: userID})
		return n, err
	}()
	return n > 0, err
}

// Touch sets last_used of the given tools to at. It skips rows another transaction has
// locked (an enable, a discovery) rather than wait: the router's writes must never queue
// behind a long change, and a missed touch is corrected by the next call.
func Touch(ctx context.Context, q db.Querier, ids []string, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `/* tools.Touch */
		UPDATE mcp_tools SET last_used = $2
		WHERE id IN (SELECT id FROM mcp_tools WHERE id = ANY($1::uuid[]) AND (last_used IS NULL OR last_used < $2)
		             FOR NO KEY UPDATE SKIP LOCKED)`, ids, at)
	if err != nil {
		return fmt.Errorf("tools: touch: %w", err)
	}
	return nil
}

// CallableItem is a tool that can be called now, with its parameter configuration: the
// parameters it fixes may not be given by a caller (the router adds them and refuses
// another value), so what is offered to callers leaves them out (CallerSchema).
type CallableItem struct {
	Item
	RawConfig []byte `db:"configuration" json:"-"`
}

// CallerSchema is the tool's input schema as a caller should see it.
func (t CallableItem) CallerSchema() json.RawMessage {
	fixed, _ := parseConfiguration(t.RawConfig).FixedParams(t.InputSchema)
	return CallerSchema(t.InputSchema, fixed)
}

// Callable lists the tools that can be called now, whoever calls: enabled, still
// offered by their server, on an enabled server; by server name, then tool name (the
// gateway's stable order). Who may call which is the router's to say.
func (s *Service) Callable(ctx context.Context) ([]CallableItem, error) {
	return db.All[CallableItem](ctx, s.pool, "tools: callable", `/* tools.Callable */ SELECT `+itemColumns+`, 0::real AS rank,
		t.configuration`+itemFrom+`
		WHERE t.status = 'enabled' AND t.available AND s.enabled
		ORDER BY s.name, t.name, t.id`)
}

// DeclaresOutput reports whether a tool's output schema says anything: not missing,
// null or {} (which the MCP endpoint does not offer to clients).
func DeclaresOutput(outputSchema json.RawMessage) bool {
	s := strings.TrimSpace(string(outputSchema))
	return s != "" && s != "null" && s != "{}"
}
