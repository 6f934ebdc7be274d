package app

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/router"
)

// RemoteRuns is the App's client of the test runs other replicas hold, its watches
// taken as held after held and asked again after retry until the test ends.
func (a *App) RemoteRuns(t testing.TB, held, retry time.Duration) handlers.RemoteRuns {
	h, r := watchHeld, watchRetry
	watchHeld, watchRetry = held, retry
	t.Cleanup(func() { watchHeld, watchRetry = h, r })
	return remoteRuns{a}
}

// AddComponent appends c to the components, so it starts last and stops first.
func (a *App) AddComponent(c Component) { a.components = append(a.components, c) }

// TestRuns is the App's registry of the test panel's runs.
func (a *App) TestRuns() *router.Runs { return a.runs }

// StopBeats closes the heartbeats' own connections, as a database that no longer takes
// them would: the beats fail while the rest of the App's connections work.
func (a *App) StopBeats() { a.beats.Close() }

// RestartAfter sets the pause before a component that panicked runs again, until the
// test ends.
func RestartAfter(t testing.TB, d time.Duration) {
	first, most := restartFirst, restartMax
	restartFirst, restartMax = d, 4*d
	t.Cleanup(func() { restartFirst, restartMax = first, most })
}
