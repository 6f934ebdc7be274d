package tools_test

import (
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A person's auto-enable preferences are bounded (each is matched against every tool a
// discovery validates): past MaxPreferences a new one is refused saying why, nothing is
// stored, and saving one already there again still works.
func TestPreferencesCapped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.str(`INSERT INTO users (username, role, password_hash) VALUES ('carol', 'tool_manager', 'x') RETURNING id::text`)
	carol := audit.Actor{Kind: audit.ActorUser, ID: id, Name: "carol"}
	for i := range tools.MaxPreferences {
		if _, err := f.svc.SavePreference(f.ctx, carol, fmt.Sprintf("w%d", i), "always enable new tools"); err != nil {
			t.Fatalf("preference %d: %v", i, err)
		}
	}
	_, err := f.svc.SavePreference(f.ctx, carol, "one more", "always enable new one more tools")
	if fe, ok := fault.As(err); !ok || fe.Code != "too_many_preferences" {
		t.Fatalf("preference %d: %v, want too_many_preferences", tools.MaxPreferences+1, err)
	}
	if n := f.count(`SELECT count(*) FROM tool_auto_enable_preferences WHERE user_id = $1`, id); n != tools.MaxPreferences {
		t.Fatalf("%d preferences stored, want %d", n, tools.MaxPreferences)
	}
	if _, err := f.svc.SavePreference(f.ctx, carol, "w7", "again"); err != nil {
		t.Fatalf("saving one already there: %v", err)
	}
}
