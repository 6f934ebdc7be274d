package views

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ServerCard is one server as the list, the live updates and the detail header show it.
type ServerCard struct {
	ID            string
	Name          string
	Description   string
	Type          string // stdio, sse, streamable_http
	Target        string // the command line or the URL
	Status        string // connecting, connected, error, disconnected
	LastError     string
	Enabled       bool
	Trusted       bool
	ToolCount     int
	LastConnected *time.Time
	StatusSince   time.Time
	// NameReserved: the name is kept for Toolwarden's own tools (it was taken before it
	// was); the server works, and the page asks for it to be renamed.
	NameReserved bool
	// UndoesOthers counts other servers' tools this server's tools undo: deleting it
	// removes those undo steps, which its delete confirmation says.
	UndoesOthers int
	// Waiting counts the executions waiting or running that call its tools: they fail
	// once it is deleted, which its delete confirmation says (counted only for a viewer
	// who may delete it, and for live updates, which every viewer shares).
	Waiting int
}

// DeleteServerConfirm is the question a server's Delete button asks first.
func DeleteServerConfirm(s ServerCard) string {
	q := "Delete " + s.Name + "? Its session ends and its tools and their history are removed."
	if s.UndoesOthers > 0 {
		q += " " + LostUndo(s.UndoesOthers, false) + "."
	}
	if s.Waiting > 0 {
		call := "call"
		if s.Waiting == 1 {
			call = "calls"
		}
		q += " " + Plural(s.Waiting, "execution", "executions") + " waiting or running " + call + " its tools and will fail."
	}
	return q
}

// LostUndo says that n tools of other servers lose the undo step a server's tools give
// them when it is deleted: before (its delete confirmation) or, done, after.
func LostUndo(n int, done bool) string {
	lose, them := "lose", "them"
	if n == 1 {
		lose, them = "loses", "it"
	}
	what := Plural(n, "tool of another server", "tools of other servers")
	if done {
		return what + " lost the undo step it gave " + them
	}
	return what + " " + lose + " the undo step this server's tools give " + them
}

// ServerFilter is the search and filters of the server list.
type ServerFilter struct {
	Q      string
	Status string
	Type   string
}

// Option is one choice of a select.
type Option struct {
	Value string
	Label string
}

// ServerCardsID is the list of cards on the list's first, unfiltered page: the only
// one new servers are added to live (a filtered page cannot tell whether a new one
// matches, a later page is not where new ones go).
const ServerCardsID = "server-cards"

func serverCardsID(live bool) string {
	if live {
		return ServerCardsID
	}
	return ServerCardsID + "-page" // cards still change live, by their own ids
}

// serverStatusOptionID is the status filter's option for status, its count replaced live.
func serverStatusOptionID(status string) string { return "server-status-option-" + status }

// ServersPage is the server list.
type ServersPage struct {
	Layout
	Servers      []ServerCard
	Filter       ServerFilter
	Total        int // matching the filter
	All          int // registered in all
	Counts       map[string]int
	Page, Pages  int
	PrevURL      string
	NextURL      string
	StatusOpts   []Option
	TypeOpts     []Option
	CanCreate    bool
	CanImportExp bool
}

// LiveCards reports whether the page is the list's first, unfiltered page, which new
// servers are added to live.
func (p ServersPage) LiveCards() bool {
	return p.Page <= 1 && p.Filter == (ServerFilter{})
}

// SecretRow is one env variable or header of the form. Values are never sent to the
// browser: a stored one shows as configured, with a box to replace it.
type SecretRow struct {
	Name       string
	Configured bool
	Row        int // its place in the form (1 on), naming a row that has no name
}

// ErrorKey is the form error of the row: by its name, or by its place when it has none.
func (r SecretRow) ErrorKey(field string) string {
	if r.Name == "" {
		return fmt.Sprintf("%s-row-%d", field, r.Row)
	}
	return field + "/" + r.Name
}

// ServerForm is the add/edit form.
type ServerForm struct {
	Name             string
	Description      string
	Type             string
	Command          string
	Args             string // one per line
	WorkingDir       string
	URL              string
	Template         string // the YAML of a template server
	Env              []SecretRow
	Headers          []SecretRow
	AuthType         string
	AuthHeader       string
	AuthConfigured   bool
	TimeoutMS        int
	Retries          int
	HealthIntervalMS int
	Enabled          bool
	Trusted          bool
	AutoEnable       bool
	Errors           FormErrors
	// SecretsDropped: the form came back with an error and had new secret values,
	// which are not sent back; the person must enter them again.
	SecretsDropped bool
	// Version is the server's updated_at the edit form was opened at (RFC 3339, full
	// precision), sent back so a save after someone else's is refused.
	Version string
}

// ServerFormPage is /servers/new and /servers/:id/edit.
type ServerFormPage struct {
	Layout
	ID   string // "" when adding
	Form ServerForm
	// TrustLocked: the person may not change whether the server is trusted (only
	// administrators may: trust decides risk).
	TrustLocked bool
	Types       []Option
	Test        *ServerTest
	Action      string
	// CommandLocked: the viewer may not set what a stdio server runs
	// (auth.PermServerCommand), so those fields are shown but cannot be changed.
	CommandLocked bool
}

// ServerTest is the result of "Test connection".
type ServerTest struct {
	OK    bool
	Error string
	// FormProblems: nothing was tried, the form has these problems (one a line).
	FormProblems []string
	// Busy: nothing was tried, too many other tests were running (Error says so).
	Busy       bool
	ConnectMS  float64
	LatencyMS  float64
	ServerName string
	Version    string
	Protocol   string
	ToolCount  int
	Tools      []string
	// ToolsCut says why the tools were counted only so far (the test's limit), or "".
	ToolsCut string
	Stderr   []string
}

// ServerTestRun is a connection test running in the background.
type ServerTestRun struct {
	ID       string
	Replica  string // the replica that runs it: its polls and Cancel go there (AtReplica)
	Step     string
	ElapsedS int
	LimitS   int
}

// HealthRow is one health check.
type HealthRow struct {
	At        time.Time
	OK        bool
	LatencyMS *float64
	Error     string
}

// RunRow is one discovery run.
type RunRow struct {
	ID         int64
	Trigger    string
	Actor      string
	OK         bool
	Error      string
	Added      int
	Updated    int
	Unchanged  int
	Removed    int
	Pages      int
	DurationMS float64
	At         time.Time
	// LeftOut counts the listed tools that could not be stored; LeftOutNames are the
	// first few, as "name: why".
	LeftOut      int
	LeftOutNames []string
}

// ToolRow is one tool on the server page.
type ToolRow struct {
	ID          string
	Name        string
	Title       string
	Description string
	Status      string
	Version     string
	Available   bool
	ReadOnly    bool
	Destructive bool
}

// KV is a labelled value.
type KV struct {
	Key   string
	Value string
}

// ServerPage is the server detail page.
type ServerPage struct {
	Layout
	Server    ServerCard
	Info      ServerInfo
	Conn      ServerConnection
	Health    ServerHealth
	Runs      []RunRow
	Tools     []ToolRow
	ToolTotal int // the server's tools; Tools may hold only the first of them
	Resources []KV
	Prompts   []KV
	Stderr    []string
	IsStdio   bool
}

// ServerConnection is the server page's Connection panel: how the server is reached,
// its session's state and its call circuit. It does not depend on who looks: live
// updates render it once for every viewer.
type ServerConnection struct {
	ServerID    string
	KVs         []KV
	Template    string // a template server's YAML
	NextAttempt *time.Time
	BreakerOpen bool
	// Circuit is the state of the server's call circuit (router.BreakerState).
	Circuit CircuitView
	// Confinement says how a stdio server's process is confined (docs/security.md).
	Confinement string
}

// ServerHealth is the server page's panel of its latest health checks.
type ServerHealth struct {
	ServerID string
	Rows     []HealthRow
	Summary  string
}

// CircuitView is a server's call circuit: closed, open or half-open, since when,
// the failed calls in a row, and (open) when a trial call is let through.
type CircuitView struct {
	State    string
	Since    time.Time
	Failures uint32
	Until    *time.Time
}

func statusLabel(s string) string {
	switch s {
	case "connected":
		return "Connected"
	case "connecting":
		return "Connecting"
	case "error":
		return "Error"
	case "disconnected":
		return "Disconnected"
	}
	return s
}

func statusClass(s string) string {
	switch s {
	case "connected":
		return "badge ok"
	case "connecting":
		return "badge warn"
	case "error":
		return "badge danger"
	}
	return "badge"
}

func typeLabel(t string) string {
	switch t {
	case "stdio":
		return "stdio"
	case "sse":
		return "SSE"
	case "streamable_http":
		return "Streamable HTTP"
	case "template":
		return "Template"
	}
	return t
}

func itoa(n int) string { return fmt.Sprint(n) }

func msf(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// callSourceText is where a call came from, in words (the usage log's source).
func callSourceText(source string) string {
	switch source {
	case "test_panel":
		return "Test panel"
	case "api":
		return "JSON API"
	case "execution":
		return "Execution"
	case "mcp":
		return "MCP client"
	}
	return source
}

// Plural is "1 step" or "3 steps".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func joinLines(lines []string) string { return strings.Join(lines, "\n") }

// joinNames lists the first names and says how many more there are.
func joinNames(names []string, total int) string {
	s := strings.Join(names, ", ")
	if total > len(names) {
		s += fmt.Sprintf(" and %d more", total-len(names))
	}
	return s
}

func lower(s string) string { return strings.ToLower(s) }

// ImportPage is /servers/import: upload, then a preview of the plan, then apply.
type ImportPage struct {
	Layout
	FileName string
	// Content is what was pasted, given back with the errors to be fixed in place.
	Content  string
	Error    string
	Problems []string
	Plan     *ImportPlan
	// Sealed is the uploaded file encrypted for the apply step (it may hold secrets).
	Sealed string
	// Digest identifies the plan shown; apply refuses a plan that has changed since.
	Digest string
	Prune  bool
}

// ImportPlan is what an import would change.
type ImportPlan struct {
	Format   string
	Items    []ImportItem
	Warnings []string
	Errors   []string
	Summary  string
	CanApply bool
	// Others are the categories, settings and tools a whole configuration changes
	// (Type is the kind); NotApplied what it states that cannot be applied here.
	Others     []ImportItem
	NotApplied []string
}

// ImportItem is what happens to one server.
type ImportItem struct {
	Action  string // create, update, unchanged, keep, delete
	Name    string
	Type    string
	Changes []string
}

// importAction names a plan action for people.
func importAction(action string) string {
	if action == "after_discovery" {
		return "after the import discovers its server"
	}
	return action
}

func importSign(action string) string {
	switch action {
	case "create":
		return "+"
	case "update":
		return "~"
	case "delete":
		return "−"
	case "unchanged":
		return "="
	case "after_discovery":
		return "…"
	}
	return "·"
}

// ServerInfo is what a server says about itself at its last connection (the server
// page's first panel, replaced live when the server connects again).
type ServerInfo struct {
	ServerID     string
	Info         []KV // empty: never connected
	Capabilities []string
	Instructions string
}

// ReplicaParam names the replica that holds a run in the URLs of its polls and Cancel
// (a test panel's run, a connection test): a replica that gets such a request for
// another replica forwards it there (web/run_forward.go).
const ReplicaParam = "replica"

// AtReplica is path with the replica that holds its run named (ReplicaParam), when
// one is.
func AtReplica(path, replica string) string {
	if replica == "" {
		return path
	}
	return path + "?" + ReplicaParam + "=" + url.QueryEscape(replica)
}

// Poll is where a running connection test's status is asked for.
func (r ServerTestRun) Poll() string { return AtReplica("/servers/test/runs/"+r.ID, r.Replica) }

// Cancel is where a running connection test is stopped.
func (r ServerTestRun) Cancel() string {
	return AtReplica("/servers/test/runs/"+r.ID+"/cancel", r.Replica)
}
