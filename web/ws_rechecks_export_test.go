package web

// SessionRechecks is how many times s's sockets have checked their session (a query
// each).
func SessionRechecks(s *Server) int64 { return s.hub.rechecks.Load() }
