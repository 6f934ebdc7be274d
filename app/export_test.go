package app

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/handlers"
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
