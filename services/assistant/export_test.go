package assistant

import (
	"time"

	"golang.org/x/time/rate"
)

// SetModelRate sets one person's rate of model calls: a test refills slower than it
// runs, so where a burst ends does not depend on the machine's speed.
func SetModelRate(s *Service, every time.Duration, burst int) {
	s.modelRate, s.modelBurst = rate.Every(every), burst
}
