package builtin

// LockEditForTest holds the edit lock of path rel of workspace area, as a write in
// progress does, until the returned function is called; before is called as any
// write is about to take its locks from then on.
func LockEditForTest(s *Server, area, rel string, before func()) func() {
	unlock, err := s.lockEdit(area, rel)
	if err != nil {
		panic(err)
	}
	s.beforeEditLock = before
	return unlock
}

// SetFlockForTest has s's edit locks call flock instead of unix.Flock.
func SetFlockForTest(s *Server, flock func(fd, how int) error) {
	s.flock = flock
}
