package executions_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Two patches of different settings at the same time both stick, also when nobody set
// either yet (no row to lock); a patch leaves the other setting as it is, and a bad one
// stores nothing.
func TestPatchSettingsConcurrent(t *testing.T) {
	t.Parallel()
	e := start(t)
	for round := range 20 {
		if _, err := e.pool.Exec(e.ctx, `DELETE FROM settings WHERE key IN ('executions.approval_ttl_seconds', $1)`, decide.SettingKey); err != nil {
			t.Fatal(err)
		}
		ttl, sep := time.Duration(10+round)*time.Minute, decide.SeparationAlways
		if round%2 == 1 {
			sep = decide.SeparationOff
		}
		patches := []executions.SettingsPatch{{ApprovalTTL: &ttl}, {HighSeparation: &sep}}
		errs := make([]error, len(patches))
		var wg sync.WaitGroup
		for i, p := range patches {
			wg.Go(func() { _, errs[i] = e.svc.PatchSettings(e.ctx, admin, p) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if st, err := e.svc.Settings(e.ctx); err != nil || st.ApprovalTTL != ttl || st.HighSeparation != sep {
			t.Fatalf("round %d: got %+v, %v; want TTL %s and separation %s", round, st, err, ttl, sep)
		}
	}

	hour := time.Hour
	st, err := e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{ApprovalTTL: &hour})
	if err != nil || st.ApprovalTTL != hour || st.HighSeparation != decide.SeparationOff {
		t.Fatalf("a TTL alone: got %+v, %v; want 1h and the separation kept (off)", st, err)
	}
	bad, auto := 5*time.Second, decide.SeparationAuto
	var ve *verr.Error
	if _, err := e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{ApprovalTTL: &bad, HighSeparation: &auto}); !errors.As(err, &ve) {
		t.Fatalf("a 5 s TTL: got %v, want a *verr.Error", err)
	}
	if st, _ := e.svc.Settings(e.ctx); st.ApprovalTTL != hour || st.HighSeparation != decide.SeparationOff {
		t.Errorf("after the refused patch: %+v, want it unchanged", st)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'settings.executions'`); n != 41 {
		t.Errorf("settings audit rows: got %d, want 41 (one a patch stored)", n)
	}
}
