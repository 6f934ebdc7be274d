package executions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
)

// SettingsPatch changes some execution settings; nil fields keep their value.
type SettingsPatch struct {
	ApprovalTTL    *time.Duration
	HighSeparation *decide.Separation // "" is auto
}

// PatchSettings applies p to the settings in force, audited, and returns the result. The
// read, the merge and the write are one transaction holding the settings rows, so two
// patches of different fields at the same time both stick.
func (s *Service) PatchSettings(ctx context.Context, actor audit.Actor, p SettingsPatch) (Settings, error) {
	var st Settings
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		if err := lockSettings(ctx, tx, actor.Name); err != nil {
			return err
		}
		cur, err := ReadSettings(ctx, tx)
		if err != nil {
			return err
		}
		st = cur
		if p.ApprovalTTL != nil {
			st.ApprovalTTL = *p.ApprovalTTL
		}
		if p.HighSeparation != nil {
			st.HighSeparation = *p.HighSeparation
		}
		if err := CheckSettings(st); err != nil {
			return err
		}
		if st.HighSeparation == "" {
			st.HighSeparation = decide.SeparationAuto
		}
		return StoreSettings(ctx, tx, actor, st)
	})
	if err != nil {
		return Settings{}, err
	}
	return st, nil
}

// lockSettings locks the settings rows until tx ends, first storing the defaults of those
// nobody set: a row that does not exist yet cannot be locked. The patch rewrites both
// rows anyway, so the defaults never outlive it.
func lockSettings(ctx context.Context, tx pgx.Tx, by string) error {
	ttl, _ := json.Marshal(int64(DefaultApprovalTTL / time.Second))
	sep, _ := json.Marshal(decide.SeparationAuto)
	if _, err := tx.Exec(ctx, `/* executions.lockSettings.defaults */
		INSERT INTO settings (key, value, updated_by) VALUES ($1, $2, $5), ($3, $4, $5) ON CONFLICT (key) DO NOTHING`,
		settingTTL, ttl, decide.SettingKey, sep, by); err != nil {
		return fmt.Errorf("executions: lock settings: %w", err)
	}
	// In StoreSettings' order (the TTL first), so it cannot deadlock with a writer of both.
	if _, err := tx.Exec(ctx, `/* executions.lockSettings */
		SELECT key FROM settings WHERE key IN ($1, $2) ORDER BY key = $1 DESC FOR UPDATE`, settingTTL, decide.SettingKey); err != nil {
		return fmt.Errorf("executions: lock settings: %w", err)
	}
	return nil
}
