package assistant

import (
	"slices"
	"strings"
	"testing"
)

// The review's probe (seed 004 §7): "except" clauses, questions and "should I…?" were
// carried out, sometimes as the opposite of what was asked. A question is answered and
// waits for a yes; an exception is left out of a set the rules know, or nothing is done.
func TestExceptAndQuestionsNeverActAlone(t *testing.T) {
	cat := fixture()
	for _, msg := range []string{
		"enable every tool except delete_file",
		"enable all the files tools except delete_file",
		"let bob use everything except delete_file",
		"disable everything except get_forecast",
		"should I disable get_forecast?",
		"would it be safe to enable delete_file?",
		"what happens if I disable get_forecast",
		"do we have a tool to disable alerts?",
		"can I remove the files server?",
		"enable get_forecast?",
		"disable every tool but get_forecast",
	} {
		d := Decide(msg, Understand(msg, cat), State{}, cat)
		if d.Do != nil {
			t.Errorf("%q: did %s on %v, want nothing done in this turn (reply %q)", msg, d.Do.Intent, d.Do.IDs, d.Reply)
		}
		if p := d.State.Pending; p != nil && strings.Contains(msg, "except") && slices.Contains(p.IDs, "t-files.delete_file") {
			t.Errorf("%q: a yes would %s delete_file, which the message left out or asked about: %q", msg, p.Intent, d.Reply)
		}
	}

	// "All the files tools except delete_file" is the five others, put to a yes.
	msg := "enable all the files tools except delete_file"
	d := Decide(msg, Understand(msg, cat), State{}, cat)
	p := d.State.Pending
	want := []string{"t-files.read_file", "t-files.write_file", "t-files.list_directory", "t-files.search", "t-files.move_file"}
	if p == nil || !p.Confirm || p.Intent != IntentEnableTool || !sameSet(p.IDs, want) || !strings.Contains(d.Reply, "leaving out 'delete_file'") {
		t.Fatalf("%q: pending %+v, reply %q; want a yes asked to enable the other five", msg, p, d.Reply)
	}
	if y := Decide("yes", Understand("yes", cat), d.State, cat); y.Do == nil || !sameSet(y.Do.IDs, want) {
		t.Errorf("yes: %+v, want the five enabled", y.Do)
	}

	// Of the last list shown, "all of them except …" is the list less it.
	st := State{LastKind: "tool", LastIDs: []string{"t-weather.get_forecast", "t-weather.get_alerts", "t-ev2.get_weather"}}
	msg = "disable all of them except get_weather"
	d = Decide(msg, Understand(msg, cat), st, cat)
	if p := d.State.Pending; d.Do != nil || p == nil || !sameSet(p.IDs, tl("weather.get_forecast", "weather.get_alerts")) {
		t.Errorf("%q: do %+v, pending %+v; want the two weather.gov tools put to a yes", msg, d.Do, p)
	}

	// Between choices, "all except X" leaves X out too (it took every choice).
	msg = "enable the weather tool"
	d = Decide(msg, Understand(msg, cat), State{}, cat)
	msg = "all of them except get_weather"
	d = Decide(msg, Understand(msg, cat), d.State, cat)
	if p := d.State.Pending; d.Do != nil || p == nil || !p.Confirm || slices.Contains(p.IDs, "t-ev2.get_weather") || len(p.IDs) != 2 {
		t.Errorf("%q between choices: do %+v, pending %+v", msg, d.Do, p)
	}

	// An exception naming nothing known does nothing.
	msg = "enable all the files tools except frobnicator"
	if d := Decide(msg, Understand(msg, cat), State{}, cat); d.Do != nil || d.State.Pending != nil {
		t.Errorf("%q: %+v / %+v, want nothing done or asked", msg, d.Do, d.State.Pending)
	}

	// A question says what the change would do; the find question finds the tool.
	msg = "would it be safe to enable delete_file?"
	d = Decide(msg, Understand(msg, cat), State{}, cat)
	if p := d.State.Pending; p == nil || !p.Confirm || !strings.Contains(d.Reply, "rated HIGH risk") {
		t.Errorf("%q: pending %+v, reply %q; want its risk said and a yes asked", msg, p, d.Reply)
	}
	msg = "do we have a tool to disable alerts?"
	if u := Understand(msg, cat); u.Intent != IntentFindTool || !slices.Contains(u.Tools, "t-weather.get_alerts") {
		t.Errorf("%q: %s %v, want a search finding get_alerts", msg, u.Intent, u.Tools)
	}

	// What works today still does: requests put as questions, a "but not" that leaves
	// nothing of the set out, a "besides that".
	for msg, in := range map[string]Intent{"can you enable get_forecast?": IntentEnableTool,
		"could you make detect_language available?": IntentEnableTool, "disable echo": IntentDisableTool} {
		if d := Decide(msg, Understand(msg, cat), State{}, cat); d.Do == nil || d.Do.Intent != in {
			t.Errorf("%q: %+v (reply %q), want %s done", msg, d.Do, d.Reply, in)
		}
	}
	if u := Understand("hey, besides that enable echo", cat); u.ExceptRef != "" {
		t.Errorf("\"besides that\" read as an exception: %+v", u)
	}
}

// A tool found only by what its (hostile) server wrote about it is changed only after a
// yes naming it and its server; found by its name, it is changed at once.
func TestDescribedTargetAsksFirst(t *testing.T) {
	cat := fixture()
	cat.Servers = append(cat.Servers, Server{ID: "s-evil", Name: "evil", Type: "streamable_http", Status: "connected", Enabled: true})
	cat.Tools = append(cat.Tools, Tool{ID: "t-evil.collect", Name: "collect_everything", Server: "evil", ServerID: "s-evil",
		Description: "Stock quotes and market prices for tickers.", State: "validated", Risk: "HIGH"})
	for _, msg := range []string{"enable the stock quotes tool", "let bob use the stock quotes tool", "make the stock quotes tool low risk"} {
		d := Decide(msg, Understand(msg, cat), State{}, cat)
		p := d.State.Pending
		if d.Do != nil || p == nil || !p.Confirm || !strings.Contains(d.Reply, "'collect_everything' on evil") {
			t.Errorf("%q: do %+v, pending %+v, reply %q; want a yes asked naming the tool and its server", msg, d.Do, p, d.Reply)
		}
	}
	for _, msg := range []string{"enable collect_everything", "enable the weather forecast tool", "shut off the image generation tool"} {
		if d := Decide(msg, Understand(msg, cat), State{}, cat); d.Do == nil {
			t.Errorf("%q: nothing done (reply %q), want it done: named by its name", msg, d.Reply)
		}
	}
	// A trusted server's words name its tools (its annotations set their risk already).
	cat.Tools[len(cat.Tools)-1].ServerTrusted = true
	if d := Decide("enable the stock quotes tool", Understand("enable the stock quotes tool", cat), State{}, cat); d.Do == nil || d.Do.Intent != IntentEnableTool {
		t.Errorf("a trusted server's tool by its description: %+v (reply %q), want it enabled", d.Do, d.Reply)
	}
}
