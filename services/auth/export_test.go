package auth

// ForgetTokens drops the token cache, for tests that change the database behind the
// service's back.
func (s *Service) ForgetTokens() { s.tokens.clear() }
