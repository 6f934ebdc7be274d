package executions

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// SealKey names the key that made a seal: given what an execution's seal is the MAC of
// and the seal, the id of the key that verifies it, or "" when none does. A seal names
// no key, so the caller tries the key file's keys one by one (toolwarden secrets).
type SealKey func(input, seal []byte) string

// openStatuses are the states in which an execution's seal is checked again (before its
// approval, its steps and its rollback); nothing looks at the seal of a final one.
func openStatuses() []string {
	var out []string
	for _, s := range Statuses {
		if !Final(s) {
			out = append(out, string(s))
		}
	}
	return out
}

// SealUsage counts the seals that are still checked (of executions not final: awaiting
// approval, running, or failed and so open to a rollback) by the key keyOf says made
// each; "" counts those no key verifies (altered, or made with a key no longer in the
// file). newest > 0 looks at that many of the newest only. A seal made as v1 (before v2)
// is counted apart, under EarlierSeal(key): it is refused whichever key verifies it, and
// nothing seals it again (Reseal) to free the key, so it cannot hold a retirement back;
// once its key is retired, it matches no key (as an altered record's would not).
func SealUsage(ctx context.Context, pool *pgxpool.Pool, keyOf SealKey, newest int) (map[string]int, error) {
	out := map[string]int{}
	err := eachOpenSeal(ctx, pool, newest, func(ex *Execution) {
		if k, v1 := sealMadeBy(keyOf, ex); v1 {
			out[EarlierSeal(k)]++
		} else {
			out[k]++
		}
	})
	if err != nil {
		return nil, fmt.Errorf("executions: seal usage: %w", err)
	}
	return out, nil
}

// EarlierSeal is the SealUsage entry that counts the v1 seals key made.
func EarlierSeal(key string) string { return "v1:" + key }

// sealMadeBy is the key that made ex's seal, as v3 or v2 or (v1) as a seal made before
// v2 (see Service.sealStateOf); "" when none.
func sealMadeBy(keyOf SealKey, ex *Execution) (key string, v1 bool) {
	if k := keyOf(sealInputV3(ex, ex.ApprovedHash, ex.RollbackHash, ex.RollbackPlan), ex.Seal); k != "" {
		return k, false
	}
	if k := keyOf(sealInputV2(ex, ex.ApprovedHash, ex.RollbackHash, ex.RollbackPlan), ex.Seal); k != "" {
		return k, false
	}
	k := keyOf(sealInputV1(ex.ID, ex.PlanHash, ex.ApprovedHash, ex.RollbackHash), ex.Seal)
	return k, k != ""
}

// Reseal seals again, with keys' primary key, the seals SealUsage counts that keyOf says
// another key made (before a rotation), so that key can be retired without making those
// executions look altered. Each is sealed again in a transaction of its own with its row
// locked, beside a serving Toolwarden. A seal no key verifies stays as it is: sealing it
// again would vouch for an altered record; so does one made as v1 (before v2), which did
// not cover the requester (Service.sealStateOf refuses it). A v2 seal is made again as
// v3: it is accepted as it is, so covering from then on the risk levels it left out
// vouches for nothing it did not. It returns how many it sealed again.
// The connection identities the steps pinned under that key stay so (IdentityUsage).
func Reseal(ctx context.Context, pool *pgxpool.Pool, keys *secrets.Keyring, keyOf SealKey) (int, error) {
	stale := func(ex *Execution) bool {
		k, v1 := sealMadeBy(keyOf, ex)
		return k != "" && k != keys.PrimaryID() && !v1
	}
	var ids []string
	err := eachOpenSeal(ctx, pool, 0, func(ex *Execution) {
		if stale(ex) {
			ids = append(ids, ex.ID)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("executions: reseal: %w", err)
	}
	n := 0
	for _, id := range ids {
		err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `/* executions.Reseal.lock */ SELECT `+columns+` FROM executions WHERE id = $1 FOR UPDATE`, id)
			if err != nil {
				return err
			}
			ex, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Execution])
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // deleted meanwhile
			}
			if err != nil {
				return err
			}
			// It may have moved on meanwhile, sealed anew by a serving process.
			if ex.Seal == nil || !stale(ex) {
				return nil
			}
			seal := keys.MAC(sealInputV3(ex, ex.ApprovedHash, ex.RollbackHash, ex.RollbackPlan))
			if _, err := tx.Exec(ctx, `/* executions.Reseal */ UPDATE executions SET seal = $2 WHERE id = $1`, id, seal); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("executions: reseal %s: %w", id, err)
		}
	}
	return n, nil
}

// IdentityKey names the key that made a connection identity a planned step pinned
// (router.Pin.ServerIdentity, a MAC of its server's settings under the primary key of
// the time): given the step's tool id and the identity, the id of the key under which
// it is that tool's server's identity now, or "" when it is under none (the settings
// changed, or the tool or server is gone: the step is refused whatever the key file holds).
type IdentityKey func(ctx context.Context, toolID, identity string) (string, error)

// IdentityUsage counts, by the key keyOf says made it, the executions not final with a
// step still to run whose pinned connection identity is checked again before it runs
// (checkBinding, and the router at the call): the run's steps of one planned, awaiting
// approval or executing, and the rollback's of one rolling back. A failed execution's
// rollback is pinned when it is asked for, under the primary key of then. Reseal does
// not pin those steps again: their identities are part of the hash a person approved
// (and confirms by), so the key that made them stays until they end (retire-key waits).
// An execution with steps under several keys counts under each; one whose seal is
// missing is left out (it is refused whatever the keys, as SealUsage leaves it out).
func IdentityUsage(ctx context.Context, pool *pgxpool.Pool, keyOf IdentityKey) (map[string]int, error) {
	type openStep struct {
		ExecutionID string `db:"execution_id"`
		Phase       string `db:"phase"`
		Position    int    `db:"position"`
	}
	// Running too: a step is marked running before its call is checked and sent.
	steps, err := db.All[openStep](ctx, pool, "executions: identity usage", `/* executions.IdentityUsage.steps */
		SELECT c.execution_id, c.phase, c.position FROM tool_calls c JOIN executions e ON e.id = c.execution_id
		WHERE e.seal IS NOT NULL AND e.status = ANY($1) AND c.status = ANY($2)`,
		openStatuses(), []string{StepPending, StepRunning})
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return map[string]int{}, nil
	}
	byID := map[string][]openStep{}
	for _, st := range steps {
		byID[st.ExecutionID] = append(byID[st.ExecutionID], st)
	}
	var open []*Execution
	err = eachOpenSeal(ctx, pool, 0, func(ex *Execution) {
		if byID[ex.ID] != nil {
			open = append(open, ex)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("executions: identity usage: %w", err)
	}
	out := map[string]int{}
	for _, ex := range open {
		keys := map[string]bool{}
		for _, st := range byID[ex.ID] {
			var list []PlannedStep
			switch {
			case st.Phase == PhaseRun && (ex.Status == Planning || ex.Status == AwaitingApproval || ex.Status == Executing):
				list = ex.Plan.Steps
			case st.Phase == PhaseRollback && ex.Status == RollingBack && ex.RollbackPlan != nil:
				list = ex.RollbackPlan.Steps
			}
			if st.Position >= len(list) {
				continue // a phase that no longer runs, or a step the plan lacks (refused as altered)
			}
			pin := list[st.Position].Pin
			k, err := keyOf(ctx, pin.ToolID, pin.ServerIdentity)
			if err != nil {
				return nil, fmt.Errorf("executions: identity usage: %w", err)
			}
			if k != "" {
				keys[k] = true
			}
		}
		for k := range keys {
			out[k]++
		}
	}
	return out, nil
}

// eachOpenSeal calls fn with each sealed execution that is not final, newest first
// (newest > 0: that many only).
func eachOpenSeal(ctx context.Context, pool *pgxpool.Pool, newest int, fn func(ex *Execution)) error {
	q := `/* executions.eachOpenSeal */ SELECT ` + columns + ` FROM executions
		WHERE seal IS NOT NULL AND status = ANY($1) ORDER BY created_at DESC, id DESC`
	args := []any{openStatuses()}
	if newest > 0 {
		q += ` LIMIT $2`
		args = append(args, newest)
	}
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		ex, err := pgx.RowToAddrOfStructByName[Execution](rows)
		if err != nil {
			return err
		}
		fn(ex)
	}
	return rows.Err()
}
