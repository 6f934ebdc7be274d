package executions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/fault"
)

// SettingsPatch changes some execution settings; nil fields keep their value.
type SettingsPatch struct {
	ApprovalTTL    *time.Duration
	HighSeparation *decide.Separation // "" is auto
	// What the caller saw of a field it changes (the value its form was rendered with);
	// nil when not known. A field someone else changed since, to a value other than the
	// patch's, is refused (StaleSettings): the later of two saves must not silently undo
	// the earlier.
	WasApprovalTTL    *time.Duration
	WasHighSeparation *decide.Separation
}

// CodeSettingsStale is the code of a patch refused with StaleSettings.
const CodeSettingsStale = "settings_stale"

// StaleSettings is the cause of a patch refused because settings it changes were
// changed by someone else since the caller saw them: Fields names them
// ("approval_ttl", "high_separation"), Now is what is in force.
type StaleSettings struct {
	Fields []string
	Now    Settings
}

func (e *StaleSettings) Error() string {
	return "someone else changed " + strings.Join(e.Fields, " and ") + " since you saw the settings"
}

// stale names the fields p changes that were changed since the caller saw them, to a
// value other than p's (cur is what is in force).
func (p SettingsPatch) stale(cur Settings) []string {
	var fields []string
	if p.ApprovalTTL != nil && p.WasApprovalTTL != nil && cur.ApprovalTTL != *p.WasApprovalTTL && cur.ApprovalTTL != *p.ApprovalTTL {
		fields = append(fields, "approval_ttl")
	}
	if p.HighSeparation != nil && p.WasHighSeparation != nil && cur.HighSeparation != *p.WasHighSeparation && cur.HighSeparation != *p.HighSeparation {
		fields = append(fields, "high_separation")
	}
	return fields
}

// PatchSettings applies p to the settings in force, audited, and returns the result. The
// read, the check against what the caller saw, the merge and the write are one
// transaction holding the settings rows, so two patches of different fields at the same
// time both stick, and of two of the same field seen alike the second is refused. A patch
// of no field changes nothing: it is what is in force, neither written nor audited.
func (s *Service) PatchSettings(ctx context.Context, actor audit.Actor, p SettingsPatch) (Settings, error) {
	if p.ApprovalTTL == nil && p.HighSeparation == nil {
		return s.Settings(ctx)
	}
	var st Settings
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		if err := LockSettings(ctx, tx, actor.Name); err != nil {
			return err
		}
		cur, err := ReadSettings(ctx, tx)
		if err != nil {
			return err
		}
		if fields := p.stale(cur); len(fields) > 0 {
			se := &StaleSettings{Fields: fields, Now: cur}
			return fault.Wrap(se, fault.KindStale, CodeSettingsStale, se.Error()).WithDetails(map[string]any{"fields": fields})
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

// LockSettings locks the settings rows until tx ends, first storing the defaults of those
// nobody set: a row that does not exist yet cannot be locked (the defaults read the
// same). PatchSettings takes it, and a configuration import before it checks that the
// settings are still as its plan saw them, so a change committed after that check waits
// instead of being overwritten.
func LockSettings(ctx context.Context, tx pgx.Tx, by string) error {
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
