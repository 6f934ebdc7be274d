package views

import "time"

// The execution history (/executions), the approvals inbox (/approvals), the execution
// settings (/settings/executions) and the Compensation tab of the tool page
// (/tools/:id/compensation). The execution page itself (/executions/:id) lives elsewhere.

// Element ids that live updates aim at.
const (
	// ExecutionListRowsID is the history's table body on its first, unfiltered page: the
	// only one new executions are added to live (a filtered page cannot tell whether a
	// new one matches, a later page is not where new ones go).
	ExecutionListRowsID = "execution-rows"
	// ApprovalItemsID is the inbox's list on its first page.
	ApprovalItemsID = "approval-items"
	// ApprovalsCountID is the count next to "Approvals" in the navigation.
	ApprovalsCountID = "nav-approvals-count"
	// QuestionsCountID is the count of the viewer's open questions next to "Approvals".
	QuestionsCountID = "nav-questions-count"
)

// ExecutionListRowID is the id of an execution's row in the history.
func ExecutionListRowID(id string) string { return "execution-row-" + id }

// ApprovalItemID is the id of an execution's entry in the approvals inbox.
func ApprovalItemID(id string) string { return "approval-" + id }

// executionsLinkURL is the page of execution id.
func executionsLinkURL(id string) string { return "/executions/" + id }

// ExecutionListRow is one execution as the history and the inbox show it. It does not
// depend on who looks: live updates render it once for every viewer.
type ExecutionListRow struct {
	ID         string
	Title      string
	Prompt     string
	Status     string
	Risk       string
	RiskWhy    string
	Requester  string
	CreatedAt  time.Time
	FinishedAt *time.Time
	ExpiresAt  *time.Time
	Error      string
	Reason     string
	// Client is the MCP client whose call waits for this decision, when it came through /mcp.
	Client string
	// Steps say what the steps do, in short lines, where their tools say ("Creating
	// file notes.txt"; the built-in tools).
	Steps []string
}

// ExecutionsFilter is what the history's filter form holds.
type ExecutionsFilter struct {
	Status []string
	Risk   string
	Mine   bool
	// RequestedBy is a user id given in the URL (not "me"); kept so the form does not
	// drop it.
	RequestedBy string
	Q           string
}

// ExecutionsPage is the execution history.
type ExecutionsPage struct {
	Layout
	Filter   ExecutionsFilter
	Statuses []Option // every status, in lifecycle order
	Risks    []Option
	// Errors are bad filters by field (status, risk, requested_by, q, limit); with any,
	// nothing is listed.
	Errors FormErrors
	// Notice explains a fallback (an outdated page link: the first page is shown).
	Notice    string
	HasFilter bool
	Rows      []ExecutionListRow
	// LiveRows: this page shows new executions as they are created (first page, no filter).
	LiveRows bool
	// Keep is the page's size: the most rows a live page keeps as new ones arrive.
	Keep       int
	NextURL    string
	FirstURL   string
	CanCreate  bool
	CanApprove bool
}

// ApprovalsPage is the approvals inbox: executions awaiting a decision.
type ApprovalsPage struct {
	Layout
	Items []ExecutionListRow
	// LiveItems: new requests are added to this page as they come (the first page).
	LiveItems bool
	NextURL   string
	FirstURL  string
}

// ExecutionSettingsPage is the form of the execution settings.
type ExecutionSettingsPage struct {
	Layout
	Form   ExecutionSettingsForm
	Errors FormErrors
	// Units are the units the expiry can be given in.
	Units []Option
	// Current says what is in force, in words.
	Current string
}

// ExecutionSettingsForm is what the settings form holds.
type ExecutionSettingsForm struct {
	TTLValue string
	TTLUnit  string // seconds, minutes, hours, days
	// HighSeparation is auto, always or off (see separationOptions).
	HighSeparation string
}

// separationOptions are the choices of who approves a high-risk plan.
var separationOptions = []Option{
	{Value: "auto", Label: "Someone other than its requester, whenever another person who may approve is active (a single-person installation approves its own)"},
	{Value: "always", Label: "Always someone other than its requester (with nobody else, high-risk plans cannot run)"},
	{Value: "off", Label: "Its requester may approve it with its phrase"},
}

// ToolCompensationURL is the Compensation tab of tool id: a page of its own, like Access.
func ToolCompensationURL(id string) string { return "/tools/" + id + "/compensation" }

// ToolCompensationTab is the Compensation tab: how a completed step of this tool is undone when
// an execution fails (the compensation), and the form that sets it.
type ToolCompensationTab struct {
	Action string
	// Configured is the compensation in force; nil when none is.
	Configured *ToolCompensation
	CanEdit    bool
	Form       ToolCompensationForm
	Errors     FormErrors
	// UndoTools are qualified names the undo-tool field suggests.
	UndoTools []string
	// Pointers are the tool's own top-level arguments as JSON pointers ("/path"): what
	// an undo argument can be taken from.
	Pointers []string
}

// ToolCompensation is a configured undo.
type ToolCompensation struct {
	UndoToolID   string
	UndoTool     string // qualified name; the id when the tool is gone
	Arguments    []ToolCompensationArg
	UpdatedBy    string
	UndoMissing  bool
	UndoDisabled bool
}

// ToolCompensationArg is one undo argument: taken from the step (From) or fixed (Value).
type ToolCompensationArg struct {
	Name  string
	From  string
	Value string // JSON text
}

// ToolCompensationForm is what the form holds, to show it again next to its errors.
type ToolCompensationForm struct {
	UndoTool string
	Rows     []ToolCompensationArg
}
