package executions

import (
	"context"
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
// file). newest > 0 looks at that many of the newest only.
func SealUsage(ctx context.Context, pool *pgxpool.Pool, keyOf SealKey, newest int) (map[string]int, error) {
	out := map[string]int{}
	err := eachOpenSeal(ctx, pool, newest, func(id string, input, seal []byte) {
		out[keyOf(input, seal)]++
	})
	if err != nil {
		return nil, fmt.Errorf("executions: seal usage: %w", err)
	}
	return out, nil
}

// Reseal seals again, with keys' primary key, the seals SealUsage counts that keyOf says
// another key made (before a rotation), so that key can be retired without making those
// executions look altered. Each is sealed again in a transaction of its own with its row
// locked, beside a serving Toolwarden. A seal no key verifies stays as it is: sealing it
// again would vouch for an altered record. It returns how many it sealed again.
func Reseal(ctx context.Context, pool *pgxpool.Pool, keys *secrets.Keyring, keyOf SealKey) (int, error) {
	stale := func(input, seal []byte) bool {
		k := keyOf(input, seal)
		return k != "" && k != keys.PrimaryID()
	}
	var ids []string
	err := eachOpenSeal(ctx, pool, 0, func(id string, input, seal []byte) {
		if stale(input, seal) {
			ids = append(ids, id)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("executions: reseal: %w", err)
	}
	n := 0
	for _, id := range ids {
		err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			var plan, approved, rollback, seal []byte
			err := tx.QueryRow(ctx, `/* executions.Reseal.lock */ SELECT plan_hash, approved_hash, rollback_hash, seal
				FROM executions WHERE id = $1 FOR UPDATE`, id).Scan(&plan, &approved, &rollback, &seal)
			if err == pgx.ErrNoRows {
				return nil // deleted meanwhile
			}
			if err != nil {
				return err
			}
			// It may have moved on meanwhile, sealed anew by a serving process.
			input := sealInput(id, plan, approved, rollback)
			if seal == nil || !stale(input, seal) {
				return nil
			}
			if _, err := tx.Exec(ctx, `/* executions.Reseal */ UPDATE executions SET seal = $2 WHERE id = $1`, id, keys.MAC(input)); err != nil {
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

// eachOpenSeal calls fn with the id, the sealed input and the seal of each sealed
// execution that is not final, newest first (newest > 0: that many only).
func eachOpenSeal(ctx context.Context, pool *pgxpool.Pool, newest int, fn func(id string, input, seal []byte)) error {
	q := `/* executions.eachOpenSeal */ SELECT id::text, plan_hash, approved_hash, rollback_hash, seal FROM executions
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
	var id string
	var plan, approved, rollback, seal []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &plan, &approved, &rollback, &seal}, func() error {
		fn(id, sealInput(id, plan, approved, rollback), seal)
		return nil
	})
	return err
}
