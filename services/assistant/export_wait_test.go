package assistant

import "time"

// SetConnectWait sets how long discovery waits for servers still connecting: a test of
// the shared deadline need not take connectWait's ten seconds.
func SetConnectWait(s *Service, d time.Duration) { s.connectWait = d }
