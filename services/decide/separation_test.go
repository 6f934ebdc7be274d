package decide_test

import (
	"context"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A stored separation setting that is not a known one (an unknown word, or not a JSON
// string) reads as the strictest, always: a person alone cannot approve their own
// high-risk request, where auto would have let them.
func TestUnknownSeparationIsAlways(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	d := decide.New(pool, auth.New(pool, nil))
	var alice string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash, last_login_at) VALUES ('alice', 'tool_user', 'x', now()) RETURNING id`).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	own := decide.Decision{Actor: audit.Actor{Kind: audit.ActorUser, ID: alice, Name: "alice"}, Role: auth.RoleToolUser,
		Requester: alice, Level: risk.High}
	for _, raw := range []string{`"sometimes"`, `{"mode":"off"}`, `""`} {
		if _, err := pool.Exec(ctx, `INSERT INTO settings (key, value, updated_by) VALUES ($1, $2::jsonb, 'test')
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, decide.SettingKey, raw); err != nil {
			t.Fatal(err)
		}
		if sep, err := decide.ReadSeparation(ctx, pool); err != nil || sep != decide.SeparationAlways {
			t.Errorf("stored %s: read as %q %v, want always", raw, sep, err)
		}
		if _, err := d.Check(ctx, own); err == nil || !decide.NeedsOther(err) {
			t.Errorf("stored %s: alice approving her own high-risk request alone: %v, want refused (always)", raw, err)
		}
	}
}
