package registry

// Applying: a reviewed import plan carried out in one transaction.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
)

// ServerRef names a server an import touched.
type ServerRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ImportResult is what ApplyImport did.
type ImportResult struct {
	Created   []ServerRef `json:"created"`
	Updated   []ServerRef `json:"updated"`
	Deleted   []ServerRef `json:"deleted"`
	Unchanged int         `json:"unchanged"`
	Kept      int         `json:"kept"`
	// LostUndo are the tools of other servers (qualified names) whose compensation a
	// deleted server's tool was: their steps have nothing to undo them now.
	LostUndo []string `json:"lost_undo,omitempty"`
}

func (r ImportResult) String() string {
	s := fmt.Sprintf("%d created, %d updated, %d deleted, %d unchanged, %d kept",
		len(r.Created), len(r.Updated), len(r.Deleted), r.Unchanged, r.Kept)
	if n := len(r.LostUndo); n > 0 {
		// Said where the import is reported (the command, the page's message), as the
		// server page's Delete says it: not left to be found at the next rollback.
		names := make([]string, n)
		for i, t := range r.LostUndo {
			names[i] = Printable(t)
		}
		what := "1 tool of another server lost the undo step a deleted server's tool gave it"
		if n > 1 {
			what = fmt.Sprintf("%d tools of other servers lost the undo step a deleted server's tool gave them", n)
		}
		s += fmt.Sprintf("; %s (%s): set another on the tool's Compensation tab", what, listSome(names, 10))
	}
	return s
}

// applicable says why a plan cannot be applied (nil when it can).
func (p *Plan) applicable() error {
	if p == nil {
		return errors.New("registry: apply import: no plan")
	}
	if p.HasErrors() {
		return fmt.Errorf("%w:\n%s", ErrInvalidPlan, configError(p.Errors).Error())
	}
	return nil
}

// ApplyImport carries out plan in one transaction: every server changes, or none does.
// Each change writes an audit entry (server.import.create, .update or .delete; names of
// secrets, never values) and the usual server.changed or server.deleted event, so a
// running `toolwarden serve` connects, reconnects or disconnects accordingly. A server
// changed or removed by someone else since the plan was made fails the whole import:
// plan again and review.
func (s *Service) ApplyImport(ctx context.Context, actor audit.Actor, plan *Plan) (ImportResult, error) {
	var res ImportResult
	if err := plan.applicable(); err != nil {
		return res, err
	}
	res.Unchanged, res.Kept = plan.Count(PlanUnchanged), plan.Count(PlanKeep)
	if plan.Count(PlanCreate)+plan.Count(PlanUpdate)+plan.Count(PlanDelete) == 0 {
		return res, nil
	}
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		res, err = s.ApplyImportTx(ctx, tx, actor, plan)
		return err
	})
	if err != nil {
		return ImportResult{Unchanged: res.Unchanged, Kept: res.Kept}, err
	}
	return res, nil
}

// ApplyImportTx is ApplyImport in the caller's transaction (services/configcode applies
// the servers of a file with the rest of its configuration).
func (s *Service) ApplyImportTx(ctx context.Context, tx pgx.Tx, actor audit.Actor, plan *Plan) (ImportResult, error) {
	var res ImportResult
	if err := plan.applicable(); err != nil {
		return res, err
	}
	res.Unchanged, res.Kept = plan.Count(PlanUnchanged), plan.Count(PlanKeep)
	source := map[string]any{"file": filepath.Base(plan.File), "format": plan.Format}
	var created, updated, deleted []ServerRef
	var lostUndo []string
	err := func() error {
		for _, it := range plan.Items {
			switch it.Action {
			case PlanCreate:
				out, err := s.insert(ctx, tx, it.d)
				if err != nil {
					return fmt.Errorf("registry: import %s: create server %q: %w", plan.File, it.Name, err)
				}
				payload := it.d.auditView()
				payload["import"] = source
				if err := s.importAudit(ctx, tx, actor, "server.import.create", out, payload); err != nil {
					return err
				}
				if err := publishCreated(ctx, tx, out); err != nil {
					return err
				}
				created = append(created, ServerRef{ID: out.ID, Name: out.Name})
			case PlanUpdate:
				cur, err := lockUnchanged(ctx, tx, plan.File, it)
				if err != nil {
					return err
				}
				d, err := keptFromRow(it.d, cur)
				if err != nil {
					return fmt.Errorf("registry: import %s: server %q %w; plan the import again", plan.File, it.Name, err)
				}
				out, err := s.update(ctx, tx, cur, d)
				if err != nil {
					return fmt.Errorf("registry: import %s: update server %q: %w", plan.File, it.Name, err)
				}
				changes := map[string]any{}
				before, after := draftOf(cur).auditView(), d.auditView()
				for k, v := range after {
					if fmt.Sprint(before[k]) != fmt.Sprint(v) {
						changes[k] = map[string]any{"from": before[k], "to": v}
					}
				}
				var secretsChanged []string
				for _, c := range it.Changes {
					if c.Secret {
						secretsChanged = append(secretsChanged, strings.Replace(c.Field, " ", "/", 1)+": "+c.To)
					}
				}
				if len(secretsChanged) > 0 {
					changes["secrets_changed"] = secretsChanged
				}
				if err := s.importAudit(ctx, tx, actor, "server.import.update", out,
					map[string]any{"changes": changes, "import": source}); err != nil {
					return err
				}
				if err := publishChanged(ctx, tx, out); err != nil {
					return err
				}
				updated = append(updated, ServerRef{ID: out.ID, Name: out.Name})
			case PlanDelete:
				cur, err := lockUnchanged(ctx, tx, plan.File, it)
				if err != nil {
					return err
				}
				comps, err := deleteLockedServer(ctx, tx, actor, cur, "server.import.delete", map[string]any{"import": source})
				if err != nil {
					return fmt.Errorf("registry: import %s: %w", plan.File, err)
				}
				for _, c := range comps {
					lostUndo = append(lostUndo, toolname.Join(c.Server, c.Tool))
				}
				deleted = append(deleted, ServerRef{ID: cur.ID, Name: cur.Name})
			}
		}
		return nil
	}()
	if err != nil {
		return res, err
	}
	res.Created, res.Updated, res.Deleted, res.LostUndo = created, updated, deleted, lostUndo
	return res, nil
}

func (s *Service) importAudit(ctx context.Context, tx pgx.Tx, actor audit.Actor, action string, sv Server, payload map[string]any) error {
	_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: "server",
		TargetID: sv.ID, TargetName: sv.Name, Payload: payload})
	return err
}

// lockUnchanged locks the server a plan item was computed against and refuses it if it
// changed since: applying a plan nobody reviewed against the current state is not safe.
func lockUnchanged(ctx context.Context, tx pgx.Tx, file string, it PlanItem) (Server, error) {
	cur, err := getServer(ctx, tx, it.cur.ID, true)
	if errors.Is(err, ErrNotFound) {
		return Server{}, fmt.Errorf("registry: import %s: server %q was deleted after the plan was made; plan the import again", file, it.Name)
	}
	if err != nil {
		return Server{}, err
	}
	if !cur.UpdatedAt.Equal(it.cur.UpdatedAt) || cur.Name != it.cur.Name {
		return Server{}, fmt.Errorf("registry: import %s: server %q was changed (at %s) after the plan was made; plan the import again",
			file, it.Name, cur.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if cur.Type == TypeBuiltin {
		return Server{}, ErrBuiltinFixed // planServer refuses it; a plan built otherwise must not write it either
	}
	return cur, nil
}

// keptFromRow is d with each secret it keeps (no new plain value) taken from cur, the
// row as locked now, instead of the ciphertext the plan read: `secrets rotate`
// re-encrypts values without moving updated_at (so lockUnchanged lets it pass), and
// writing back the plan's ciphertext would put the value back under the key it replaced.
// The plan's draft is left as it is (a retried transaction applies it again).
func keptFromRow(d draft, cur Server) (draft, error) {
	out := d
	out.env, out.headers = make(map[string]secretValue, len(d.env)), make(map[string]secretValue, len(d.headers))
	for _, m := range []struct {
		field    string
		from, to map[string]secretValue
		stored   map[string]string
	}{{"env", d.env, out.env, cur.Env}, {"headers", d.headers, out.headers, cur.Headers}} {
		for k, v := range m.from {
			if v.plain == nil {
				c, ok := m.stored[k]
				if !ok {
					// Only a save removes a name, and a save moves updated_at.
					return out, fmt.Errorf("no longer has %s %s", m.field, k)
				}
				v = secretValue{cipher: c}
			}
			m.to[k] = v
		}
	}
	if d.authToken.plain == nil && d.authToken.cipher != "" {
		if cur.AuthToken == "" {
			return out, errors.New("no longer has its auth token")
		}
		out.authToken = secretValue{cipher: cur.AuthToken}
	}
	return out, nil
}
