package tools

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Preference is a person's standing wish that new tools about some words be enabled when
// discovery validates them ("always enable new weather tools"). It acts only while its
// owner is active and may enable tools.
type Preference struct {
	ID        string    `db:"id" json:"id"`
	Words     string    `db:"words" json:"words"`
	Sentence  string    `db:"sentence" json:"sentence"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

var prefWordRE = regexp.MustCompile(`[a-z0-9]+`)

// preferenceWords are the words a preference matches, lower case, letters and digits
// only (so each is safe in a regular expression).
func preferenceWords(s string) string {
	return strings.Join(prefWordRE.FindAllString(strings.ToLower(s), 8), " ")
}

// MaxPreferences bounds a person's auto-enable preferences: each is matched against every
// tool a discovery validates, and nothing else bounds how many a script may save.
const MaxPreferences = 100

// SavePreference stores the actor's auto-enable preference for tools about words.
func (s *Service) SavePreference(ctx context.Context, actor audit.Actor, words, sentence string) (Preference, error) {
	w := preferenceWords(words)
	if w == "" {
		return Preference{}, verr.New("words", "name what the tools are about, for example \"weather\"")
	}
	var p Preference
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		// One person's saves one at a time, so two cannot both pass the count.
		if _, err := tx.Exec(ctx, `/* tools.SavePreference.lock */ SELECT pg_advisory_xact_lock(hashtextextended('tools.preferences:' || $1, 0))`,
			actor.ID); err != nil {
			return fmt.Errorf("tools: save preference: %w", err)
		}
		var n int
		var exists bool
		if err := tx.QueryRow(ctx, `/* tools.SavePreference.count */ SELECT count(*), coalesce(bool_or(words = $2), false)
			FROM tool_auto_enable_preferences WHERE user_id = $1`, actor.ID, w).Scan(&n, &exists); err != nil {
			return fmt.Errorf("tools: save preference: %w", err)
		}
		if n >= MaxPreferences && !exists {
			return fault.Conflict("too_many_preferences", fmt.Sprintf("not saved: you have %d auto-enable preferences, "+
				"the most there may be; forget one you no longer need first", n))
		}
		rows, err := tx.Query(ctx, `/* tools.SavePreference */
			INSERT INTO tool_auto_enable_preferences (id, user_id, words, sentence) VALUES ($1, $2, $3, $4)
			ON CONFLICT (user_id, words) DO UPDATE SET sentence = excluded.sentence
			RETURNING id::text, words, sentence, created_at`, uuid.NewString(), actor.ID, w, sentence)
		if err != nil {
			return fmt.Errorf("tools: save preference: %w", err)
		}
		if p, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Preference]); err != nil {
			return fmt.Errorf("tools: save preference: %w", err)
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "preference.save", TargetType: "preference",
			TargetID: p.ID, TargetName: w, Payload: map[string]any{"auto_enable": w, "sentence": sentence}})
		return err
	})
	return p, err
}

// Preferences lists a person's auto-enable preferences, oldest first.
func (s *Service) Preferences(ctx context.Context, userID string) ([]Preference, error) {
	rows, err := s.pool.Query(ctx, `/* tools.Preferences */
		SELECT id::text, words, sentence, created_at FROM tool_auto_enable_preferences
		WHERE user_id = $1 ORDER BY created_at, id`, userID)
	if err != nil {
		return nil, fmt.Errorf("tools: preferences: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Preference])
}

// DeletePreference removes the actor's preference for words; it reports whether one
// existed.
func (s *Service) DeletePreference(ctx context.Context, actor audit.Actor, words string) (bool, error) {
	w := preferenceWords(words)
	found := false
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `/* tools.DeletePreference */
			DELETE FROM tool_auto_enable_preferences WHERE user_id = $1 AND words = $2 RETURNING id::text`,
			actor.ID, w).Scan(&id)
		if err == pgx.ErrNoRows {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tools: delete preference: %w", err)
		}
		found = true
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "preference.delete", TargetType: "preference",
			TargetID: id, TargetName: w})
		return err
	})
	return found, err
}

// enablingRoles are the roles whose preferences may enable tools.
func enablingRoles() []string {
	var out []string
	for _, r := range auth.Roles {
		if r.Can(auth.PermToolEnable) {
			out = append(out, string(r))
		}
	}
	return out
}
