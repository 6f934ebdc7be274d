package assistant

import (
	"strings"
	"testing"
)

// heldOutRows are phrasings written apart from the table, in other words: paraphrases,
// longer and informal sentences, other word orders. They measure how well the
// understanding generalises, so they are NOT to be tuned to: do not change the engine
// for one of these rows, and do not change a row to fit the engine. When the engine
// improves, the score goes up by itself; when a row turns out to be wrong about the
// language (not about the engine), fix the row and say so in the commit.
var heldOutRows = []phrasing{
	// Servers.
	{msg: "hey, could you hook us up to the MCP server living at https://mcp.partner.example/api? call it Partner Tools",
		intent: IntentAddServer, url: "https://mcp.partner.example/api", name: "Partner Tools"},
	{msg: "we got a new MCP endpoint: https://tools.internal.example.com/mcp - please add it", intent: IntentAddServer,
		url: "https://tools.internal.example.com/mcp"},
	{msg: "I'd like to register https://search.example.io/mcp under the name Search Hub", intent: IntentAddServer,
		url: "https://search.example.io/mcp", name: "Search Hub"},
	{msg: "plug in the server over at http://10.0.0.7:3000/mcp for me", intent: IntentAddServer,
		url: "http://10.0.0.7:3000/mcp"},
	{msg: "the image-gen server isn't needed any more, please delete it", intent: IntentRemoveServer,
		servers: sv("image-gen")},
	{msg: "can we drop the translation server entirely?", intent: IntentRemoveServer, servers: sv("translation")},
	{msg: "kindly unregister files", intent: IntentRemoveServer, servers: sv("files")},
	{msg: "turn the ev2 server on again", intent: IntentEnableServer, servers: sv("ev2")},
	{msg: "I need the translation server switched on", intent: IntentEnableServer, servers: sv("translation")},
	{msg: "could you switch the weather server off for a bit?", intent: IntentDisableServer, servers: sv("weather")},
	{msg: "deactivate image-gen", intent: IntentDisableServer, servers: sv("image-gen")},
	{msg: "which servers have we got registered right now?", intent: IntentListServers},
	{msg: "give me the list of MCP servers", intent: IntentListServers},
	{msg: "is the translation server running?", intent: IntentServerStatus, servers: sv("translation")},
	{msg: "how healthy is ev2 at the moment?", intent: IntentServerStatus, servers: sv("ev2")},
	{msg: "any problems with the image generation server?", intent: IntentServerStatus, servers: sv("image-gen")},

	// Tools.
	{msg: "what tools are available on the files server?", intent: IntentListTools, servers: sv("files")},
	{msg: "give me a list of every tool we have", intent: IntentListTools},
	{msg: "can you tell me more about get_alerts?", intent: IntentToolDetails, tools: tl("weather.get_alerts")},
	{msg: "what exactly does the plan_route tool do", intent: IntentToolDetails, tools: tl("ev2.plan_route")},
	{msg: "I'd like details on the search tool that lives on files", intent: IntentToolDetails,
		tools: tl("files.search")},
	{msg: "what's upscale_image for?", intent: IntentToolDetails, tools: tl("image-gen.upscale_image")},
	{msg: "I need get_forecast turned on", intent: IntentEnableTool, tools: tl("weather.get_forecast")},
	{msg: "could you make detect_language available?", intent: IntentEnableTool,
		tools: tl("translation.detect_language")},
	{msg: "flip on the translation tool", intent: IntentEnableTool, tools: tl("translation.translate_text")},
	{msg: "please activate the charger booking tool", intent: IntentEnableTool, tools: tl("ev2.book_charger")},
	{msg: "switch on the list_languges tool", intent: IntentEnableTool, tools: tl("translation.list_languages")},
	{msg: "enable that search tool from ev2", intent: IntentEnableTool, tools: tl("ev2.search")},
	{msg: "I don't want write_file to be usable anymore, turn it off", intent: IntentDisableTool,
		tools: tl("files.write_file")},
	{msg: "shut off the image generation tool", intent: IntentDisableTool, tools: tl("image-gen.generate_image")},
	{msg: "please deactivate the weather tool", intent: IntentDisableTool, tools: weatherTools},
	{msg: "turn echo off", intent: IntentDisableTool, tools: tl("builtin.echo")},
	{msg: "disable files' search tool", intent: IntentDisableTool, tools: tl("files.search")},
	{msg: "can get_forecast use imperial units instead?", intent: IntentConfigureTool,
		tools: tl("weather.get_forecast"), settings: map[string]string{"units": "imperial"}},
	{msg: "switch get_forecast over to metric", intent: IntentConfigureTool, tools: tl("weather.get_forecast"),
		settings: map[string]string{"units": "metric"}},
	{msg: "for translate_text, set formality to formal", intent: IntentConfigureTool,
		tools: tl("translation.translate_text"), settings: map[string]string{"formality": "formal"}},
	{msg: "does the detect_language tool actually work? give it a try", intent: IntentTestTool,
		tools: tl("translation.detect_language")},
	{msg: "run a quick test on get_weather", intent: IntentTestTool, tools: tl("ev2.get_weather")},
	{msg: "make sure read_file is working", intent: IntentTestTool, tools: tl("files.read_file")},

	// Finding and discovery.
	{msg: "is there anything that can tell me when a charger is free?", intent: IntentFindTool, query: "charger"},
	{msg: "do we have some tool to check the weather?", intent: IntentFindTool, query: "weather"},
	{msg: "I'm looking for a tool that deletes files", intent: IntentFindTool, query: "delet"},
	{msg: "what would be useful for generating diagrams?", intent: IntentSuggestTools, query: "diagram"},
	{msg: "I have to plan an EV trip to Lyon, which tools would you suggest?", intent: IntentSuggestTools,
		query: "trip"},
	{msg: "recommend something for text translation", intent: IntentSuggestTools, query: "translation"},
	{msg: "look for new tools on the weather server", intent: IntentDiscover, servers: sv("weather")},
	{msg: "go check ev2 for any tools it added", intent: IntentDiscover, servers: sv("ev2")},
	{msg: "please re-discover image-gen's tools", intent: IntentDiscover, servers: sv("image-gen")},
	{msg: "update tools from all the servers", intent: IntentRefresh, all: true},
	{msg: "reload every server's tool list", intent: IntentRefresh, all: true},

	// Risk, tags, categories, permissions.
	{msg: "write_file is dangerous, mark it high risk", intent: IntentSetRisk, tools: tl("files.write_file"),
		risk: "HIGH"},
	{msg: "set risk level low on get_alerts", intent: IntentSetRisk, tools: tl("weather.get_alerts"), risk: "LOW"},
	{msg: "consider move_file a medium-risk tool", intent: IntentSetRisk, tools: tl("files.move_file"),
		risk: "MEDIUM"},
	{msg: "attach the tag experimental to plan_route", intent: IntentTag, tools: tl("ev2.plan_route"),
		tags: []string{"experimental"}},
	{msg: "tag the upscale_image tool as beta", intent: IntentTag, tools: tl("image-gen.upscale_image"),
		tags: []string{"beta"}},
	{msg: "please drop the public tag from get_forecast", intent: IntentUntag, tools: tl("weather.get_forecast"),
		tags: []string{"public"}},
	{msg: "file plan_route under travel", intent: IntentSetCategory, tools: tl("ev2.plan_route"), category: "travel"},
	{msg: "the category for list_directory should be storage", intent: IntentSetCategory,
		tools: tl("files.list_directory"), category: "storage"},
	{msg: "carol needs to be able to use get_weather", intent: IntentGrant, user: "carol", tools: tl("ev2.get_weather")},
	{msg: "give bob permission for the translation tool", intent: IntentGrant, user: "bob",
		tools: tl("translation.translate_text")},
	{msg: "alice shouldn't be allowed to use delete_file", intent: IntentRevoke, user: "alice",
		tools: tl("files.delete_file")},
	{msg: "cut off carol's access to book_charger", intent: IntentRevoke, user: "carol", tools: tl("ev2.book_charger")},

	// Preferences, set-up, help.
	{msg: "please enable any new image tools automatically from now on", intent: IntentPreference, query: "image"},
	{msg: "stop auto-enabling weather tools", intent: IntentForget, query: "weather"},
	{msg: "which preferences have I set?", intent: IntentListPreference},
	{msg: "can you walk me through setting up a tool?", intent: IntentSetup},
	{msg: "let's set up a new server together", intent: IntentSetup},
	{msg: "what sorts of things can you help me with?", intent: IntentHelp},
	{msg: "how would I configure a tool?", intent: IntentHelp},

	// The small words.
	{msg: "yeah go for it", intent: IntentYes},
	{msg: "absolutely", intent: IntentYes},
	{msg: "nah, leave it", intent: IntentNo},
	{msg: "no, don't do that", intent: IntentNo},
	{msg: "the 3rd", intent: IntentPick, pick: 3},
	{msg: "I'll take the last one", intent: IntentPick, pick: -1},
	{msg: "option two", intent: IntentPick, pick: 2},
	{msg: "the one from ev2", intent: IntentPick, which: "ev2"},
	{msg: "actually, never mind", intent: IntentCancel},
	{msg: "oh forget about it", intent: IntentCancel},
}

// TestUnderstandHeldOut scores the held-out phrasings. A miss does not fail the test:
// each is logged, with the score; the test fails only below half.
func TestUnderstandHeldOut(t *testing.T) {
	if len(heldOutRows) < 60 {
		t.Fatalf("%d held-out rows, want at least 60", len(heldOutRows))
	}
	inTable := map[string]bool{}
	for _, p := range tableRows {
		inTable[strings.ToLower(p.msg)] = true
	}
	cat := fixture()
	hits := 0
	for _, p := range heldOutRows {
		if inTable[strings.ToLower(p.msg)] {
			t.Errorf("%q is also in the table: held-out phrasings must be different", p.msg)
		}
		if d := p.diff(Understand(p.msg, cat)); len(d) > 0 {
			t.Logf("miss %q: %s", p.msg, strings.Join(d, "; "))
			continue
		}
		hits++
	}
	score := float64(hits) * 100 / float64(len(heldOutRows))
	t.Logf("held-out: %d/%d (%.0f%%)", hits, len(heldOutRows), score)
	if hits*2 < len(heldOutRows) {
		t.Errorf("held-out score %d/%d (%.0f%%) is below 50%%", hits, len(heldOutRows), score)
	}
}
