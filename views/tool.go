package views

import (
	"fmt"
	"strings"
	"time"
)

// The tabs of the tool page, in the order they are shown.
const (
	ToolTabOverview      = "overview"
	ToolTabSchema        = "schema"
	ToolTabConfiguration = "configuration"
	ToolTabAccess        = "access"       // a page of its own, /tools/:id/access (views/access.go)
	ToolTabCompensation  = "compensation" // a page of its own, /tools/:id/compensation (views/compensation.templ)
	ToolTabUsage         = "usage"
	ToolTabLogs          = "logs"
	ToolTabHistory       = "history"
)

// ToolTabs lists the tab keys in order.
var ToolTabs = []string{ToolTabOverview, ToolTabSchema, ToolTabConfiguration, ToolTabAccess, ToolTabCompensation, ToolTabUsage, ToolTabLogs, ToolTabHistory}

// ToolLink is a labelled URL that may be the current one (tabs, range pickers).
type ToolLink struct {
	Key      string
	Label    string
	URL      string
	Selected bool
}

// ToolPage is the tool detail page, /tools/:id. Only the selected tab's part is filled.
type ToolPage struct {
	Layout
	Tool ToolCard
	Tab  string
	Tabs []ToolLink
	// Back is the head's back link, the tool's page (ToolHeadBack) on every tab, as the
	// live head has it: the head's actions come back to the tab by the Referer.
	Back string

	Overview     *ToolOverview
	Schema       *ToolSchema
	Config       *ToolConfig
	Access       *ToolAccess
	Compensation *ToolCompensationTab
	Usage        *ToolUsage
	Logs         *ToolLogs
	History      *ToolHistory
	Test         *ToolTest
}

// ToolHint is one behaviour annotation of a tool, in words.
type ToolHint struct {
	Label string
	Value string // what the server says, in words
	Note  string // what it means, or what MCP assumes when it is not stated
	Set   bool   // the server states it
}

// ToolFinding is one validation finding.
type ToolFinding struct {
	Severity string
	Path     string
	Code     string
	Message  string
}

// ToolOverview is the Overview tab.
type ToolOverview struct {
	Description    string
	Hints          []ToolHint
	HasAnnotations bool
	AnnotatedTitle string
	RiskSource     string
	// AnnotationsRisk is what the annotations alone would decide (shown next to an override).
	AnnotationsRisk string
	// OperationRisk says which of a built-in tool's operations have a level of their own
	// while no administrator sets the tool's ("" for other tools).
	OperationRisk  string
	DefinitionHash string
	Timeout        string
	ConfigVersion  int
	LastUsed       *time.Time
	UpdatedAt      time.Time
	Validated      bool
	ValidatedAt    time.Time
	ValidatedBy    string
	Findings       []ToolFinding
	Blocking       bool // a critical or error finding
	// FindingsHidden: the viewer may not inspect tools, so the validation is not shown.
	FindingsHidden bool
}

// ToolParamRow is one parameter of the readable schema table; Depth indents nested ones.
type ToolParamRow struct {
	Name        string
	Arg         string // where the value goes: "path", "options.depth", "files[].name"
	Type        string
	Required    bool
	Deprecated  bool
	Description string
	Constraints []string
	Depth       int
}

// ToolChangeRow is one change of a definition version.
type ToolChangeRow struct {
	Message  string
	Breaking bool
}

// ToolVersionRow is one stored definition of a tool.
type ToolVersionRow struct {
	Version    string
	Hash       string
	Current    bool
	Breaking   bool
	Changes    []ToolChangeRow
	At         time.Time
	CompareURL string // the diff of this version against the current one ("" for the current)
}

// ToolDiffOp says what a diff line is.
type ToolDiffOp int

// Diff line kinds.
const (
	ToolDiffSame ToolDiffOp = iota
	ToolDiffAdded
	ToolDiffRemoved
)

// ToolDiffLine is one line of a line diff.
type ToolDiffLine struct {
	Op   ToolDiffOp
	Text string
	// Old and New are the line numbers on each side (0 where the line is not on that side).
	Old, New int
}

// ToolSchema is the Schema tab.
type ToolSchema struct {
	Params     []ToolParamRow
	InputJSON  string
	OutputJSON string // "" when the tool declares no output schema
	Markdown   string // untrusted text: shown escaped, never as HTML
	Example    string // a call for POST /api/v1/tools/call
	// ExampleShortened: the schema asks for more than the example shows, so it does not
	// pass the schema as written.
	ExampleShortened bool
	Versions         []ToolVersionRow
	// OlderVersions: the tool has stored versions older than those listed.
	OlderVersions bool
	// The comparison: the chosen versions and the diff of their pretty-printed definitions.
	VersionOpts     []Option
	From, To        string // definition hashes
	FromLabel       string
	ToLabel         string
	Diff            []ToolDiffLine
	LinesAdded      int
	LinesRemoved    int
	DiffError       string // why no diff is shown
	DiffTruncated   bool
	CompareSelected bool
}

// ToolConfigField is one parameter of the configuration form.
type ToolConfigField struct {
	Name        string
	Type        string
	Kind        string // text, number, integer, boolean, enum, json
	Mode        string // "", default, fixed
	Value       string // what the input holds (never a secret)
	Description string
	Required    bool
	Secret      bool
	Stored      bool // a secret value is stored
	Options     []Option
	Min, Max    string // bounds for number inputs ("" when none)
}

// ToolConfigVersion is one saved configuration.
type ToolConfigVersion struct {
	Version int
	Actor   string
	Reason  string
	At      time.Time
	Detail  string // the settings, secret values masked, as pretty JSON
}

// ToolConfig is the Configuration tab.
type ToolConfig struct {
	Fields     []ToolConfigField
	Risk       string
	RiskOpts   []Option
	TimeoutMS  string
	RateLimit  string // calls a minute across callers ("" when the tool has none of its own)
	Category   string
	Categories []Option
	Tags       string
	Reason     string
	Errors     FormErrors
	// CanEdit: the viewer holds tool.configure; others see the settings read-only.
	CanEdit bool
	// SecretsDropped: the form came back with errors and had new secret values, which
	// are never sent back; they must be typed again.
	SecretsDropped bool
	Version        int
	Versions       []ToolConfigVersion
}

// ToolUsage is the Usage tab.
type ToolUsage struct {
	Range       string
	RangeLabel  string
	Ranges      []ToolLink
	Calls       int64
	Failures    int64
	SuccessRate string
	P50         string
	P95         string
	Avg         string
	LastUsed    *time.Time
	// CallsChart stacks successful and failed calls per bucket; LatencyChart draws p50
	// and p95. Series is the same data as a table, for those who want the numbers.
	CallsChart   Chart
	LatencyChart Chart
	Series       []ToolUsagePoint
	BucketLabel  string // "hour", "day"
}

// ToolUsagePoint is one bucket of the usage charts.
type ToolUsagePoint struct {
	Label    string
	Calls    int64
	Failures int64
	P50      string
	P95      string
}

// ToolLogRow is one recorded call, redacted.
type ToolLogRow struct {
	ID        int64
	At        time.Time
	Actor     string
	Source    string
	Duration  string
	Success   bool
	ErrorCode string
	Request   string
	Response  string
	Error     string
	Truncated bool
}

// ToolLogs is the Logs tab.
type ToolLogs struct {
	// OnlyOwn: the viewer sees only their own calls (a built-in tool, without audit.view).
	OnlyOwn   bool
	Rows      []ToolLogRow
	OlderURL  string
	NewestURL string // when this is not the first page
}

// ToolHistoryRow is one state transition.
type ToolHistoryRow struct {
	From    string
	To      string
	Actor   string
	Reason  string
	At      time.Time
	Notes   []string // metadata in words
	DiffURL string   // the definitions before and after, when the definition changed
	Meta    string   // the rest of the metadata as JSON ("" when none)
}

// ToolHistory is the History tab.
type ToolHistory struct {
	Rows []ToolHistoryRow
	// OlderURL and NewestURL page through a long history ("" when there is no page
	// that way).
	OlderURL, NewestURL string
}

// toolTitle is what the head calls a tool.
func toolTitle(t ToolCard) string {
	if t.Title != "" {
		return clipShown(t.Title, maxShownTitle)
	}
	return t.Name
}

// ToolHeadBack is the back of a tool page's head, on every tab: its live updates go to
// every tab alike, and a form whose hidden fields a swap changes loses what was typed in
// it (static/js/app.js). The handlers send the person back to the tab they were on.
func ToolHeadBack(id string) string { return "/tools/" + id }

// toolBack is where the live head's actions return (ToolHeadBack).
func toolBack(t ToolCard) string { return ToolHeadBack(t.ID) }

// needsOverride reports whether the tool can be enabled only with an override.
func needsOverride(t ToolCard) bool {
	return t.Status == "invalid" || t.Status == "failed" || (blockingWorst(t) && !t.Enabled())
}

// blockingWorst reports whether the tool's findings keep it from being enabled without
// an override (services/tools enforces it in every state).
func blockingWorst(t ToolCard) bool { return t.Worst == "critical" || t.Worst == "error" }

// overrideWhy says what blocks the tool, for the override form.
func overrideWhy(t ToolCard) string {
	if t.Status == "failed" {
		return "Its last test failed."
	}
	if t.Worst != "" {
		return "Its definition has " + t.Worst + " findings: a model could be misled by it, or calls could fail."
	}
	return "Its definition has critical or error findings."
}

func riskSourceText(source string) string {
	if source == "override" {
		return "set by an administrator"
	}
	return "decided from the annotations and the server's trust"
}

func diffClass(op ToolDiffOp) string {
	switch op {
	case ToolDiffAdded:
		return "diff-line add"
	case ToolDiffRemoved:
		return "diff-line del"
	}
	return "diff-line"
}

func diffSign(op ToolDiffOp) string {
	switch op {
	case ToolDiffAdded:
		return "+"
	case ToolDiffRemoved:
		return "-"
	}
	return " "
}

func diffNo(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func severityLabel(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// depthClass indents a nested parameter (classes, not style attributes: the CSP allows
// no inline styles).
func depthClass(depth int) string {
	return fmt.Sprintf("param-name depth-%d", min(depth, 8))
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func i64s(n int64) string { return fmt.Sprint(n) }
