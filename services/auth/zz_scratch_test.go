package auth_test

import (
	"sync"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

func TestScratchDeadlock(t *testing.T) {
	f := newFixture(t, nil)
	a := f.createUser("a", auth.RoleAdmin)
	b := f.createUser("b", auth.RoleAdmin)
	counts := map[string]int{}
	for range 200 {
		f.exec(`UPDATE users SET role = 'admin'`)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for j, u := range []auth.User{a, b} {
			wg.Go(func() { <-start; _, errs[j] = f.svc.SetRole(f.ctx, audit.System, u.ID, auth.RoleGuest) })
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err == nil {
				counts["ok"]++
			} else {
				counts[err.Error()]++
			}
		}
		if n := f.count(`SELECT count(*) FROM users WHERE role='admin'`); n != 1 {
			t.Errorf("admins left %d", n)
		}
	}
	t.Logf("%v", counts)
}
