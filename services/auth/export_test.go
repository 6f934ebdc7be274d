package auth

import (
	"context"
	"time"
)

// ForgetTokens drops the token cache, for tests that change the database behind the
// service's back.
func (s *Service) ForgetTokens() { s.tokens.clear() }

// LimitLoginAudit gives s a budget of failed sign-in audit rows: perAddress and total
// a minute, on the clock now.
func (s *Service) LimitLoginAudit(perAddress, total int, now func() time.Time) {
	s.LimitLoginAuditQuiet(perAddress, total, now, 0)
}

// LimitLoginAuditQuiet is LimitLoginAudit whose count of failed sign-ins held back is
// written after quiet with none counting it. The budget it replaces is closed.
func (s *Service) LimitLoginAuditQuiet(perAddress, total int, now func() time.Time, quiet time.Duration) {
	_ = s.loginAudit.Close(context.Background())
	s.loginAudit = s.newLoginAuditLimit(perAddress, total, now, quiet)
}
