package registry_test

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestTopicsAgree: the tools package repeats the registry's topic names (it cannot
// import the registry) to keep its facets current.
func TestTopicsAgree(t *testing.T) {
	if tools.ServersTopic != registry.ServersTopic || tools.Topic != registry.ToolsTopic {
		t.Fatalf("tools watches %q and %q, the registry publishes on %q and %q",
			tools.ServersTopic, tools.Topic, registry.ServersTopic, registry.ToolsTopic)
	}
}
