package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/replicas"
)

// TerminalStore is the record of every replica's terminals (table terminals): a
// terminal's process belongs to the replica that started it, and the record says which
// one, so any replica can list it and send its requests there (docs/architecture.md,
// Terminals on several replicas). The Terminals write it as their terminals start,
// end and leave the list; a surviving replica ends the records of a replica that died
// (EndOrphaned).
type TerminalStore struct {
	pool     *pgxpool.Pool
	replicas *replicas.Service
	// This process's replica: its id (new at every start) and name.
	replicaID, replica string
}

// NewTerminalStore is the store of the replica rs describes.
func NewTerminalStore(pool *pgxpool.Pool, rs *replicas.Service) *TerminalStore {
	self := rs.Self()
	return &TerminalStore{pool: pool, replicas: rs, replicaID: self.ID, replica: self.Name}
}

// Replica is this process's replica name.
func (s *TerminalStore) Replica() string { return s.replica }

// Owner is the live replica that runs rec, with the address it is reached at;
// ErrReplicaGone when that replica stopped (by its id: a replica started since under
// the same name is not it, the terminal died with its predecessor).
func (s *TerminalStore) Owner(ctx context.Context, rec TerminalRecord) (replicas.Replica, error) {
	r, err := s.replicas.GetByID(ctx, rec.ReplicaID)
	if errors.Is(err, replicas.ErrGone) {
		return replicas.Replica{}, ErrReplicaGone
	}
	if err != nil {
		return replicas.Replica{}, err
	}
	if r.Address == "" {
		return replicas.Replica{}, fmt.Errorf("replica %s has no address other replicas reach it at (--advertise-url)", r.Name)
	}
	return r, nil
}

// TerminalRecord is a terminal as the table has it.
type TerminalRecord struct {
	ID             string     `json:"id" db:"id"`
	ReplicaID      string     `json:"replica_id" db:"replica_id"`
	Replica        string     `json:"replica" db:"replica"`
	Kind           string     `json:"kind" db:"kind"`
	ConversationID string     `json:"conversation_id" db:"conversation_id"`
	OwnerID        string     `json:"owner_id" db:"owner_id"`
	OwnerName      string     `json:"owner_name" db:"owner_name"`
	Dir            string     `json:"dir" db:"dir"`
	Command        string     `json:"command,omitempty" db:"command"`
	Cols           int        `json:"cols" db:"cols"`
	Rows           int        `json:"rows" db:"rows"`
	StartedAt      time.Time  `json:"started_at" db:"started_at"`
	EndedAt        *time.Time `json:"ended_at,omitempty" db:"ended_at"`
	ExitCode       *int       `json:"exit_code,omitempty" db:"exit_code"`
	EndedReason    string     `json:"ended_reason,omitempty" db:"ended_reason"`
	Local          bool       `json:"-" db:"local"`
}

// Ended reports whether the terminal's process ended.
func (r TerminalRecord) Ended() bool { return r.EndedAt != nil }

// ErrNoTerminal: no replica recorded that terminal.
var ErrNoTerminal = errors.New("terminals: no such terminal")

const recordColumns = `id, replica_id::text AS replica_id, replica, kind, conversation_id, owner_id, owner_name, dir, command,
	cols, rows, started_at, ended_at, exit_code, ended_reason, replica_id = $1::uuid AS local`

func (s *TerminalStore) opened(ctx context.Context, t *Terminal) error {
	cols, rows := t.Size()
	_, err := s.pool.Exec(ctx, `/* builtin.TerminalOpened */
		INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, owner_id, owner_name, dir, command, cols, rows, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		t.ID, s.replicaID, s.replica, t.Kind, t.ConversationID, t.OwnerID, t.OwnerName, t.Dir, t.Command, int(cols), int(rows), t.Started)
	if err != nil {
		return fmt.Errorf("terminals: record %s: %w", t.ID, err)
	}
	return nil
}

func (s *TerminalStore) ended(ctx context.Context, t *Terminal) error {
	return s.endedAgain(ctx, t, false)
}

// endedAgain is ended; again, it is a later try of an audited end whose first write
// failed: the sweep's reconcile or the terminal's close may have written the record
// meanwhile (its reason is set again over a bare 'closed'), and a first try whose commit
// went through though it reported an error has its audit row already.
func (s *TerminalStore) endedAgain(ctx context.Context, t *Terminal, again bool) error {
	why := t.endedFor.Load()
	if why == nil {
		_, err := s.pool.Exec(ctx, `/* builtin.TerminalEnded */
			UPDATE terminals SET ended_at = coalesce(ended_at, now()), exit_code = $2, ended_reason = 'exited'
			WHERE id = $1 AND ended_at IS NULL`, t.ID, t.exit)
		return err
	}
	// Ended by Toolwarden, not by its program nor by a call: the record and the audit log
	// say why, together.
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `/* builtin.TerminalEndedFor */
			UPDATE terminals SET ended_at = coalesce(ended_at, now()), exit_code = $2, ended_reason = $3
			WHERE id = $1 AND (ended_at IS NULL OR $4 AND ended_reason = 'closed')`, t.ID, t.exit, *why, again); err != nil {
			return err
		}
		if again {
			var done bool
			if err := tx.QueryRow(ctx, `/* builtin.TerminalEndAudited */
				SELECT EXISTS (SELECT 1 FROM audit_log WHERE target_id = $1 AND target_id <> '' AND target_type = 'terminal' AND action = 'terminal.end')`,
				t.ID).Scan(&done); err != nil || done {
				return err
			}
		}
		actor := audit.System
		if by := t.endedBy.Load(); by != nil {
			actor = *by // an administrator's End on its page
		}
		_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "terminal.end", TargetType: "terminal", TargetID: t.ID,
			TargetName: t.ConversationID, Payload: map[string]any{"reason": t.ts.endedWhy(*why), "ended_reason": *why, "kind": t.Kind,
				"owner_id": t.OwnerID, "owner_name": t.OwnerName, "command": t.Command, "replica": s.replica}})
		return err
	})
}

// endedWhy says in words why Toolwarden ended a terminal (its record's ended_reason).
func (ts *Terminals) endedWhy(reason string) string {
	switch reason {
	case EndedOwnerDisabled:
		return "the owner's account was disabled"
	case EndedOwnerRevoked:
		return "the owner may no longer use " + terminalTool
	case EndedByAdmin:
		return "ended by an administrator"
	case EndedIdle:
		return fmt.Sprintf("no input or output for %s", ts.opts.IdleTimeout)
	}
	return reason
}

func (s *TerminalStore) gone(ctx context.Context, t *Terminal) error {
	_, err := s.pool.Exec(ctx, `/* builtin.TerminalGone */
		UPDATE terminals SET ended_at = coalesce(ended_at, now()), ended_reason = CASE WHEN ended_at IS NULL THEN 'closed' ELSE ended_reason END,
		gone_at = now() WHERE id = $1`, t.ID)
	return err
}

// Get is terminal id's record, whichever replica runs it (ErrNoTerminal when none does
// or did).
func (s *TerminalStore) Get(ctx context.Context, id string) (TerminalRecord, error) {
	rows, err := db.All[TerminalRecord](ctx, s.pool, "terminals: get", `/* builtin.TerminalGet */
		SELECT `+recordColumns+` FROM terminals WHERE id = $2`, s.replicaID, id)
	if err != nil {
		return TerminalRecord{}, err
	}
	if len(rows) == 0 {
		return TerminalRecord{}, ErrNoTerminal
	}
	return rows[0], nil
}

// Others are the listed terminals of the other replicas (and of this replica's previous
// runs), oldest first: those not gone, and whose process ended less than keepEnded ago.
func (s *TerminalStore) Others(ctx context.Context, keepEnded time.Duration) ([]TerminalRecord, error) {
	return db.All[TerminalRecord](ctx, s.pool, "terminals: others", `/* builtin.TerminalOthers */
		SELECT `+recordColumns+` FROM terminals
		WHERE gone_at IS NULL AND replica_id <> $1::uuid AND (ended_at IS NULL OR ended_at > now() - make_interval(secs => $2))
		ORDER BY started_at, id`, s.replicaID, keepEnded.Seconds())
}

// Reconcile makes the records of the terminals this replica holds (held, from
// Terminals.List) say what they are. Each change is written once as it happens, and a
// write that failed (a database blip), or an end that came after another replica had
// ended the record as orphaned (this one was not seen for a while), would otherwise
// leave the record wrong for good: a live terminal missing, or one whose output and
// exit code are here said to have ended with its replica. A terminal without a record
// gets one; a running one ended as orphaned is reopened; one that ended is recorded
// ended, with its exit code, where its record says it runs or ended with the replica.
// Records gone from the list are left alone. It returns the records it changed.
func (s *TerminalStore) Reconcile(ctx context.Context, held []*Terminal) ([]TerminalRecord, error) {
	held, err := s.unreconciled(ctx, held)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	n := len(held)
	ids, kinds, convs, ownerIDs, ownerNames := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	dirs, commands, reasons := make([]string, n), make([]string, n), make([]string, n)
	cols, rows, codes := make([]int, n), make([]int, n), make([]int, n)
	started, exited := make([]time.Time, n), make([]bool, n)
	byID := make(map[string]*Terminal, n)
	for i, t := range held {
		c, r := t.Size()
		ids[i], kinds[i], convs[i], ownerIDs[i], ownerNames[i] = t.ID, t.Kind, t.ConversationID, t.OwnerID, t.OwnerName
		dirs[i], commands[i], cols[i], rows[i], started[i] = t.Dir, t.Command, int(c), int(r), t.Started
		if t.Exited() {
			exited[i], codes[i], reasons[i] = true, t.ExitCode(), "exited"
			if why := t.endedFor.Load(); why != nil {
				reasons[i] = *why
			}
		}
		byID[t.ID] = t
	}
	changed, err := db.All[TerminalRecord](ctx, s.pool, "terminals: reconcile", `/* builtin.TerminalReconcile */
		INSERT INTO terminals AS t (id, replica_id, replica, kind, conversation_id, owner_id, owner_name, dir, command, cols, rows,
			started_at, ended_at, exit_code, ended_reason)
		SELECT m.id, $1::uuid, $2, m.kind, m.conv, m.owner_id, m.owner_name, m.dir, m.command, m.cols, m.rows, m.started,
			CASE WHEN m.exited THEN now() END, CASE WHEN m.exited THEN m.code END, CASE WHEN m.exited THEN m.reason ELSE '' END
		FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::int[], $11::int[],
			$12::timestamptz[], $13::bool[], $14::int[], $15::text[])
			AS m(id, kind, conv, owner_id, owner_name, dir, command, cols, rows, started, exited, code, reason)
		ON CONFLICT (id) DO UPDATE SET ended_at = excluded.ended_at, exit_code = excluded.exit_code, ended_reason = excluded.ended_reason
		WHERE t.replica_id = excluded.replica_id AND t.gone_at IS NULL
			AND (t.ended_reason = 'replica_stopped' OR excluded.ended_at IS NOT NULL AND t.ended_at IS NULL)
		RETURNING `+recordColumns,
		s.replicaID, s.replica, ids, kinds, convs, ownerIDs, ownerNames, dirs, commands, cols, rows, started, exited, codes, reasons)
	if err != nil {
		return nil, err
	}
	for _, r := range changed {
		// Closed since held was taken: its record may have been marked gone before this
		// wrote it again (a record it had none of), so it is marked gone again.
		if t := byID[r.ID]; t != nil && t.ts.Get(t.ID) != t {
			if err := s.gone(ctx, t); err != nil {
				return changed, fmt.Errorf("terminals: record %s gone: %w", t.ID, err)
			}
		}
	}
	return changed, nil
}

// unreconciled are the terminals of held whose record may not say what they are: none,
// one another replica ended as orphaned, or one still running for a terminal that
// ended. Only those are written: a sweep runs every heartbeat, and writing every held
// terminal would send each one's command line (up to 100,000 characters) and lock its
// row each time.
func (s *TerminalStore) unreconciled(ctx context.Context, held []*Terminal) ([]*Terminal, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids := make([]string, len(held))
	for i, t := range held {
		ids[i] = t.ID
	}
	type state struct {
		ID     string `db:"id"`
		Ended  bool   `db:"ended"`
		Reason string `db:"ended_reason"`
		Ours   bool   `db:"ours"`
		Gone   bool   `db:"gone"`
	}
	found, err := db.All[state](ctx, s.pool, "terminals: read the records to reconcile", `/* builtin.TerminalUnreconciled */
		SELECT id, ended_at IS NOT NULL AS ended, ended_reason, replica_id = $2::uuid AS ours, gone_at IS NOT NULL AS gone
		FROM terminals WHERE id = ANY($1)`, ids, s.replicaID)
	if err != nil {
		return nil, err
	}
	recs := make(map[string]state, len(found))
	for _, st := range found {
		recs[st.ID] = st
	}
	var out []*Terminal
	for _, t := range held {
		st, ok := recs[t.ID]
		switch {
		case !ok:
		case !st.Ours || st.Gone:
			continue
		case st.Reason == "replica_stopped":
		case t.Exited() && !st.Ended:
		default:
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// EndOrphaned ends the records of the terminals of replicas not seen for deadAfter
// (their processes died with them) and returns them; each is returned by one replica
// only. Records gone a day ago are removed.
func (s *TerminalStore) EndOrphaned(ctx context.Context, deadAfter time.Duration) ([]TerminalRecord, error) {
	ended, err := db.All[TerminalRecord](ctx, s.pool, "terminals: end orphaned", `/* builtin.TerminalEndOrphaned */
		UPDATE terminals t SET ended_at = now(), ended_reason = 'replica_stopped'
		WHERE t.ended_at IS NULL AND t.replica_id <> $1::uuid AND NOT EXISTS (
			SELECT 1 FROM replicas r WHERE r.id = t.replica_id AND r.seen_at > now() - make_interval(secs => $2))
		RETURNING `+recordColumns, s.replicaID, deadAfter.Seconds())
	if err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `/* builtin.TerminalPrune */
		DELETE FROM terminals WHERE gone_at < now() - interval '1 day'
			OR ended_at < now() - interval '1 day' AND replica_id <> $1::uuid`, s.replicaID); err != nil {
		return ended, fmt.Errorf("terminals: prune: %w", err)
	}
	return ended, nil
}

// TerminalOpRequest is a terminal_operations operation one replica sends the replica
// that runs the session (POST /internal/v1/terminals/:id/op): the operation, its
// arguments, and the call as the router let it through.
type TerminalOpRequest struct {
	Operation string          `json:"operation"`
	Arguments json.RawMessage `json:"arguments"`
	Call      callmeta.Meta   `json:"call"`
}

// TerminalNotHereCode is the error code (404) of the replica asked to run an operation
// on a terminal it does not hold (it ended and was forgotten): distinct from the
// not_found of a route the replica lacks (one of an earlier release, mid-upgrade), which
// says nothing of the terminal.
const TerminalNotHereCode = "terminal_not_here"

// Store is the terminals' record (nil without one).
func (ts *Terminals) Store() *TerminalStore { return ts.opts.Store }

// KeepEnded is how long a terminal whose process ended stays listed.
func (ts *Terminals) KeepEnded() time.Duration { return ts.opts.KeepEnded }
