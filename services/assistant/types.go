// Package assistant manages Toolwarden in plain language (seed 004 §7): a message is
// understood (Understand: intent and entities, from verb families and the live
// catalogue), decided on in the conversation's context (Decide: choices, confirmations,
// guided workflows), and what it decides is done by the same services and permission
// checks as the pages (Service). Understanding and deciding are pure functions of the
// message, the catalogue and the conversation's state, so they are tested without a
// database.
package assistant

// Intent is what a message asks for.
type Intent string

// The intents: seed 004 §7's three tables, and risk, tags, categories, permissions,
// preferences, the guided set-up, and the small words of a conversation.
const (
	IntentUnknown Intent = ""

	IntentAddServer     Intent = "add_server"
	IntentRemoveServer  Intent = "remove_server"
	IntentEnableServer  Intent = "enable_server"
	IntentDisableServer Intent = "disable_server"
	IntentListServers   Intent = "list_servers"
	IntentServerStatus  Intent = "server_status"

	IntentListTools     Intent = "list_tools"
	IntentToolDetails   Intent = "tool_details"
	IntentEnableTool    Intent = "enable_tool"
	IntentDisableTool   Intent = "disable_tool"
	IntentConfigureTool Intent = "configure_tool"
	IntentTestTool      Intent = "test_tool"
	IntentFindTool      Intent = "find_tool"
	IntentSuggestTools  Intent = "suggest_tools"

	IntentDiscover Intent = "discover_tools" // one server (or the one in context)
	IntentRefresh  Intent = "refresh_tools"  // every enabled server

	IntentSetRisk        Intent = "set_risk"          // "make X high risk"
	IntentTag            Intent = "tag_tool"          // "tag X with beta"
	IntentUntag          Intent = "untag_tool"        // "remove the beta tag from X"
	IntentSetCategory    Intent = "set_category"      // "put X in the weather category"
	IntentGrant          Intent = "grant_use"         // "let bob use the weather tool"
	IntentRevoke         Intent = "revoke_use"        // "stop bob from using X"
	IntentPreference     Intent = "set_preference"    // "always enable new weather tools"
	IntentListPreference Intent = "list_preferences"  // "what are my preferences"
	IntentForget         Intent = "forget_preference" // "stop enabling new weather tools"

	IntentSetup Intent = "guided_setup" // "I want to set up a new tool"
	IntentHelp  Intent = "help"         // "what can I do?", "how do I add a server?"

	// The small words that answer the assistant.
	IntentYes    Intent = "yes"
	IntentNo     Intent = "no"
	IntentPick   Intent = "pick"   // "2", "the second one", "the one on ev2"
	IntentCancel Intent = "cancel" // "never mind"
)

// Catalogue is what the assistant knows of the installation when it reads a message:
// the servers and tools as the last event left them (catalogue.go keeps them between
// events, which clear them before a change's author hears it committed), so names are
// the live ones; people are read for each message.
type Catalogue struct {
	Servers []Server
	Tools   []Tool
	Users   []string // usernames of active people
	// NoSetUp says why the reader may not add a server ("" when they may): an API token
	// asks questions only, and a role may lack the permission. Help then offers no
	// guided set-up, which would only be refused once accepted.
	NoSetUp string

	toolWords []map[string]bool // wordsOf's cache, by index in Tools
	names     *names            // namesOf's cache
}

// Server is a registered MCP server.
type Server struct {
	ID, Name, Description, URL, Type string
	Status                           string // connection status
	Enabled                          bool
	Builtin                          bool
}

// Tool is a discovered tool.
type Tool struct {
	ID, Name, Title, Description string
	ServerID, Server             string // the server's id and name
	State                        string // lifecycle state (enabled, disabled, validated, ...)
	Risk                         string // LOW, MEDIUM, HIGH
	Category                     string
	Tags                         []string
	Params                       []Param // top-level input parameters (configuration)
	// Hash is the tool's definition hash as the catalogue read it: what a list the
	// conversation shows stands for (State.Seen).
	Hash string
	// ServerTrusted: an administrator trusts its server, whose annotations already set
	// its risk; its words (title, description) name its tools as well as their names do.
	ServerTrusted bool
}

// Param is a top-level parameter of a tool's input schema.
type Param struct {
	Name, Type, Description string
	Enum                    []string
	Secret                  bool // its values are secrets (tools.SecretParams)
}

// Understanding is what Understand read in one message. Servers and Tools are the ids of
// every catalogue entry the message may mean, best first; more than one is ambiguous.
type Understanding struct {
	Intent Intent
	// Kind is what the intent acts on when the message says or the names tell:
	// "server" or "tool" (empty when neither).
	Kind    string
	Servers []string
	Tools   []string
	// OnServer is the server a tool reference was narrowed to ("on ev2", "ev2's").
	OnServer string
	// NearServers are the servers a name one letter off fits when it fits more than one
	// ("on prod-3" with prod-1 and prod-2), and NearName that name as read: which?
	NearServers []string
	NearName    string
	// Negated is the intent a message asks NOT to be done ("don't disable search"): the
	// Intent is then unknown, and nothing is done.
	Negated Intent
	// Ref is the words that name the server or tool, as written, so a reply can say
	// what was not found.
	Ref      string
	URL      string
	Name     string // "called X", "named X", a quoted name
	Username string
	Risk     string            // LOW, MEDIUM, HIGH
	Tags     []string          // tag_tool / untag_tool
	Category string            // set_category
	Settings map[string]string // configure_tool: parameter → value as written
	Query    string            // find_tool / suggest_tools / preferences: the subject words
	// Pick is a 1-based choice ("2", "the second one"); -1 is "the last one".
	Pick    int
	All     bool // "all servers", "every tool", "them all"
	Numbers []string
	Quoted  []string
	// Question: the message asks about a change ("should I disable X?", "what happens if
	// I enable Y", "would it be safe to…?") rather than for it; nothing is done without
	// a yes.
	Question bool
	// ExceptRef is the words of an "except", "other than", "apart from", "but not"…
	// clause, as written, and Except the servers and tools they name (none: what to leave
	// out is unknown, and nothing is done). The rest of the understanding is the message
	// without the clause.
	ExceptRef string
	Except    []string
	// Described are the tools of Tools found only by words their upstream server wrote
	// (title, description), not by their name, their server's or what an administrator
	// gave them (category, tags): a change to them asks for a yes that names them.
	Described []string
}
