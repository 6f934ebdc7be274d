package assistant

import "time"

// SetRefreshWait sets how long a whole refresh may take: a test of the deadline need not
// take refreshWait's minute.
func SetRefreshWait(s *Service, d time.Duration) { s.refreshWait = d }
