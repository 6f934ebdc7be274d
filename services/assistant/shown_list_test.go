package assistant

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// bigCatalogue is n tools on one server, and n servers more.
func bigCatalogue(n int) *Catalogue {
	cat := &Catalogue{Servers: []Server{{ID: "s-big", Name: "big", Enabled: true, Status: "connected"}}}
	for i := range n {
		cat.Tools = append(cat.Tools, Tool{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Name: fmt.Sprintf("tool_%d", i),
			ServerID: "s-big", Server: "big", State: "enabled", Risk: "LOW", Hash: fmt.Sprintf("%064d", i)})
	}
	for i := range n {
		cat.Servers = append(cat.Servers, Server{ID: fmt.Sprintf("s-%d", i), Name: fmt.Sprintf("srv-%04d", i), Enabled: true, Status: "connected"})
	}
	return cat
}

// A number past the entries a list showed acts on nothing: "disable number 300" after a
// list of 3,000 tools that showed 25 disabled tool #300 at once, unseen and unconfirmed.
// The reply says the number was not among those shown. The list's state keeps only what
// it showed, so it stays small whatever the catalogue.
func TestPickPastShownRefused(t *testing.T) {
	t.Parallel()
	cat := bigCatalogue(3000)
	var d Decision
	var out Reply
	listTools(cat, &Op{}, &d, &out)
	if len(out.Choices) != MaxChoices {
		t.Fatalf("the list shows %d tools, want %d", len(out.Choices), MaxChoices)
	}
	b, err := json.Marshal(d.State)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 8<<10 || len(d.State.LastIDs) != MaxChoices || d.State.LastMore != 3000-MaxChoices {
		t.Errorf("after a list of 3,000 tools the state is %d bytes with %d ids (%d more), want at most 8 KB and the %d shown",
			len(b), len(d.State.LastIDs), d.State.LastMore, MaxChoices)
	}
	tools := d.State
	for _, msg := range []string{"disable number 300", "tell me about number 2999", "enable number 26", "make number 300 high risk"} {
		got := Decide(msg, Understand(msg, cat), tools, cat)
		if got.Do != nil || got.State.Pending != nil {
			t.Errorf("%q after a list that showed %d: did %+v, pending %+v; want nothing done", msg, MaxChoices, got.Do, got.State.Pending)
		}
		if !strings.Contains(got.Reply, "was not among the 25 tools shown here") {
			t.Errorf("%q: reply %q, want it to say the number was not among those shown", msg, got.Reply)
		}
	}
	// A number among those shown, and "the last one" (the last shown), still act.
	if got := Decide("disable number 25", Understand("disable number 25", cat), tools, cat); got.Do == nil || got.Do.IDs[0] != cat.Tools[24].ID {
		t.Errorf("disable number 25: %+v (%q), want tool_24 disabled", got.Do, got.Reply)
	}
	if got := Decide("disable the last one", Understand("disable the last one", cat), tools, cat); got.Do == nil || got.Do.IDs[0] != cat.Tools[24].ID {
		t.Errorf("disable the last one: %+v (%q), want the last shown (tool_24)", got.Do, got.Reply)
	}

	// The same for servers: a server past the list shown is neither removed nor asked about.
	d, out = Decision{}, Reply{}
	listServers(cat, &d, &out)
	if len(d.State.LastIDs) != MaxChoices {
		t.Fatalf("a list of %d servers keeps %d ids, want the %d shown", len(cat.Servers), len(d.State.LastIDs), MaxChoices)
	}
	for _, msg := range []string{"remove number 300", "disable number 40", "enable number 26"} {
		got := Decide(msg, Understand(msg, cat), d.State, cat)
		if got.Do != nil || got.State.Pending != nil || !strings.Contains(got.Reply, "was not among the 25 servers shown here") {
			t.Errorf("%q after a list of servers: did %+v, pending %+v, reply %q; want it refused as not shown", msg, got.Do, got.State.Pending, got.Reply)
		}
	}

	// A state saved when every entry of a list was kept is read as its first MaxChoices.
	old := State{LastKind: "tool", Seen: tools.Seen}
	for _, tl := range cat.Tools {
		old.LastIDs = append(old.LastIDs, tl.ID)
	}
	if got := Decide("disable number 300", Understand("disable number 300", cat), old, cat); got.Do != nil || got.State.Pending != nil {
		t.Errorf("disable number 300 with an older state keeping every id: did %+v, want nothing", got.Do)
	}
}

// "All of them" of a list that showed some of its entries: an enable or details take the
// ones shown and say how many were left out; another change is marked as reaching past
// them (Op.Unshown), which the Service refuses.
func TestAllOfPartlyShownList(t *testing.T) {
	t.Parallel()
	cat := bigCatalogue(100)
	var d Decision
	var out Reply
	listTools(cat, &Op{}, &d, &out)
	for _, tc := range []struct {
		msg              string
		in               Intent
		leftOut, unshown int
	}{
		{"enable all of them", IntentEnableTool, 75, 0},
		{"tell me about all of them", IntentToolDetails, 75, 0},
		{"make all of them high risk", IntentSetRisk, 0, 75},
	} {
		got := Decide(tc.msg, Understand(tc.msg, cat), d.State, cat)
		op := got.Do
		if op == nil {
			op = got.State.Pending
		}
		if op == nil || op.Intent != tc.in || len(op.IDs) != MaxChoices || op.LeftOut != tc.leftOut || op.Unshown != tc.unshown {
			t.Errorf("%q: %+v (%q), want %s of the %d shown, %d left out, %d unshown", tc.msg, op, got.Reply, tc.in, MaxChoices, tc.leftOut, tc.unshown)
		}
	}
}

// In the guided set-up, a number past the tools listed enables nothing and says so, and
// the set-up keeps only the tools it listed.
func TestSetupPickPastShown(t *testing.T) {
	t.Parallel()
	cat := bigCatalogue(3)
	ids := []string{cat.Tools[0].ID, cat.Tools[1].ID}
	st := State{Flow: &Flow{Step: StepWhichTools, ToolIDs: ids, More: 1, Seen: seenOf(cat, ids)}}
	got := Decide("1 and 3", Understand("1 and 3", cat), st, cat)
	if got.Do != nil || !strings.Contains(got.Reply, "Number 3 was not among the 2 tools shown here") {
		t.Errorf("1 and 3 of 2 tools listed: did %+v, reply %q; want nothing enabled and why", got.Do, got.Reply)
	}
	if got := Decide("all of them", Understand("all of them", cat), st, cat); got.Do == nil || len(got.Do.IDs) != 2 || got.Do.LeftOut != 1 {
		t.Errorf("all of them: %+v (%q), want the 2 listed and 1 left out", got.Do, got.Reply)
	}
}
