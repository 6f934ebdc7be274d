package assistant

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// turn is one message of a conversation and what must come of it.
type turn struct {
	msg     string
	reply   string   // a part of the reply ("" when something is done)
	choices int      // how many choices are offered
	do      Intent   // the op decided ("" for none)
	ids     []string // what it acts on
}

// converse plays turns in one conversation; an op decided is taken as done (its state
// changes are the Service's, which these tests do not need).
func converse(t *testing.T, st State, turns []turn) State {
	t.Helper()
	cat := fixture()
	for i, tn := range turns {
		d := Decide(tn.msg, Understand(tn.msg, cat), st, cat)
		st = d.State
		got := Intent("")
		var ids []string
		if d.Do != nil {
			got, ids = d.Do.Intent, d.Do.IDs
		}
		if got != tn.do || tn.ids != nil && !slices.Equal(ids, tn.ids) {
			t.Fatalf("turn %d %q: did %q on %v, want %q on %v (reply %q)", i, tn.msg, got, ids, tn.do, tn.ids, d.Reply)
		}
		if !strings.Contains(d.Reply, tn.reply) || len(d.Choices) != tn.choices {
			t.Fatalf("turn %d %q: reply %q with %d choices, want %q with %d", i, tn.msg, d.Reply, len(d.Choices), tn.reply, tn.choices)
		}
	}
	return st
}

func TestDecideChoices(t *testing.T) {
	t.Parallel()
	// Two tools named search: nothing happens until the person picks, by server or number.
	converse(t, State{}, []turn{
		{msg: "disable search", reply: "Did you mean", choices: 2},
		{msg: "the one on files", do: IntentDisableTool, ids: []string{"t-files.search"}},
	})
	converse(t, State{}, []turn{
		{msg: "turn off the search tool", reply: "Did you mean", choices: 2},
		{msg: "2", do: IntentDisableTool, ids: []string{"t-files.search"}},
	})
	converse(t, State{}, []turn{
		{msg: "Disable the weather tool", reply: "I found 3 tools", choices: 3},
		{msg: "The second one", do: IntentDisableTool},
	})
	// A choice out of range asks again; "never mind" drops it.
	st := converse(t, State{}, []turn{
		{msg: "disable search", reply: "Did you mean", choices: 2},
		{msg: "7", reply: "Please pick one of the 2", choices: 2},
		{msg: "never mind", reply: "Nothing was changed"},
	})
	if st.Pending != nil {
		t.Fatalf("a cancelled choice stays pending: %+v", st.Pending)
	}
	converse(t, State{}, []turn{{msg: "2", reply: "haven't asked anything"}})
}

func TestDecideContext(t *testing.T) {
	t.Parallel()
	listed := State{LastKind: "tool", LastIDs: []string{"t-weather.get_forecast", "t-weather.get_alerts", "t-ev2.get_weather"}}
	converse(t, listed, []turn{{msg: "enable the second one", do: IntentEnableTool, ids: []string{"t-weather.get_alerts"}}})
	converse(t, listed, []turn{{msg: "Enable the first one", do: IntentEnableTool, ids: []string{"t-weather.get_forecast"}}})
	// Many at once is confirmed first.
	converse(t, listed, []turn{
		{msg: "disable all of them", reply: "Disable 3 tools", choices: 2},
		{msg: "yes", do: IntentDisableTool, ids: listed.LastIDs},
	})
	servers := State{LastKind: "server", LastIDs: []string{"s-weather", "s-ev2"}}
	converse(t, servers, []turn{{msg: "enable the last one", do: IntentEnableServer, ids: []string{"s-ev2"}}})
	converse(t, State{}, []turn{{msg: "enable the first one", reply: "haven't shown a list"}})
}

func TestDecideConfirmsAndErrors(t *testing.T) {
	t.Parallel()
	converse(t, State{}, []turn{
		{msg: "remove the ev2 server", reply: "cannot be undone", choices: 2},
		{msg: "no", reply: "nothing was changed"},
	})
	converse(t, State{}, []turn{
		{msg: "delete ev2", reply: "cannot be undone", choices: 2},
		{msg: "yes", do: IntentRemoveServer, ids: []string{"s-ev2"}},
	})
	converse(t, State{}, []turn{
		{msg: "stop bob from using get_forecast", reply: "Stop bob from using", choices: 2},
		{msg: "yes please", do: IntentRevoke},
	})
	// Seed 004's invalid-URL reply, with an example.
	converse(t, State{}, []turn{{msg: "Add a server at invalid-url", reply: "doesn't appear to be valid. URLs should start with http:// or https://"}})
	// Something not found: say so, and offer the list.
	converse(t, State{}, []turn{
		{msg: "enable stock_ticker", reply: "couldn't find a tool named \"stock_ticker\"", choices: 2},
		{msg: "yes", do: IntentListTools},
	})
	converse(t, State{}, []turn{{msg: "set the risk of get_forecast", reply: "Which risk level"}})
	converse(t, State{}, []turn{{msg: "order me a pizza", reply: "I didn't understand"}})
	// A name given when adding is kept; without one, the host names the server.
	converse(t, State{}, []turn{{msg: "add a new MCP server at https://api.stocks.example.com/mcp", do: IntentAddServer}})
	d := Decide("x", Understand("add a new MCP server at https://api.stocks.example.com/mcp", fixture()), State{}, fixture())
	if d.Do == nil || d.Do.Name != "stocks" || d.Do.URL != "https://api.stocks.example.com/mcp" {
		t.Fatalf("add without a name: %+v", d.Do)
	}
}

// Seed 004's guided workflow: set up a new tool → add a server → URL → name → add.
func TestDecideGuidedSetup(t *testing.T) {
	t.Parallel()
	st := converse(t, State{}, []turn{
		{msg: "I want to set up a new tool", reply: "Do you already have an MCP server", choices: 2},
		{msg: "I need to add one", reply: "URL of the MCP server"},
		{msg: "example dot com", reply: "doesn't appear to be valid"},
		{msg: "https://example.com/mcp", reply: "What would you like to name this server?", choices: 1},
		{msg: "Example API", do: IntentAddServer},
	})
	if st.Flow == nil || st.Flow.URL != "https://example.com/mcp" || st.Flow.Name != "Example API" {
		t.Fatalf("the flow forgot what it was told: %+v", st.Flow)
	}
	// After discovery (the Service lists the tools and keeps them on the flow), "1 and 3"
	// enables those; an older list the conversation showed is not what they pick from.
	st.Flow.Step, st.Flow.ToolIDs = StepWhichTools, []string{"a", "b", "c"}
	st.LastKind, st.LastIDs = "tool", []string{"x", "y", "z"}
	converse(t, st, []turn{{msg: "1 and 3", do: IntentEnableTool, ids: []string{"a", "c"}}})
	converse(t, st, []turn{{msg: "all of them", do: IntentEnableTool, ids: []string{"a", "b", "c"}}})
	// A refusal or an exception is never "all": the question is asked again.
	for _, msg := range []string{"don't enable all of them", "no, not all of them", "all but 3", "all of them except 2", "disable all of them"} {
		if d := Decide(msg, Understand(msg, fixture()), st, fixture()); d.Do != nil && d.Do.Intent == IntentEnableTool {
			t.Errorf("%q enabled %v", msg, d.Do.IDs)
		}
	}
	converse(t, st, []turn{{msg: "no, not all of them", reply: "Which ones?"}})
	// An existing server: its tools are discovered.
	converse(t, State{}, []turn{
		{msg: "help me set up a new tool", reply: "Do you already have", choices: 2},
		{msg: "I already have one", reply: "Which server?", choices: 5},
		{msg: "ev2", do: IntentDiscover, ids: []string{"s-ev2"}},
	})
	// Progressive disclosure: how do I add a server → guide me? → yes.
	st = converse(t, State{}, []turn{
		{msg: "How do I add a server?", reply: "Would you like me to guide you", choices: 2},
		{msg: "yes please", do: IntentSetup},
	})
	_ = st
}

// A name that is both a server's and a tool's (no "server" or "tool" said): the choice
// says which, and the op follows the pick's kind.
func TestDecideServerOrTool(t *testing.T) {
	t.Parallel()
	cat := fixture()
	cat.Tools = append(cat.Tools, Tool{ID: "t-ev2.translation", Name: "translation", Server: "ev2", ServerID: "s-ev2",
		Description: "Translate a charging station's name", State: "enabled", Risk: "LOW"})
	d := Decide("disable translation", Understand("disable translation", cat), State{}, cat)
	if d.Do != nil || len(d.Choices) != 2 || !strings.Contains(d.Reply, "servers and tools") {
		t.Fatalf("both kinds: %+v", d)
	}
	for pick, want := range map[string]Intent{"1": IntentDisableServer, "2": IntentDisableTool} {
		d2 := Decide(pick, Understand(pick, cat), d.State, cat)
		if d2.Do == nil || d2.Do.Intent != want {
			t.Fatalf("pick %s: %+v, want %s", pick, d2.Do, want)
		}
	}
}

// Review findings: a sentence holding a digit is not a choice of tools; yes to "do you
// already have a server?" picks one of them; "all of them" between a server and tools
// is refused rather than applied to the wrong kind.
func TestDecideReviewed(t *testing.T) {
	t.Parallel()
	which := State{Flow: &Flow{Step: StepWhichTools}, LastKind: "tool", LastIDs: []string{"a", "b", "c"}}
	for _, msg := range []string{"add a new MCP server at https://ev1.example.com:8443/mcp", "what does number 2 do?"} {
		d := Decide(msg, Understand(msg, fixture()), which, fixture())
		if d.Do != nil && d.Do.Intent == IntentEnableTool {
			t.Errorf("%q enabled tools %v", msg, d.Do.IDs)
		}
	}
	converse(t, State{}, []turn{
		{msg: "I want to set up a new tool", reply: "Do you already have", choices: 2},
		{msg: "yes", reply: "Which server?", choices: 5},
	})
	converse(t, State{}, []turn{
		{msg: "I want to set up a new tool", reply: "Do you already have", choices: 2},
		{msg: "no", reply: "URL of the MCP server"},
	})
	cat := fixture()
	cat.Tools = append(cat.Tools, Tool{ID: "t-ev2.translation", Name: "translation", Server: "ev2", ServerID: "s-ev2", State: "enabled"})
	d := Decide("disable translation", Understand("disable translation", cat), State{}, cat)
	d = Decide("all of them", Understand("all of them", cat), d.State, cat)
	if d.Do != nil || !strings.Contains(d.Reply, "cannot be changed as one") {
		t.Fatalf("all of a server and a tool: %+v", d)
	}
}

// The acts of a guided set-up are audited with the whole exchange, not its last answer.
func TestDecideSetupSaid(t *testing.T) {
	t.Parallel()
	cat := fixture()
	st := State{}
	var last Decision
	for _, msg := range []string{"I want to set up a new tool", "I need to add one", "https://example.com/mcp", "Example API"} {
		last = Decide(msg, Understand(msg, cat), st, cat)
		st = last.State
	}
	want := "I want to set up a new tool → I need to add one → https://example.com/mcp → Example API"
	if last.Do == nil || last.Do.Sentence != want {
		t.Fatalf("the add's sentence: %+v, want %q", last.Do, want)
	}
}

// An ambiguous name is answered with numbered choices, one per tool it fits, each
// labelled with its number, name, server and description and answered by its number;
// the reply says how many there are and nothing is done until a pick.
func TestDecideChoiceLabels(t *testing.T) {
	t.Parallel()
	cat := fixture()
	for _, c := range []struct {
		msg, reply string
		labels     []string
	}{
		{"disable search", `I found 2 tools that match "search". Did you mean:`, []string{
			"1. search on ev2 — Search charging stations near a place by connector type.",
			"2. search on files — Search file contents in the workspace for a text pattern.",
		}},
		{"Disable the weather tool", `I found 3 tools that match "weather". Did you mean:`, []string{
			"1. get_forecast on weather — Get the weather forecast for a location for the next few days (weather.gov).",
			"2. get_alerts on weather — Active weather alerts (storms, floods, heat) for a US state.",
			// A description is clipped at 80 characters.
			"3. get_weather on ev2 — Current weather conditions (temperature, wind, rain) at a place, from OpenWeath…",
		}},
	} {
		d := Decide(c.msg, Understand(c.msg, cat), State{}, cat)
		if d.Do != nil || d.State.Pending == nil || !d.State.Pending.Choose {
			t.Errorf("%q: decided %+v before a pick", c.msg, d.Do)
		}
		if d.Reply != c.reply {
			t.Errorf("%q: reply %q, want %q", c.msg, d.Reply, c.reply)
		}
		var labels, targets []string
		for _, ch := range d.Choices {
			labels, targets = append(labels, ch.Label), append(targets, ch.Target)
		}
		if !slices.Equal(labels, c.labels) {
			t.Errorf("%q: %d choices\n%s\nwant %d\n%s", c.msg, len(labels), strings.Join(labels, "\n"), len(c.labels), strings.Join(c.labels, "\n"))
		}
		for i, tg := range targets {
			if tg != strconv.Itoa(i+1) {
				t.Errorf("%q: choice %d answers %q, want its number", c.msg, i+1, tg)
			}
		}
	}
}

// A synonym sets an enum value only on a parameter about what the word is about.
func TestEnumValueSynonymsStayOnTopic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p          Param
		word, want string
	}{
		{Param{Name: "units", Enum: []string{"metric", "imperial"}}, "Celsius", "metric"},
		{Param{Name: "scale", Description: "Temperature scale", Enum: []string{"c", "f"}}, "fahrenheit", "f"},
		{Param{Name: "register", Enum: []string{"formal", "informal"}}, "polite", "formal"},
		{Param{Name: "verbosity", Enum: []string{"less", "more"}}, "polite", ""},
		{Param{Name: "language", Enum: []string{"c", "go"}}, "celsius", ""},
		{Param{Name: "region", Enum: []string{"us", "eu"}}, "miles", ""},
		{Param{Name: "language", Enum: []string{"c", "go"}}, "Go", "go"}, // the value itself, anywhere
	} {
		got, ok := enumValue(tc.p, tc.word)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s on %s %v: got %q %v, want %q", tc.word, tc.p.Name, tc.p.Enum, got, ok, tc.want)
		}
	}
}

// TestListsSayTheirCount: a list of one reads as one ("There is one MCP server", with
// hints that exist), not as "the 1 MCP servers … the second one".
func TestListsSayTheirCount(t *testing.T) {
	t.Parallel()
	cat := fixture()
	var d Decision
	var out Reply
	listServers(cat, &d, &out)
	if want := "Here are the " + strconv.Itoa(len(cat.Servers)) + " MCP servers:"; !strings.HasPrefix(out.Reply, want) || !strings.Contains(out.Reply, "the second one") {
		t.Errorf("several servers: %q", out.Reply)
	}
	one := &Catalogue{Servers: cat.Servers[:1]}
	d, out = Decision{}, Reply{}
	listServers(one, &d, &out)
	if !strings.HasPrefix(out.Reply, "There is one MCP server:") || strings.Contains(out.Reply, "second") || len(out.Choices) != 1 {
		t.Errorf("one server: %q with %d choices", out.Reply, len(out.Choices))
	}
	d, out = Decision{}, Reply{}
	listTools(&Catalogue{Servers: cat.Servers, Tools: cat.Tools[:1]}, &Op{}, &d, &out)
	if !strings.HasPrefix(out.Reply, "There is one tool:") {
		t.Errorf("one tool: %q", out.Reply)
	}
}

// A setting of a parameter that holds secrets, by its name or its schema's format, is
// found however harmless the words look, and its value is masked in what is kept.
func TestSecretSettings(t *testing.T) {
	t.Parallel()
	cat := fixture()
	cat.Tools = append(cat.Tools, Tool{ID: "t-weather.db_query", Name: "db_query", Server: "weather", ServerID: "s-weather", State: "enabled",
		Params: []Param{{Name: "password", Type: "string"}, {Name: "dsn", Type: "string", Secret: true}, {Name: "limit", Type: "string"}}})
	for msg, want := range map[string]bool{
		"set password to Hunter2pass for db_query": true,
		"set dsn to s3cr3tvalue for db_query":      true,
		"set limit to 10 for db_query":             false,
	} {
		u := Understand(msg, cat)
		if got := secretSettings(u, cat); got != want {
			t.Errorf("%q (%+v): secret %v, want %v", msg, u.Settings, got, want)
		}
	}
	if got := maskValues("set password to Hunter2pass for db_query", map[string]string{"password": "hunter2pass"}); got != "set password to *** for db_query" {
		t.Errorf("masked: %q", got)
	}
}

// A value is set as written: its case kept, a URL whole (the text is matched in lower
// case with the URL stood in by a marker).
func TestSettingValuesAsWritten(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"set location to London for get_forecast":                        "London",
		"configure get_forecast with location=https://Geo.example.com/X": "https://Geo.example.com/X",
		`set location to "New York" for get_forecast`:                    "New York",
	} {
		if u := Understand(msg, fixture()); u.Settings["location"] != want {
			t.Errorf("%q: settings %v, want location %q", msg, u.Settings, want)
		}
	}
}

// Every choice's message reads back as its number, past the tenth too.
func TestPickTargetsReadBack(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 30; n++ {
		for _, prefix := range []string{"tell me about", "what's the status of"} {
			if msg := pickTarget(prefix, n); Understand(msg, fixture()).Pick != n {
				t.Errorf("%q reads as pick %d, want %d", msg, Understand(msg, fixture()).Pick, n)
			}
		}
	}
}

// A name that fits many tools gets at most MaxChoices choices, and the reply says so.
func TestChoicesBounded(t *testing.T) {
	t.Parallel()
	cat := fixture()
	for i := range MaxChoices + 15 {
		name := fmt.Sprintf("export_%02d", i)
		cat.Tools = append(cat.Tools, Tool{ID: "t-weather." + name, Name: name, Server: "weather", ServerID: "s-weather", State: "enabled",
			Description: "Export data"})
	}
	msg := "disable export"
	d := Decide(msg, Understand(msg, cat), State{}, cat)
	if len(d.Choices) != MaxChoices || len(d.State.LastIDs) != MaxChoices || !strings.Contains(d.Reply, fmt.Sprintf("here are the first %d", MaxChoices)) {
		t.Fatalf("%d choices, %d ids: %s", len(d.Choices), len(d.State.LastIDs), d.Reply)
	}
}

// Characters whose lower case has another length (İ, Ⱥ) move no value: it is read
// whole, in its own case, and nothing panics.
func TestValuesBesideWideCharacters(t *testing.T) {
	t.Parallel()
	cat := fixture()
	cat.Tools = append(cat.Tools, Tool{ID: "t-weather.db_query", Name: "db_query", Server: "weather", ServerID: "s-weather", State: "enabled",
		Params: []Param{{Name: "password", Type: "string", Secret: true}}})
	for msg, want := range map[string][2]string{
		"İİİİİİİİİİİİ set password to Hunter2pass for db_query": {"password", "Hunter2pass"},
		"Ⱥ set location to London for get_forecast":             {"location", "London"},
	} {
		u := Understand(msg, cat)
		if got := u.Settings[want[0]]; got != want[1] {
			t.Errorf("%q: %s = %q, want %q", msg, want[0], got, want[1])
		}
	}
	said := maskValues("İİ set password to Hunter2pass for db_query", map[string]string{"password": "Hunter2pass"})
	if strings.Contains(said, "Hunter2pass") {
		t.Errorf("kept: %q", said)
	}
}

// Enum values are read from the first maxSettingWords words only: each word is tried
// against every parameter of every tool, and a long message made that seconds of work.
func TestSettingWordsBounded(t *testing.T) {
	t.Parallel()
	short := "configure get_forecast imperial"
	if u := Understand(short, fixture()); u.Settings["units"] != "imperial" {
		t.Fatalf("%q: %v", short, u.Settings)
	}
	long := "configure get_forecast " + strings.Repeat("please ", maxSettingWords) + "imperial"
	if u := Understand(long, fixture()); u.Settings["units"] != "" {
		t.Fatalf("a word past the bound was read: %v", u.Settings)
	}
}

// A message that names something the catalogue does not have is not about the last
// list: "enable all tools on ev3" (ev2 meant) or "disable the first jira tool" after a
// list act on nothing, and say what was not found. A list's entries are still reached
// by position alone.
func TestDecideNamedTargetNotFromList(t *testing.T) {
	t.Parallel()
	listed := State{LastKind: "tool", LastIDs: []string{"t-weather.get_forecast", "t-weather.get_alerts", "t-ev2.get_weather"}}
	converse(t, listed, []turn{{msg: "enable all tools on ev3", reply: `couldn't find a tool named "ev3"`, choices: 2}})
	converse(t, listed, []turn{{msg: "disable the first jira tool", reply: `couldn't find a tool named "jira"`, choices: 2}})
	converse(t, listed, []turn{{msg: "disable all jira tools", reply: `couldn't find a tool named "jira"`, choices: 2}})
	converse(t, listed, []turn{{msg: "disable the third one", do: IntentDisableTool, ids: []string{"t-ev2.get_weather"}}})
	converse(t, listed, []turn{{msg: "disable the 2nd one", do: IntentDisableTool, ids: []string{"t-weather.get_alerts"}}})
	many := State{LastKind: "tool", LastIDs: strings.Fields("a b c d e f g h i j k l")}
	converse(t, many, []turn{{msg: "enable the sixth one", do: IntentEnableTool, ids: []string{"f"}}})
	converse(t, many, []turn{{msg: "tell me about number 11", do: IntentToolDetails, ids: []string{"k"}}})
}

// A negation before the verb is not that request: "please don't disable search on
// ev2" disables nothing, and says so; an open question is not answered by it either.
func TestDecideNegated(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{"please don't disable search on ev2", "do not remove the ev2 server", "don't turn off get_forecast",
		"I don't want you to enable book_charger", "never delete the files server", "don't ever let bob use get_forecast"} {
		converse(t, State{}, []turn{{msg: msg, reply: "so I did nothing"}})
	}
	st := converse(t, State{}, []turn{
		{msg: "remove the ev2 server", reply: "cannot be undone", choices: 2},
		{msg: "don't remove it", reply: "You said not to remove it"},
	})
	if st.Pending != nil {
		t.Fatalf("the question stays open after \"don't\": %+v", st.Pending)
	}
	converse(t, State{}, []turn{{msg: "disable search on ev2", do: IntentDisableTool, ids: []string{"t-ev2.search"}}})
	converse(t, State{}, []turn{{msg: "is ev2 not connected?", do: IntentServerStatus}})
	converse(t, State{}, []turn{{msg: "don't let bob use get_forecast", reply: "Stop bob from using", choices: 2}})
}

// A pick among the tools a language model's reading named is still the model's
// reading: the person is asked before it is done, and the act is audited as read by
// the model.
func TestDecideModelPickAsksFirst(t *testing.T) {
	t.Parallel()
	st := State{Pending: &Op{Intent: IntentDisableTool, Kind: "tool", IDs: searchTools, Choose: true, ByModel: true,
		Sentence: "that finder thing, put it to sleep"}}
	st = converse(t, st, []turn{{msg: "2", reply: "Shall I do that?", choices: 2}})
	if st.Pending == nil || !st.Pending.Confirm || !st.Pending.ByModel || !slices.Equal(st.Pending.IDs, searchTools[1:]) {
		t.Fatalf("after the pick: %+v", st.Pending)
	}
	d := Decide("yes", Understand("yes", fixture()), st, fixture())
	if d.Do == nil || !d.Do.ByModel || d.Do.Intent != IntentDisableTool {
		t.Fatalf("the yes: %+v", d.Do)
	}
}

// What the reply quotes of the message is masked like the message itself.
func TestDecideQuotesMasked(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-9f8e7d6c5b4a3f2e1d0c9b8a"
	cat := fixture()
	for _, msg := range []string{"disable " + secret, "do we have a tool for " + secret} {
		said, _ := redact(msg)
		if d := Decide(said, Understand(msg, cat), State{}, cat); strings.Contains(d.Reply, secret) || !strings.Contains(d.Reply, "***") {
			t.Errorf("%q: reply %q", msg, d.Reply)
		}
	}
}

// A server name one letter off several servers is not taken for the first of them:
// the reply asks which, each choice the message again with that server's name.
func TestDecideNearServers(t *testing.T) {
	t.Parallel()
	cat := fixture()
	for _, n := range []string{"prod-1", "prod-2"} {
		cat.Servers = append(cat.Servers, Server{ID: "s-" + n, Name: n, Status: "connected", Enabled: true})
		cat.Tools = append(cat.Tools, Tool{ID: "t-" + n + ".lookup", Name: "lookup", Server: n, ServerID: "s-" + n, State: "enabled"})
	}
	for _, msg := range []string{"disable lookup on prod-3", "disable all tools on prod-3", "what tools does prod-3 have"} {
		d := Decide(msg, Understand(msg, cat), State{}, cat)
		if d.Do != nil || d.State.Pending != nil || len(d.Choices) != 2 || !strings.Contains(d.Reply, "prod-1, prod-2") {
			t.Fatalf("%q: did %+v, reply %q, choices %+v", msg, d.Do, d.Reply, d.Choices)
		}
		if want := strings.Replace(msg, "prod-3", "prod-2", 1); d.Choices[1].Target != want {
			t.Fatalf("%q: the second choice sends %q, want %q", msg, d.Choices[1].Target, want)
		}
	}
	msg := "disable lookup on prod-2"
	if d := Decide(msg, Understand(msg, cat), State{}, cat); d.Do == nil || !slices.Equal(d.Do.IDs, []string{"t-prod-2.lookup"}) {
		t.Fatalf("%q: %+v", msg, d.Do)
	}
	// One server a letter off is that server.
	msg = "disable lookup on prod-2x"
	if d := Decide(msg, Understand(msg, cat), State{}, cat); d.Do == nil || !slices.Equal(d.Do.IDs, []string{"t-prod-2.lookup"}) {
		t.Fatalf("%q: %+v (%s)", msg, d.Do, d.Reply)
	}
}

// At "what would you like to name this server?", a no stops the set-up and a yes or a
// pick asks again: neither is the server's name.
func TestDecideSetupNameNotAnAnswer(t *testing.T) {
	t.Parallel()
	start := []turn{
		{msg: "I want to set up a new tool", reply: "Do you already have an MCP server", choices: 2},
		{msg: "I need to add one", reply: "URL of the MCP server"},
		{msg: "https://example.com/mcp", reply: "What would you like to name this server?", choices: 1},
	}
	st := converse(t, State{}, append(start, turn{msg: "no", reply: "Nothing was added"}))
	if st.Flow != nil {
		t.Fatalf("the set-up goes on after no: %+v", st.Flow)
	}
	converse(t, State{}, append(start,
		turn{msg: "yes", reply: "What would you like to name this server?", choices: 1},
		turn{msg: "the second one", reply: "What would you like to name this server?", choices: 1},
		turn{msg: "Example API", do: IntentAddServer}))
}

// BenchmarkUnderstandLongConfigure reads a configure message of 1,000 words against a
// catalogue of 10,000 tools: the parameter names are collected once per message, so
// its cost grows with the words and the catalogue, not their product (speed is measured
// here, not asserted in a test).
func BenchmarkUnderstandLongConfigure(b *testing.B) {
	cat := fixture()
	for i := range 10000 {
		cat.Tools = append(cat.Tools, Tool{ID: fmt.Sprint("x", i), Name: fmt.Sprintf("tool_number_%d", i), Server: "ev2", ServerID: "s-ev2",
			Params: []Param{{Name: fmt.Sprintf("zqparam%da", i)}, {Name: fmt.Sprintf("zqparam%db", i)}, {Name: fmt.Sprintf("zqparam%dc", i)}}})
	}
	msg := "configure get_forecast with units=metric" + strings.Repeat(" zqparam", 1000)
	for b.Loop() {
		if u := Understand(msg, cat); u.Settings["units"] != "metric" {
			b.Fatalf("settings: %v", u.Settings)
		}
	}
}
