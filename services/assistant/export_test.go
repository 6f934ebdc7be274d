package assistant

import (
	"time"

	"github.com/toolwarden/toolwarden/services/planner"
)

// SetModelRate gives the assistant a gate of its own with one person's rate of model
// calls: a test refills slower than it runs, so where a burst ends does not depend on
// the machine's speed.
func SetModelRate(s *Service, every time.Duration, burst int) {
	s.gate = planner.NewGate(&planner.GateOptions{Refill: every, Burst: burst})
}

// OnConfigRead runs f between the assistant's read of a tool's settings and its save
// (a save on the tool's page in between).
func OnConfigRead(s *Service, f func(toolID string)) { s.configRead = f }

// OnConnectWait runs f each time discovery finds a server not connected yet and waits.
func OnConnectWait(s *Service, f func(serverID string)) { s.connectWaited = f }

// OnStoredRead runs f for each tool whose stored settings a secret check reads.
func OnStoredRead(s *Service, f func(toolID string)) { s.storedRead = f }

// OnShownRead runs f between ShownOf's read of a conversation's turn and its messages.
func OnShownRead(s *Service, f func()) { s.shownRead = f }
