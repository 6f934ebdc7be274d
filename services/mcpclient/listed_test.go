package mcpclient

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// A session's listing is hashed as ApplyDiscovery hashes what it stores: a missing or
// null input schema as {}, neither of two different definitions of one name (which one
// the server runs is its choice: the name is kept with differingHash, so that a call's
// refusal says so), one of two identical ones; and a large list hashed on several CPUs
// gives each tool its own hash.
func TestListedHashesAsStored(t *testing.T) {
	ann := json.RawMessage(`{"readOnlyHint":true}`)
	got := listedHashes([]registry.ToolDef{
		{Name: "none", Description: "d"},
		{Name: "null", InputSchema: json.RawMessage(` null `)},
		{Name: "twice", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: ann},
		{Name: "twice", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "same", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "same", InputSchema: json.RawMessage(`{"type":"object"}`)},
	})
	want := map[string]string{
		"none":  registry.DefinitionHash(registry.ToolDef{Name: "none", Description: "d", InputSchema: json.RawMessage(`{}`)}),
		"null":  registry.DefinitionHash(registry.ToolDef{Name: "null", InputSchema: json.RawMessage(`{}`)}),
		"same":  registry.DefinitionHash(registry.ToolDef{Name: "same", InputSchema: json.RawMessage(`{"type":"object"}`)}),
		"twice": differingHash,
	}
	if _, ok := got["twice"]; !ok {
		t.Error("twice: not in the listing, want it there with differingHash")
	}
	if len(got) != len(want) {
		t.Fatalf("got %d hashes, want %d: %v", len(got), len(want), got)
	}
	for name, h := range want {
		if got[name] != h {
			t.Errorf("%s: hash %s, want %s", name, got[name], h)
		}
	}

	many := make([]registry.ToolDef, 3000)
	for i := range many {
		many[i] = registry.ToolDef{Name: fmt.Sprintf("t%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	hashes := listedHashes(many)
	for _, i := range []int{0, 1, 1499, 2999} {
		if h := registry.DefinitionHash(many[i]); hashes[many[i].Name] != h {
			t.Fatalf("%s: hash %s, want %s", many[i].Name, hashes[many[i].Name], h)
		}
	}
}

// A refusal says how the session lists the tool: not at all, with another definition,
// or more than once with different definitions.
func TestDefinitionErrorSaysHowListed(t *testing.T) {
	for _, c := range []struct {
		err  DefinitionError
		want string
	}{
		{DefinitionError{Tool: "x"}, "the session does not list the tool"},
		{DefinitionError{Tool: "x", Listed: true}, "the session lists another definition of the tool than the one vetted"},
		{DefinitionError{Tool: "x", Listed: true, Differing: true}, "the session lists the tool more than once, with different definitions"},
	} {
		if got := c.err.Error(); got != "mcpclient: call x: "+c.want {
			t.Errorf("%+v: %q, want %q", c.err, got, c.want)
		}
	}
}
