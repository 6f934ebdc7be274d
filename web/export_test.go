package web

import "github.com/toolwarden/toolwarden/services/router"

// RunsOf exposes the test panel's runs of s to the tests (web_test), which shorten how
// long a run outlives its last watcher.
func RunsOf(s *Server) *router.Runs { return s.deps.Runs }
