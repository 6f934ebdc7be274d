package executions_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
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

// Two saves of the same setting from forms rendered alike: the second, made without
// seeing the first, is refused as stale with what is in force now, also when both run
// at once (the check is under the lock on the settings rows); a field it changes to
// what is in force already, or one the first did not change, is not stale.
func TestPatchSettingsStale(t *testing.T) {
	t.Parallel()
	e := start(t)
	st, err := e.svc.Settings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wasTTL, wasSep := st.ApprovalTTL, st.HighSeparation
	two, three := 2*time.Hour, 3*time.Hour
	if _, err := e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{ApprovalTTL: &two, WasApprovalTTL: &wasTTL}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{ApprovalTTL: &three, WasApprovalTTL: &wasTTL})
	var se *executions.StaleSettings
	if !errors.As(err, &se) || !fault.Is(err, fault.KindStale) || !slices.Equal(se.Fields, []string{"approval_ttl"}) || se.Now.ApprovalTTL != two {
		t.Fatalf("the second save from the same form: got %v (%+v), want stale approval_ttl, now 2h", err, se)
	}
	if st, _ := e.svc.Settings(e.ctx); st.ApprovalTTL != two {
		t.Fatalf("after the refused save: TTL %s, want the first save's 2h", st.ApprovalTTL)
	}
	// The same value as the first save is no conflict, nor is another field.
	always := decide.SeparationAlways
	if _, err := e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{ApprovalTTL: &two, WasApprovalTTL: &wasTTL,
		HighSeparation: &always, WasHighSeparation: &wasSep}); err != nil {
		t.Fatalf("a save of the value in force and of another field: %v", err)
	}

	// At once: of two saves from forms rendered alike, one is stored, the other refused.
	for round := range 10 {
		cur, err := e.svc.Settings(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		was := cur.ApprovalTTL
		values := []time.Duration{time.Duration(100+2*round) * time.Minute, time.Duration(101+2*round) * time.Minute}
		errs := make([]error, len(values))
		var wg sync.WaitGroup
		for i := range values {
			wg.Go(func() {
				_, errs[i] = e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{ApprovalTTL: &values[i], WasApprovalTTL: &was})
			})
		}
		wg.Wait()
		var stored, refused int
		for _, err := range errs {
			switch {
			case err == nil:
				stored++
			case errors.As(err, &se):
				refused++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if stored != 1 || refused != 1 {
			t.Fatalf("round %d: %d stored, %d refused; want one of each", round, stored, refused)
		}
	}
}
