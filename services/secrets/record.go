package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// recordSetting is the settings row listing the ids of the keys serve (and rotate) used
// on the database. A key id is a hash prefix of the key that every ciphertext shows
// anyway; the row tells a key file of the installation from a new one while nothing is
// sealed yet.
const recordSetting = "secrets.keys"

// recordLock serialises UpdateRecordedKeys: two serves making their first key on one
// fresh database at once must not both be let through.
const recordLock = "toolwarden.secrets.keys"

type rower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// RecordedKeys is the ids of the keys used on the database; nil when none are recorded
// (no serve has started on it since they are).
func RecordedKeys(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	return recordedKeys(ctx, pool)
}

func recordedKeys(ctx context.Context, q rower) ([]string, error) {
	var ids []string
	err := q.QueryRow(ctx, `/* secrets.RecordedKeys */ SELECT value FROM settings WHERE key = $1`, recordSetting).Scan(&ids)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: read the recorded keys: %w", err)
	}
	return ids, nil
}

// UpdateRecordedKeys stores what update makes of the recorded key ids, under a lock and
// in one transaction with the read; update's error stores nothing.
func UpdateRecordedKeys(ctx context.Context, pool *pgxpool.Pool, update func(recorded []string) ([]string, error)) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `/* secrets.UpdateRecordedKeys.lock */ SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, recordLock); err != nil {
			return fmt.Errorf("secrets: record the keys: %w", err)
		}
		recorded, err := recordedKeys(ctx, tx)
		if err != nil {
			return err
		}
		next, err := update(slices.Clone(recorded))
		if err != nil || slices.Equal(next, recorded) {
			return err
		}
		if _, err := tx.Exec(ctx, `/* secrets.UpdateRecordedKeys */ INSERT INTO settings (key, value, updated_by) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
			recordSetting, next, "toolwarden"); err != nil {
			return fmt.Errorf("secrets: record the keys: %w", err)
		}
		return nil
	})
}
