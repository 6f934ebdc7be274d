package assistant

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// phrasing is one message and what a careful person reading it with the fixture's
// catalogue in hand would understand. Only the fields a row sets are compared:
//
//   - intent must match (or alt, when the message alone cannot tell server from tool,
//     as in "enable the first one": the conversation decides);
//   - tools / servers: nil is not checked; otherwise the SET of ids Understand gives
//     must be exactly these (order-insensitive). More than one id is an ambiguous
//     reference: the person is offered them as choices. An empty non-nil set (none)
//     says the reference names nothing in the catalogue;
//   - toolsHas: ids that must be among the tools (when a narrower answer is as right as
//     a wider one);
//   - on: the server a tool reference was narrowed to, by name (OnServer may hold the
//     server's name or id);
//   - which: the server a choice names ("the one on ev2"): OnServer is it, or Servers is
//     exactly it;
//   - ref: words that Ref must contain (case-insensitive);
//   - query: words that Query must contain (case-insensitive); "*" is any non-empty Query;
//   - url, risk: exact; name, user, category: case-insensitive; tags: the set,
//     case-insensitive; settings: the same parameters, values case-insensitive;
//   - pick: when non-zero (-1 is "the last one"); all: when true.
type phrasing struct {
	msg      string
	intent   Intent
	alt      Intent
	kind     string
	tools    []string
	servers  []string
	toolsHas []string
	on       string
	which    string
	ref      string
	url      string
	name     string
	user     string
	risk     string
	tags     []string
	category string
	settings map[string]string
	query    string
	pick     int
	all      bool
}

// Sets of fixture ids the rows use.
var (
	none         = []string{}
	weatherTools = []string{"t-weather.get_forecast", "t-weather.get_alerts", "t-ev2.get_weather"}
	searchTools  = []string{"t-ev2.search", "t-files.search"}
)

func tl(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "t-" + id
	}
	return out
}

func sv(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "s-" + n
	}
	return out
}

func sameSet(got, want []string) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

func sameFoldSet(got, want []string) bool {
	lower := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = strings.ToLower(strings.TrimSpace(s))
		}
		return out
	}
	return sameSet(lower(got), lower(want))
}

// diff lists how u differs from what the row expects; nothing when it does not.
func (p phrasing) diff(u Understanding) []string {
	var out []string
	bad := func(field string, got, want any) {
		out = append(out, fmt.Sprintf("%s = %#v, want %#v", field, got, want))
	}
	if u.Intent != p.intent && (p.alt == "" || u.Intent != p.alt) {
		want := string(p.intent)
		if p.alt != "" {
			want += " or " + string(p.alt)
		}
		out = append(out, fmt.Sprintf("Intent = %q, want %q", u.Intent, want))
	}
	if p.kind != "" && u.Kind != p.kind {
		bad("Kind", u.Kind, p.kind)
	}
	if p.tools != nil && !sameSet(u.Tools, p.tools) {
		bad("Tools", u.Tools, p.tools)
	}
	if p.servers != nil && !sameSet(u.Servers, p.servers) {
		bad("Servers", u.Servers, p.servers)
	}
	for _, id := range p.toolsHas {
		if !slices.Contains(u.Tools, id) {
			out = append(out, fmt.Sprintf("Tools = %#v, want it to hold %q", u.Tools, id))
		}
	}
	if p.on != "" && u.OnServer != p.on && u.OnServer != "s-"+p.on {
		bad("OnServer", u.OnServer, p.on)
	}
	if p.which != "" && u.OnServer != p.which && u.OnServer != "s-"+p.which &&
		!sameSet(u.Servers, []string{"s-" + p.which}) {
		out = append(out, fmt.Sprintf("OnServer = %q, Servers = %#v, want the server %q", u.OnServer, u.Servers, p.which))
	}
	if p.ref != "" && !strings.Contains(strings.ToLower(u.Ref), strings.ToLower(p.ref)) {
		out = append(out, fmt.Sprintf("Ref = %q, want it to contain %q", u.Ref, p.ref))
	}
	if p.url != "" && u.URL != p.url {
		bad("URL", u.URL, p.url)
	}
	if p.name != "" && !strings.EqualFold(strings.TrimSpace(u.Name), p.name) {
		bad("Name", u.Name, p.name)
	}
	if p.user != "" && !strings.EqualFold(u.Username, p.user) {
		bad("Username", u.Username, p.user)
	}
	if p.risk != "" && u.Risk != p.risk {
		bad("Risk", u.Risk, p.risk)
	}
	if p.tags != nil && !sameFoldSet(u.Tags, p.tags) {
		bad("Tags", u.Tags, p.tags)
	}
	if p.category != "" && !strings.EqualFold(strings.TrimSpace(u.Category), p.category) {
		bad("Category", u.Category, p.category)
	}
	if p.settings != nil {
		ok := len(u.Settings) == len(p.settings)
		for k, v := range p.settings {
			if got, has := u.Settings[k]; !has || !strings.EqualFold(strings.TrimSpace(got), v) {
				ok = false
			}
		}
		if !ok {
			bad("Settings", u.Settings, p.settings)
		}
	}
	switch {
	case p.query == "*" && strings.TrimSpace(u.Query) == "":
		out = append(out, "Query is empty, want the subject words")
	case p.query != "" && p.query != "*" && !strings.Contains(strings.ToLower(u.Query), strings.ToLower(p.query)):
		out = append(out, fmt.Sprintf("Query = %q, want it to contain %q", u.Query, p.query))
	}
	if p.pick != 0 && u.Pick != p.pick {
		bad("Pick", u.Pick, p.pick)
	}
	if p.all && !u.All {
		bad("All", u.All, true)
	}
	return out
}

// allIntents is every intent of types.go but IntentUnknown; each must have rows.
var allIntents = []Intent{
	IntentAddServer, IntentRemoveServer, IntentEnableServer, IntentDisableServer, IntentListServers, IntentServerStatus,
	IntentListTools, IntentToolDetails, IntentEnableTool, IntentDisableTool, IntentConfigureTool, IntentTestTool,
	IntentFindTool, IntentSuggestTools, IntentDiscover, IntentRefresh,
	IntentSetRisk, IntentTag, IntentUntag, IntentSetCategory, IntentGrant, IntentRevoke,
	IntentPreference, IntentListPreference, IntentForget, IntentSetup, IntentHelp,
	IntentYes, IntentNo, IntentPick, IntentCancel,
}

// tableRows: every row of seed 004 §7's three tables and its prompt templates (names
// substituted from the fixture where the seed's names are not in it, and also verbatim
// where the seed's own name is worth keeping), then varied phrasings of each intent.
var tableRows = []phrasing{
	// ---- Add server (seed table, sequence diagram, prompt templates, error handling).
	{msg: "Add a new MCP server at https://example.com/mcp", intent: IntentAddServer, url: "https://example.com/mcp"},
	{msg: "Add a new MCP server at https://example.com/mcp called Weather API", intent: IntentAddServer,
		url: "https://example.com/mcp", name: "Weather API"},
	{msg: "Connect to the MCP server at https://mcp.acme.io/sse", intent: IntentAddServer, url: "https://mcp.acme.io/sse"},
	{msg: "Register the Acme MCP server at https://acme.example.org/mcp", intent: IntentAddServer,
		url: "https://acme.example.org/mcp", name: "Acme"},
	{msg: "I want to add a new tool server at https://tools.example.org/mcp", intent: IntentAddServer,
		url: "https://tools.example.org/mcp"},
	{msg: "Set up a connection to the MCP server at http://localhost:8931/mcp", intent: IntentAddServer,
		url: "http://localhost:8931/mcp"},
	{msg: "Add a server at `https://example.com/mcp`", intent: IntentAddServer, url: "https://example.com/mcp"},
	{msg: "Add a server at invalid-url", intent: IntentAddServer, kind: "server"},
	{msg: "add https://stocks.example.com/mcp as a server named Stocks", intent: IntentAddServer,
		url: "https://stocks.example.com/mcp", name: "Stocks"},
	{msg: `please register a server at https://mcp.example.net/v1/mcp, it's called "Team Wiki"`, intent: IntentAddServer,
		url: "https://mcp.example.net/v1/mcp", name: "Team Wiki"},
	{msg: "connect https://calendar.example.com/mcp", intent: IntentAddServer, url: "https://calendar.example.com/mcp"},
	{msg: "can you hook up the MCP server at https://jira.example.com/mcp?", intent: IntentAddServer,
		url: "https://jira.example.com/mcp"},
	{msg: "Register the 'Stock Quotes' MCP server at https://quotes.example.com/mcp", intent: IntentAddServer,
		url: "https://quotes.example.com/mcp", name: "Stock Quotes"},
	{msg: "add the server https://crm.example.com/mcp.", intent: IntentAddServer, url: "https://crm.example.com/mcp"},

	// ---- Remove server.
	{msg: "Remove the MCP server named 'Example Server'", intent: IntentRemoveServer, name: "Example Server", servers: none},
	{msg: "Remove the MCP server named 'image-gen'", intent: IntentRemoveServer, servers: sv("image-gen")},
	{msg: "delete the ev2 server", intent: IntentRemoveServer, kind: "server", servers: sv("ev2")},
	{msg: "get rid of the files server", intent: IntentRemoveServer, servers: sv("files")},
	{msg: "unregister the translation server", intent: IntentRemoveServer, servers: sv("translation")},
	{msg: "remove server https://ev2.example.net/mcp", intent: IntentRemoveServer, servers: sv("ev2"),
		url: "https://ev2.example.net/mcp"},
	{msg: "Please remove weather", intent: IntentRemoveServer, servers: sv("weather")},
	{msg: "delete the image generation server", intent: IntentRemoveServer, servers: sv("image-gen")},
	{msg: "remove the wether server", intent: IntentRemoveServer, servers: sv("weather")},

	// ---- Enable server.
	{msg: "Enable the weather MCP server", intent: IntentEnableServer, kind: "server", servers: sv("weather")},
	{msg: "enable translation", intent: IntentEnableServer, kind: "server", servers: sv("translation")},
	{msg: "turn on the translation server", intent: IntentEnableServer, servers: sv("translation")},
	{msg: "activate the image-gen server", intent: IntentEnableServer, servers: sv("image-gen")},
	{msg: "switch the files server back on", intent: IntentEnableServer, servers: sv("files")},
	{msg: "Enable all servers", intent: IntentEnableServer, kind: "server", all: true},
	{msg: "bring the ev2 server back online", intent: IntentEnableServer, servers: sv("ev2")},
	{msg: "enable the translaton server", intent: IntentEnableServer, servers: sv("translation")},
	{msg: "Make the translation server available", intent: IntentEnableServer, servers: sv("translation")},

	// ---- Disable server.
	{msg: "Disable the translation server", intent: IntentDisableServer, kind: "server", servers: sv("translation")},
	{msg: "turn off the ev2 server", intent: IntentDisableServer, servers: sv("ev2")},
	{msg: "switch off files", intent: IntentDisableServer, kind: "server", servers: sv("files")},
	{msg: "deactivate the image generation server", intent: IntentDisableServer, servers: sv("image-gen")},
	{msg: "disable the weather server for now", intent: IntentDisableServer, servers: sv("weather")},
	{msg: "Disable every server", intent: IntentDisableServer, kind: "server", all: true},
	{msg: "please disable the server at https://images.example.com/mcp", intent: IntentDisableServer,
		servers: sv("image-gen"), url: "https://images.example.com/mcp"},
	{msg: "stop the ev2 server", intent: IntentDisableServer, servers: sv("ev2")},

	// ---- List servers.
	{msg: "Show me all available MCP servers", intent: IntentListServers, kind: "server"},
	{msg: "list servers", intent: IntentListServers},
	{msg: "what servers do we have?", intent: IntentListServers},
	{msg: "which MCP servers are registered?", intent: IntentListServers},
	{msg: "show me the servers", intent: IntentListServers},
	{msg: "list all the disabled servers", intent: IntentListServers},

	// ---- Server status.
	{msg: "What's the status of the image generation server?", intent: IntentServerStatus, kind: "server",
		servers: sv("image-gen")},
	{msg: "what's the status of ev2?", intent: IntentServerStatus, servers: sv("ev2")},
	{msg: "is the weather server up?", intent: IntentServerStatus, servers: sv("weather")},
	{msg: "how is the files server doing", intent: IntentServerStatus, servers: sv("files")},
	{msg: "status of translation", intent: IntentServerStatus, servers: sv("translation")},
	{msg: "check on the image-gen server", intent: IntentServerStatus, servers: sv("image-gen")},
	{msg: "is ev2 connected?", intent: IntentServerStatus, servers: sv("ev2")},
	{msg: "What's the status of the wether server?", intent: IntentServerStatus, servers: sv("weather")},
	{msg: "show me the health of the builtin server", intent: IntentServerStatus, servers: sv("builtin")},

	// ---- List tools.
	{msg: "Show me all available tools", intent: IntentListTools, kind: "tool"},
	{msg: "list tools", intent: IntentListTools},
	{msg: "what tools are there?", intent: IntentListTools},
	{msg: "what tools does ev2 have?", intent: IntentListTools, servers: sv("ev2")},
	{msg: "list the tools on the weather server", intent: IntentListTools, servers: sv("weather")},
	{msg: "show me the disabled tools", intent: IntentListTools},
	{msg: "which tools are enabled?", intent: IntentListTools},
	{msg: "show the tools from image-gen", intent: IntentListTools, servers: sv("image-gen")},
	{msg: "list every tool", intent: IntentListTools},

	// ---- Tool details.
	{msg: "Tell me about the weather tool", intent: IntentToolDetails, kind: "tool", tools: weatherTools},
	{msg: "what does get_alerts do?", intent: IntentToolDetails, tools: tl("weather.get_alerts")},
	{msg: "describe translate_text", intent: IntentToolDetails, tools: tl("translation.translate_text")},
	{msg: "tell me about ev2's search tool", intent: IntentToolDetails, tools: tl("ev2.search"), on: "ev2"},
	{msg: "show me details for the search tool on files", intent: IntentToolDetails, tools: tl("files.search"), on: "files"},
	{msg: "what is resize_image?", intent: IntentToolDetails, tools: tl("image-gen.resize_image")},
	{msg: "Tell me about the search tool", intent: IntentToolDetails, tools: searchTools},
	{msg: "info on get_forcast", intent: IntentToolDetails, tools: tl("weather.get_forecast")},
	{msg: "what parameters does generate_image take?", intent: IntentToolDetails, tools: tl("image-gen.generate_image")},
	{msg: "show me 'read_file'", intent: IntentToolDetails, tools: tl("files.read_file")},
	{msg: "what does describe_image do?", intent: IntentToolDetails, tools: tl("image-gen.describe_image")},

	// ---- Enable tool (seed table and templates).
	{msg: "Enable the translation tool", intent: IntentEnableTool, kind: "tool", tools: tl("translation.translate_text")},
	{msg: "Enable the get_forecast tool", intent: IntentEnableTool, kind: "tool", tools: tl("weather.get_forecast")},
	{msg: "Turn on detect_language", intent: IntentEnableTool, kind: "tool", tools: tl("translation.detect_language")},
	{msg: "Make resize_image available", intent: IntentEnableTool, tools: tl("image-gen.resize_image")},
	{msg: "Activate the upscale_image tool", intent: IntentEnableTool, tools: tl("image-gen.upscale_image")},
	{msg: "enable ev2's search tool", intent: IntentEnableTool, tools: tl("ev2.search"), on: "ev2"},
	{msg: "enable the search tool on ev2", intent: IntentEnableTool, tools: tl("ev2.search"), on: "ev2"},
	{msg: "turn on search", intent: IntentEnableTool, tools: searchTools},
	{msg: "enable book_charger", intent: IntentEnableTool, tools: tl("ev2.book_charger")},
	{msg: "please switch on delete_file", intent: IntentEnableTool, tools: tl("files.delete_file")},
	{msg: "enable get forecast", intent: IntentEnableTool, tools: tl("weather.get_forecast")},
	{msg: "enable translate_txt", intent: IntentEnableTool, tools: tl("translation.translate_text")},
	{msg: "Enable the weather tool", intent: IntentEnableTool, tools: weatherTools},
	{msg: "can you enable the list_languages tool please?", intent: IntentEnableTool, tools: tl("translation.list_languages")},
	{msg: `enable "move_file"`, intent: IntentEnableTool, tools: tl("files.move_file")},
	{msg: "enable the stock_ticker tool", intent: IntentEnableTool, kind: "tool", tools: none, ref: "stock_ticker"},
	{msg: "Enable the first one", intent: IntentEnableTool, alt: IntentEnableServer, pick: 1},
	{msg: "enable them all", intent: IntentEnableTool, alt: IntentEnableServer, all: true},

	// ---- Disable tool.
	{msg: "Disable the image generation tool", intent: IntentDisableTool, kind: "tool", tools: tl("image-gen.generate_image")},
	{msg: "Disable read_file", intent: IntentDisableTool, kind: "tool", tools: tl("files.read_file")},
	{msg: "Turn off the generate_image tool", intent: IntentDisableTool, tools: tl("image-gen.generate_image")},
	{msg: "Deactivate write_file", intent: IntentDisableTool, tools: tl("files.write_file")},
	{msg: "Disable the weather tool", intent: IntentDisableTool, kind: "tool", tools: weatherTools},
	{msg: "switch off ev2's get_weather", intent: IntentDisableTool, tools: tl("ev2.get_weather")},
	{msg: "turn off the search tool from files", intent: IntentDisableTool, tools: tl("files.search"), on: "files"},
	{msg: "disable the add tool", intent: IntentDisableTool, tools: tl("builtin.add")},
	{msg: "disable sleep", intent: IntentDisableTool, tools: tl("builtin.sleep")},
	{msg: "disable reed_file", intent: IntentDisableTool, tools: tl("files.read_file")},
	{msg: "make http_get unavailable", intent: IntentDisableTool, tools: tl("builtin.http_get")},
	{msg: "disable all tools on ev2", intent: IntentDisableTool, servers: sv("ev2"), all: true},
	{msg: "Disable the second one", intent: IntentDisableTool, alt: IntentDisableServer, pick: 2},
	{msg: "Please disable the plan_route tool on ev2.", intent: IntentDisableTool, tools: tl("ev2.plan_route")},
	{msg: "get_alerts off please", intent: IntentDisableTool, tools: tl("weather.get_alerts")},

	// ---- Configure tool.
	{msg: "Configure the weather tool to use metric units", intent: IntentConfigureTool, kind: "tool",
		toolsHas: tl("weather.get_forecast"), settings: map[string]string{"units": "metric"}},
	{msg: "Configure the weather tool to use Celsius", intent: IntentConfigureTool, toolsHas: tl("weather.get_forecast"),
		settings: map[string]string{"units": "metric"}},
	{msg: "switch get_forecast to fahrenheit", intent: IntentConfigureTool, tools: tl("weather.get_forecast"),
		settings: map[string]string{"units": "imperial"}},
	{msg: "configure get_forecast to use metric units", intent: IntentConfigureTool, tools: tl("weather.get_forecast"),
		settings: map[string]string{"units": "metric"}},
	{msg: "set units to imperial for get_forecast", intent: IntentConfigureTool, tools: tl("weather.get_forecast"),
		settings: map[string]string{"units": "imperial"}},
	{msg: "set days to 5 for get_forecast", intent: IntentConfigureTool, tools: tl("weather.get_forecast"),
		settings: map[string]string{"days": "5"}},
	{msg: "change translate_text's formality to informal", intent: IntentConfigureTool,
		tools: tl("translation.translate_text"), settings: map[string]string{"formality": "informal"}},
	{msg: "configure generate_image with size=1024x1024", intent: IntentConfigureTool,
		tools: tl("image-gen.generate_image"), settings: map[string]string{"size": "1024x1024"}},
	{msg: "make get_forecast use imperial units", intent: IntentConfigureTool, tools: tl("weather.get_forecast"),
		settings: map[string]string{"units": "imperial"}},
	{msg: "set the connector of ev2's search tool to ccs", intent: IntentConfigureTool, tools: tl("ev2.search"),
		settings: map[string]string{"connector": "ccs"}},

	// ---- Test tool.
	{msg: "Test if the translation tool is working", intent: IntentTestTool, kind: "tool", tools: tl("translation.translate_text")},
	{msg: "test get_alerts", intent: IntentTestTool, tools: tl("weather.get_alerts")},
	{msg: "is read_file working?", intent: IntentTestTool, tools: tl("files.read_file")},
	{msg: "try out ev2's search tool", intent: IntentTestTool, tools: tl("ev2.search")},
	{msg: "run a test of detect_language", intent: IntentTestTool, tools: tl("translation.detect_language")},
	{msg: "check that echo works", intent: IntentTestTool, tools: tl("builtin.echo")},
	{msg: "can you test the current_time tool", intent: IntentTestTool, tools: tl("builtin.current_time")},
	{msg: "test the search tool", intent: IntentTestTool, tools: searchTools},

	// ---- Find tool.
	{msg: "Do we have a tool for weather forecasts?", intent: IntentFindTool, query: "forecast"},
	{msg: "is there a tool that can translate text?", intent: IntentFindTool, query: "translate"},
	{msg: "find a tool to resize pictures", intent: IntentFindTool, query: "resize"},
	{msg: "which tool can read files?", intent: IntentFindTool, query: "read"},
	{msg: "look for a tool that converts currencies", intent: IntentFindTool, query: "currenc"},
	{msg: "search for tools about charging", intent: IntentFindTool, query: "charging"},
	{msg: "do we have anything for sending email?", intent: IntentFindTool, query: "email"},
	{msg: "is there something that tells the time?", intent: IntentFindTool, query: "time"},

	// ---- Suggest tools.
	{msg: "What tools would help with image processing?", intent: IntentSuggestTools, query: "image"},
	{msg: "suggest some tools for planning a road trip", intent: IntentSuggestTools, query: "trip"},
	{msg: "recommend tools for working with documents", intent: IntentSuggestTools, query: "document"},
	{msg: "which tools should I use to translate a website?", intent: IntentSuggestTools, query: "translate"},
	{msg: "what would you recommend for managing files?", intent: IntentSuggestTools, query: "file"},
	{msg: "any suggestions for tools to monitor storms?", intent: IntentSuggestTools, query: "storm"},
	{msg: "what tools could help me write a report?", intent: IntentSuggestTools, query: "report"},

	// ---- Discover (one server).
	{msg: "Discover new tools on the Example server", intent: IntentDiscover, servers: none, ref: "Example"},
	{msg: "Discover new tools on the ev2 server", intent: IntentDiscover, kind: "server", servers: sv("ev2")},
	{msg: "scan files for new tools", intent: IntentDiscover, servers: sv("files")},
	{msg: "check the weather server for new tools", intent: IntentDiscover, servers: sv("weather")},
	{msg: "refresh the tools on ev2", intent: IntentDiscover, servers: sv("ev2")},
	{msg: "rediscover tools on image-gen", intent: IntentDiscover, servers: sv("image-gen")},
	{msg: "find new tools on translation", intent: IntentDiscover, servers: sv("translation")},
	{msg: "discover tools", intent: IntentDiscover},

	// ---- Refresh (every enabled server).
	{msg: "Refresh the tools list from all servers", intent: IntentRefresh, all: true},
	{msg: "refresh all tools", intent: IntentRefresh},
	{msg: "update the tool information from every server", intent: IntentRefresh, all: true},
	{msg: "rescan every server for tools", intent: IntentRefresh, all: true},
	{msg: "resync all servers", intent: IntentRefresh, all: true},
	{msg: "refresh everything", intent: IntentRefresh},

	// ---- Risk.
	{msg: "make translate_text high risk", intent: IntentSetRisk, tools: tl("translation.translate_text"), risk: "HIGH"},
	{msg: "set the risk of read_file to low", intent: IntentSetRisk, tools: tl("files.read_file"), risk: "LOW"},
	{msg: "mark write_file as high-risk", intent: IntentSetRisk, tools: tl("files.write_file"), risk: "HIGH"},
	{msg: "get_alerts should be medium risk", intent: IntentSetRisk, tools: tl("weather.get_alerts"), risk: "MEDIUM"},
	{msg: "lower the risk of delete_file to medium", intent: IntentSetRisk, tools: tl("files.delete_file"), risk: "MEDIUM"},
	{msg: "change ev2's book_charger risk level to HIGH", intent: IntentSetRisk, tools: tl("ev2.book_charger"), risk: "HIGH"},
	{msg: "raise the risk of the search tool on files to high", intent: IntentSetRisk, tools: tl("files.search"), risk: "HIGH"},

	// ---- Tags.
	{msg: "tag resize_image with beta", intent: IntentTag, tools: tl("image-gen.resize_image"), tags: []string{"beta"}},
	{msg: "add the tags beta and experimental to upscale_image", intent: IntentTag, tools: tl("image-gen.upscale_image"),
		tags: []string{"beta", "experimental"}},
	{msg: "label detect_language as internal", intent: IntentTag, tools: tl("translation.detect_language"),
		tags: []string{"internal"}},
	{msg: "tag ev2's search with 'ev'", intent: IntentTag, tools: tl("ev2.search"), tags: []string{"ev"}},
	{msg: "give get_forecast the tag public-data", intent: IntentTag, tools: tl("weather.get_forecast"),
		tags: []string{"public-data"}},
	{msg: "remove the beta tag from resize_image", intent: IntentUntag, tools: tl("image-gen.resize_image"),
		tags: []string{"beta"}},
	{msg: "untag experimental from generate_image", intent: IntentUntag, tools: tl("image-gen.generate_image"),
		tags: []string{"experimental"}},
	{msg: "get_forecast shouldn't be tagged public anymore", intent: IntentUntag, tools: tl("weather.get_forecast"),
		tags: []string{"public"}},
	{msg: "take the internal tag off detect_language", intent: IntentUntag, tools: tl("translation.detect_language"),
		tags: []string{"internal"}},
	{msg: "drop tag ev from ev2's search tool", intent: IntentUntag, tools: tl("ev2.search"), tags: []string{"ev"}},

	// ---- Categories.
	{msg: "put get_alerts in the weather category", intent: IntentSetCategory, tools: tl("weather.get_alerts"),
		category: "weather"},
	{msg: "move read_file to the storage category", intent: IntentSetCategory, tools: tl("files.read_file"),
		category: "storage"},
	{msg: "set the category of translate_text to language", intent: IntentSetCategory,
		tools: tl("translation.translate_text"), category: "language"},
	{msg: "categorize resize_image as media", intent: IntentSetCategory, tools: tl("image-gen.resize_image"),
		category: "media"},
	{msg: "change the category of get_weather to forecasts", intent: IntentSetCategory, tools: tl("ev2.get_weather"),
		category: "forecasts"},

	// ---- Permissions.
	{msg: "let bob use get_forecast", intent: IntentGrant, user: "bob", tools: tl("weather.get_forecast")},
	{msg: "let bob use the weather tool", intent: IntentGrant, user: "bob", tools: weatherTools},
	{msg: "allow carol to use ev2's search tool", intent: IntentGrant, user: "carol", tools: tl("ev2.search")},
	{msg: "give alice access to read_file", intent: IntentGrant, user: "alice", tools: tl("files.read_file")},
	{msg: "grant bob permission to run generate_image", intent: IntentGrant, user: "bob",
		tools: tl("image-gen.generate_image")},
	{msg: "Allow carol to call write_file", intent: IntentGrant, user: "carol", tools: tl("files.write_file")},
	{msg: "stop bob from using get_forecast", intent: IntentRevoke, user: "bob", tools: tl("weather.get_forecast")},
	{msg: "revoke carol's access to write_file", intent: IntentRevoke, user: "carol", tools: tl("files.write_file")},
	{msg: "don't let alice use generate_image anymore", intent: IntentRevoke, user: "alice",
		tools: tl("image-gen.generate_image")},
	{msg: "take away bob's access to translate_text", intent: IntentRevoke, user: "bob",
		tools: tl("translation.translate_text")},
	{msg: "bob should no longer be able to use read_file", intent: IntentRevoke, user: "bob", tools: tl("files.read_file")},
	{msg: "remove alice's permission to use the search tool on ev2", intent: IntentRevoke, user: "alice",
		tools: tl("ev2.search")},

	// ---- Preferences.
	{msg: "always enable new weather tools", intent: IntentPreference, query: "weather"},
	{msg: "Always enable new weather tools automatically", intent: IntentPreference, query: "weather"},
	{msg: "automatically turn on any new translation tools", intent: IntentPreference, query: "translation"},
	{msg: "from now on, enable new image tools when they're discovered", intent: IntentPreference, query: "image"},
	{msg: "whenever a new files tool shows up, enable it", intent: IntentPreference, query: "file"},
	{msg: "what are my preferences", intent: IntentListPreference},
	{msg: "show my preferences", intent: IntentListPreference},
	{msg: "what have I asked you to remember?", intent: IntentListPreference},
	{msg: "list my saved preferences", intent: IntentListPreference},
	{msg: "stop enabling new weather tools", intent: IntentForget, query: "weather"},
	{msg: "forget my preference about translation tools", intent: IntentForget, query: "translation"},
	{msg: "forget my alert preference", intent: IntentForget, query: "alert"},
	{msg: "delete the auto-enable weather preference", intent: IntentForget, query: "weather"},
	{msg: "remove my preference for weather tools", intent: IntentForget, query: "weather"},
	// A server or tool named after preferences is not a preference.
	{msg: "Remove the MCP server named 'user-preferences'", intent: IntentRemoveServer, name: "user-preferences", servers: none},
	{msg: "don't auto-enable image tools anymore", intent: IntentForget, query: "image"},
	{msg: "stop automatically enabling new tools", intent: IntentForget},

	// ---- Guided set-up.
	{msg: "I want to set up a new tool", intent: IntentSetup},
	{msg: "walk me through adding a server", intent: IntentSetup},
	{msg: "guide me through setting up a new tool", intent: IntentSetup},
	{msg: "help me set up a new MCP server", intent: IntentSetup},
	{msg: "I'd like to connect a new tool, step by step", intent: IntentSetup},

	// ---- Help (progressive disclosure).
	{msg: "help", intent: IntentHelp},
	{msg: "What can I do with MCP tools?", intent: IntentHelp},
	{msg: "How do I add a server?", intent: IntentHelp},
	{msg: "what can you do?", intent: IntentHelp},
	{msg: "how do I disable a tool?", intent: IntentHelp},
	{msg: "how does this work?", intent: IntentHelp},

	// ---- The small words.
	{msg: "yes", intent: IntentYes},
	{msg: "Yes please", intent: IntentYes},
	{msg: "yep", intent: IntentYes},
	{msg: "sure", intent: IntentYes},
	{msg: "go ahead", intent: IntentYes},
	{msg: "ok, do it", intent: IntentYes},
	{msg: "y", intent: IntentYes},
	{msg: "no", intent: IntentNo},
	{msg: "nope", intent: IntentNo},
	{msg: "no thanks", intent: IntentNo},
	{msg: "not now", intent: IntentNo},
	{msg: "don't", intent: IntentNo},
	{msg: "2", intent: IntentPick, pick: 2},
	{msg: "The second one", intent: IntentPick, pick: 2},
	{msg: "the last one", intent: IntentPick, pick: -1},
	{msg: "the first", intent: IntentPick, pick: 1},
	{msg: "number 3", intent: IntentPick, pick: 3},
	{msg: "option 1", intent: IntentPick, pick: 1},
	{msg: "#2", intent: IntentPick, pick: 2},
	{msg: "the third one please", intent: IntentPick, pick: 3},
	{msg: "2.", intent: IntentPick, pick: 2},
	{msg: "the one on ev2", intent: IntentPick, which: "ev2"},
	{msg: "the one from files", intent: IntentPick, which: "files"},
	{msg: "never mind", intent: IntentCancel},
	{msg: "cancel", intent: IntentCancel},
	{msg: "forget it", intent: IntentCancel},
	{msg: "nevermind", intent: IntentCancel},
	{msg: "cancel that", intent: IntentCancel},
	{msg: "abort", intent: IntentCancel},

	// ---- Nothing Toolwarden does.
	{msg: "order me a pizza", intent: IntentUnknown},
	{msg: "what's the capital of France?", intent: IntentUnknown},
}

// TestUnderstandTable reads every table row against the fixture and reports each way an
// understanding differs from the row.
func TestUnderstandTable(t *testing.T) {
	if len(tableRows) < 150 {
		t.Fatalf("%d rows, want at least 150", len(tableRows))
	}
	per := map[Intent]int{}
	for _, p := range tableRows {
		per[p.intent]++
	}
	for _, in := range allIntents {
		if per[in] == 0 {
			t.Errorf("no row for intent %q", in)
		}
	}
	seen := map[string]bool{}
	cat := fixture()
	for _, p := range tableRows {
		if seen[p.msg] {
			t.Errorf("%q is in the table twice", p.msg)
		}
		seen[p.msg] = true
		if d := p.diff(Understand(p.msg, cat)); len(d) > 0 {
			t.Errorf("%q: %s", p.msg, strings.Join(d, "; "))
		}
	}
}
