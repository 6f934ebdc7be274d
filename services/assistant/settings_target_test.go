package assistant

import (
	"fmt"
	"maps"
	"testing"
)

// A setting is read from the target tool's parameters only: another tool whose enum has
// the word (a server may list it on purpose) neither adds a parameter the target lacks
// nor changes the value's spelling.
func TestSettingsOnlyOfTheTargetTool(t *testing.T) {
	t.Parallel()
	cat := fixture()
	hostile := Tool{ID: "t-files.render", Name: "render", Server: "files", ServerID: "s-files", State: "enabled", Risk: "LOW",
		Params: []Param{{Name: "mode", Type: "string", Enum: []string{"metric"}},
			{Name: "units", Type: "string", Description: "unit system", Enum: []string{"METRIC", "si"}}}}
	cat.Tools = append([]Tool{hostile}, cat.Tools...)
	want := map[string]string{"units": "metric"}
	for _, msg := range []string{"Configure get_forecast to use metric units", "Configure get_forecast to use Celsius"} {
		u := Understand(msg, cat)
		if !maps.Equal(u.Settings, want) {
			t.Errorf("%q: understood settings %v, want %v", msg, u.Settings, want)
		}
		d := Decide(msg, u, State{}, cat)
		if d.Do == nil || !maps.Equal(d.Do.Settings, want) {
			t.Errorf("%q: did %+v (reply %q), want settings %v", msg, d.Do, d.Reply, want)
		}
	}
	// The last list's tool, named by its place: only its parameters.
	st := State{LastKind: "tool", LastIDs: []string{"t-weather.get_forecast"}}
	msg := "configure the first one to use metric units"
	if d := Decide(msg, Understand(msg, cat), st, cat); d.Do == nil || !maps.Equal(d.Do.Settings, want) {
		t.Errorf("%q: did %+v (reply %q), want settings %v", msg, d.Do, d.Reply, want)
	}
	// A model's proposal is narrowed the same way.
	mu := Understanding{Intent: IntentConfigureTool, Kind: "tool", Ref: "get_forecast", Tools: []string{"t-weather.get_forecast"},
		Settings: map[string]string{"mode": "metric", "units": "metric"}}
	if d := Decide("make the forecast metric", mu, State{}, cat); d.Do == nil || !maps.Equal(d.Do.Settings, want) {
		t.Errorf("a model's settings: did %+v (reply %q), want settings %v", d.Do, d.Reply, want)
	}
}

// Reading a message that matches 10,000 tools, and checking its settings for secrets,
// looks each tool up once, not by a scan of the catalogue per tool. Not parallel: the
// count is the package's.
func TestLookupsLinear(t *testing.T) {
	const n = 10000
	cat := &Catalogue{}
	for i := range n {
		cat.Tools = append(cat.Tools, Tool{ID: fmt.Sprintf("t-w.widget_%05d", i), Name: fmt.Sprintf("widget_%05d", i), Server: "w", ServerID: "s-w",
			State: "enabled", Risk: "LOW", Params: []Param{{Name: "units", Type: "string", Enum: []string{"metric", "imperial"}}}})
	}
	toolLookups.Store(0)
	for _, msg := range []string{"disable widgets", "configure widgets with units=metric", "configure widgets to use metric"} {
		u := Understand(msg, cat)
		if len(u.Tools) != n {
			t.Fatalf("%q: %d tools, want %d", msg, len(u.Tools), n)
		}
		_ = secretSettings(u, cat)
		Decide(msg, u, State{}, cat)
	}
	if got := toolLookups.Load(); got > 10*n {
		t.Errorf("three messages matching %d tools visited %d catalogue entries to look tools up, want at most %d", n, got, 10*n)
	}
}
