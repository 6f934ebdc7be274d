package web

// SessionUsersKept is how many sessions-topic events s's hub has decoded and keeps
// (hub.aboutUser), for the tests (web_test).
func SessionUsersKept(s *Server) int {
	c := &s.hub.sessionUsers
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.users)
}
