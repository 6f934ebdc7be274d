package registry

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
)

// TypeBuiltin is the server builtin: Toolwarden's own tools (services/builtin), served
// in-process. Toolwarden creates it (EnsureBuiltin); nobody else can create one.
const TypeBuiltin = "builtin"

// BuiltinName is the built-in server's name (reserved for it: toolname.Reserved).
const BuiltinName = toolname.Builtin

// ErrBuiltinFixed refuses any change to the built-in server but enabling or disabling it,
// and deleting it.
var ErrBuiltinFixed = fault.Forbidden("the built-in server is part of Toolwarden: it can be enabled or disabled, not edited or deleted").About("server")

// ErrBuiltinNameTaken: a server registered before the name was reserved is named
// builtin, so the built-in server cannot be created until it is renamed.
var ErrBuiltinNameTaken = errors.New("registry: a server registered before the name was reserved is named builtin; rename it to get Toolwarden's built-in tools")

// EnsureBuiltin creates the built-in server (trusted, enabled) if there is none, and
// returns it. It is audited as the system's act.
func (s *Service) EnsureBuiltin(ctx context.Context, description string) (Server, error) {
	var out Server
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		// Replicas starting together: one registers it, the others wait and find it.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('toolwarden.builtin_server', 0))`); err != nil {
			return fmt.Errorf("registry: ensure the built-in server: %w", err)
		}
		var id string
		err := tx.QueryRow(ctx, `/* registry.EnsureBuiltin.find */
			SELECT id FROM mcp_servers WHERE server_type = 'builtin'`).Scan(&id)
		if err == nil {
			out, err = getServer(ctx, tx, id, false)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("registry: find the built-in server: %w", err)
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mcp_servers WHERE name = $1)`, BuiltinName).Scan(&taken); err != nil {
			return fmt.Errorf("registry: find the built-in server: %w", err)
		}
		if taken {
			return ErrBuiltinNameTaken
		}
		d := newDraft(uuid.NewString())
		d.name, d.typ, d.description, d.enabled, d.trusted, d.args = BuiltinName, TypeBuiltin, description, true, true, []string{}
		if out, err = s.insert(ctx, tx, d); err != nil {
			return err
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: "server.create", TargetType: "server",
			TargetID: out.ID, TargetName: out.Name, Payload: d.auditView()}); err != nil {
			return err
		}
		return publishCreated(ctx, tx, out)
	})
	return out, err
}

// builtinPatch refuses a patch of the built-in server that changes more than whether
// it is enabled. Its audit view leaves out the command, args, env, template and
// credentials (a builtin row has none), so connectionChanged compares those: nothing in
// such a patch is ever validated, and it would be stored as sent.
func builtinPatch(before, after draft) error {
	after.enabled = before.enabled
	if connectionChanged(before, after) || !reflect.DeepEqual(before.auditView(), after.auditView()) {
		return ErrBuiltinFixed
	}
	return nil
}
