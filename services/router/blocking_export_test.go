package router

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TripBreaker fails calls through server serverID's call circuit until it opens, as a
// server failing them would.
func TripBreaker(r *Router, serverID, server string) {
	cb := r.breaker(serverID, server).cb
	for range r.opts.BreakerFailures {
		_, _ = cb.Execute(func() (*mcp.CallToolResult, error) { return nil, errors.New("the server failed") })
	}
}
