package web

import (
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// RunsOf exposes the test panel's runs of s to the tests (web_test), which shorten how
// long a run outlives its last watcher.
func RunsOf(s *Server) *router.Runs { return s.deps.Runs }

// SetReplayBudget lowers what all of s's replays may hold at once (wsReplayBudget).
func SetReplayBudget(s *Server, n int64) { s.hub.replayBudget.Store(n) }

// ReplayHeld is what s's replays hold rendered and not yet sent.
func ReplayHeld(s *Server) int64 { return s.hub.replayHeld.Load() }

// SetReplayPersonShare lowers what one person's replays may hold at once
// (wsReplayPersonBytes).
func SetReplayPersonShare(s *Server, n int64) { s.hub.replayPersonShare.Store(n) }

// ReplayHeldBy is what the user's replays in s hold rendered and not yet sent.
func ReplayHeldBy(s *Server, userID string) int64 {
	s.hub.replayPersonMu.Lock()
	defer s.hub.replayPersonMu.Unlock()
	return s.hub.replayByPerson[replayKey(&auth.Principal{User: auth.User{ID: userID}})]
}

// Renders is how many event fragments s's websocket hub has rendered.
func Renders(s *Server) int64 { return s.hub.renders.Load() }

// WSSampleKeep is how many of a sampled topic's newest events a socket is sent at once.
const WSSampleKeep = wsSampleKeep
