package auth

import "time"

// ForgetTokens drops the token cache, for tests that change the database behind the
// service's back.
func (s *Service) ForgetTokens() { s.tokens.clear() }

// LimitLoginAudit gives s a budget of failed sign-in audit rows: perAddress and total
// a minute, on the clock now.
func (s *Service) LimitLoginAudit(perAddress, total int, now func() time.Time) {
	s.loginAudit = newLoginAuditLimit(s.log, perAddress, total, now)
}
