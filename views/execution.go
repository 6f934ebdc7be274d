package views

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The execution pages (seed 003's Safe Action flow): /executions/new, a prompt or a JSON
// plan, and /executions/:id, the plan's preview, its approval, its progress, live log,
// results and rollback. Everything inside ExecutionView is re-rendered for every event of
// the execution's topic and pushed to every viewer alike, so controls that depend on who
// looks carry data-perm (see Layout.Perms): "execution.approve" for approvers, and
// "execution.cancel" for the requester (while their role may plan executions) or an
// approver, shown to the requester through the page's data-mine (the requester never
// changes, so the page, not the fragments, says whether the viewer is the one). The
// service checks every decision again.

// ExecutionNewPage is /executions/new.
type ExecutionNewPage struct {
	Layout
	Mode   string // "prompt" or "plan": which of the two was submitted
	Prompt string
	Plan   string // the JSON plan as typed
	Error  *ExecutionInputError
	Tools  []ExecutionToolHint // enabled tools, for the help text
	// MoreTools: there are more enabled tools than listed.
	MoreTools bool
}

// ExecutionInputError is why a prompt or plan was not accepted.
type ExecutionInputError struct {
	Message string
	Fields  []ExecutionFieldError
	// Where the planner stopped understanding the prompt (Fragment non-empty).
	Before, Fragment, After string
}

// ExecutionFieldError is one problem with one part of a plan, under its JSON pointer
// ("/steps/0/arguments/path").
type ExecutionFieldError struct {
	Path    string
	Message string
}

// ExecutionToolHint is an enabled tool the new-execution page mentions.
type ExecutionToolHint struct {
	ID          string
	Name        string // qualified
	Description string
	Risk        string
}

// ExecutionPage is /executions/:id.
type ExecutionPage struct {
	Layout
	// Mine: the viewer asked for this execution and may still plan executions (shows
	// "execution.cancel" controls).
	Mine bool
	// NeedsOther: the viewer asked for this high-risk plan and someone else must approve
	// it (separation of duties): the page says so instead of offering the phrase.
	NeedsOther bool
	// RollbackNeedsOther: the same for a high-risk rollback of the viewer's execution.
	RollbackNeedsOther bool
	X                  ExecutionView
	Preview            []ExecutionPreviewStep
	Log                []ExecutionLogLine
	// LogOmitted counts the earliest log lines not shown.
	LogOmitted int
}

// ExecutionView is the part of the page that follows the execution live.
type ExecutionView struct {
	ID            string
	Title         string
	Status        string
	Risk          string
	RiskWhy       string
	Requester     string
	RequesterKind string // user, token
	Planner       string // "rules", "llm:…"; "" for a plan given as steps
	PlanHash      string // hex
	Phrase        string // what to type to approve a HIGH plan
	Approval      string // policy, confirm, phrase
	Approver      string
	SelfApproved  bool // its requester approved it: nobody else could
	Reason        string
	Decision      string // rejected, cancelled
	DecidedBy     string
	Source        string // "mcp": a call through /mcp that needed approval
	Client        string // the MCP client's name and version
	Error         string
	CreatedAt     time.Time
	ApprovedAt    *time.Time
	ExpiresAt     *time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
	Runner        string // the replica that runs or ran its steps
	// PlanSteps say what the plan runs, for the confirm dialog and the danger zone.
	PlanSteps     []ExecutionBrief
	Steps         []ExecutionStepView // the run's
	RollbackSteps []ExecutionStepView // the rollback's, once one was started
	// Rollback is what a rollback would run, while the execution is failed.
	Rollback *ExecutionRollbackPlan
	// Withheld: a step's result (ExecutionStepView.Withheld) or the rollback plan's secret
	// arguments are withheld, or a result masked; a live update then has the page ask for
	// its results and rollback panels as its viewer (LiveExecution).
	Withheld bool
	// PreviewWithheld: a decision's live update left a preview diff out
	// (ExecutionPreviewStep.DiffWithheld); the page asks for its preview as its viewer too.
	PreviewWithheld bool
}

// ExecutionBrief is one step of the plan in a line: its tool and its risk.
type ExecutionBrief struct {
	Tool    string
	Server  string
	Risk    string
	RiskWhy string
}

// ExecutionStepView is one stored step as the stepper and the results show it.
type ExecutionStepView struct {
	Position   int
	Tool       string
	ToolID     string
	Status     string // pending, running, succeeded, failed, interrupted, compensated, skipped
	Risk       string
	DurationMS *float64
	Error      string
	Progress   string // the latest progress report of a running step
	Undoes     *int   // rollback steps: the run step they undo
	HasResult  bool
	IsError    bool
	Outputs    []TestOutput
	Structured string // pretty JSON
	// ResultShortened: Outputs and Structured are cut (BoundExecutionResults) to
	// ResultShown of the result's ResultSize bytes; ResultOmitted: none of it is shown.
	ResultShortened bool
	ResultOmitted   bool
	ResultShown     int
	ResultSize      int
	// Withheld: the step has a result its viewer may not see (a built-in tool's, shown
	// to the execution's requester and auditors only).
	Withheld bool
}

// ExecutionPreviewStep is one step of the ActionPreviewCard (or of a rollback plan).
type ExecutionPreviewStep struct {
	Position   int
	Tool       string
	ToolID     string
	Server     string
	Arguments  string // pretty JSON of the effective arguments; secrets masked
	Risk       string
	RiskWhy    string
	RiskSource string
	Undoes     *int // rollback plans: the step it undoes
	Undo       ExecutionUndo
	// Diff is the change the step will make to a file (built-in file writes), computed
	// against the file as it was when the plan was made.
	Diff *ExecutionDiff
	// DiffWithheld is the file whose Diff its viewer may not see (it shows the
	// requester's file).
	DiffWithheld string
}

// ExecutionDiff is a unified diff to show.
type ExecutionDiff struct {
	Path           string
	Added, Removed int
	Lines          []DiffLine
}

// DiffLine is one line of a unified diff: Kind "add", "del", "hunk", "file" or "ctx".
type DiffLine struct {
	Kind, Text string
}

// NewDiff splits a unified diff into lines to style. "---" and "+++" are file headers
// only outside hunks: inside one, a removed line "-- x" reads "--- x" and an added
// "++ x" reads "+++ x", so a hunk's lines are told by their first byte, and the hunk
// ends where its @@ line counts say (several files' diffs may follow one another, each
// with its own header, and a copy's or rename's "copy from/to" lines come before it).
func NewDiff(path, diff string) *ExecutionDiff {
	d := &ExecutionDiff{Path: path}
	inHunk := false
	var oldLeft, newLeft int // the lines the current hunk has still to show, by side
	for _, l := range strings.SplitAfter(diff, "\n") {
		if l == "" {
			continue
		}
		kind := ""
		if inHunk {
			switch l[0] {
			case ' ', '\n': // context ("\n": an empty one whose space was trimmed)
				if oldLeft > 0 && newLeft > 0 {
					kind = "ctx"
					oldLeft--
					newLeft--
				}
			case '-':
				if oldLeft > 0 {
					kind = "del"
					d.Removed++
					oldLeft--
				}
			case '+':
				if newLeft > 0 {
					kind = "add"
					d.Added++
					newLeft--
				}
			case '\\': // "\ No newline at end of file", about the line before it
				kind = "ctx"
			}
			inHunk = kind != ""
		}
		if !inHunk {
			// A file's header (or what comes between files, or a note after the diff).
			kind = "ctx"
			switch {
			case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
				kind = "file"
			case strings.HasPrefix(l, "@@"):
				kind = "hunk"
				inHunk = true
				oldLeft, newLeft = hunkCounts(l)
			case strings.HasPrefix(l, "+"):
				kind = "add"
				d.Added++
			case strings.HasPrefix(l, "-"):
				kind = "del"
				d.Removed++
			}
		}
		if !strings.HasSuffix(l, "\n") {
			l += "\n"
		}
		d.Lines = append(d.Lines, DiffLine{Kind: kind, Text: l})
	}
	return d
}

// hunkCounts is how many old and new lines the hunk whose "@@ -a,b +c,d @@" line is l
// holds (a count left out is 1). A count it cannot read is unbounded: the hunk then
// ends at the first line that is not one of a hunk's, and a line is never hidden as a
// header for want of a count.
func hunkCounts(l string) (oldN, newN int) {
	oldN, newN = math.MaxInt, math.MaxInt
	f := strings.Fields(l)
	if len(f) < 4 || f[0] != "@@" || f[3] != "@@" {
		return oldN, newN
	}
	count := func(r string, sign byte) int {
		if len(r) < 2 || r[0] != sign {
			return math.MaxInt
		}
		_, n, found := strings.Cut(r[1:], ",")
		if !found {
			return 1
		}
		c, err := strconv.Atoi(n)
		if err != nil || c < 0 {
			return math.MaxInt
		}
		return c
	}
	return count(f[1], '-'), count(f[2], '+')
}

// ExecutionUndo says how a step would be undone after a failure.
type ExecutionUndo struct {
	Kind      string // "step": the plan's own undo step; "compensation": configured for the tool; "none"
	Tool      string
	ToolID    string
	Arguments string
}

// ExecutionRollbackPlan is the RollbackPanel of a failed execution.
type ExecutionRollbackPlan struct {
	Steps    []ExecutionPreviewStep
	Missing  []string // completed steps nothing undoes
	Risk     string
	RiskWhy  string
	Phrase   string
	Problems []ExecutionFieldError
	Nothing  string // why there is nothing to roll back
	Hash     string // the rollback's hash: the form sends it back, so what runs is what was shown
}

// ExecutionLogLine is one line of the LiveLogsViewer: one event.
type ExecutionLogLine struct {
	EventID int64
	At      time.Time
	Kind    string
	Level   string // info, ok, warn, error
	Text    string
}

// The execution states, as the views compare them.
const (
	execAwaiting       = "awaiting_approval"
	execExecuting      = "executing"
	execSuccess        = "success"
	execFailed         = "failed"
	execRollingBack    = "rolling_back"
	execRolledBack     = "rolled_back"
	execRollbackFailed = "rollback_failed"
	execCancelled      = "cancelled"
	execExpired        = "expired"
)

// ExecutionStatusLabel is a status in words.
func ExecutionStatusLabel(s string) string {
	switch s {
	case "planning":
		return "Planning"
	case execAwaiting:
		return "Awaiting approval"
	case execExecuting:
		return "Executing"
	case execSuccess:
		return "Succeeded"
	case execFailed:
		return "Failed"
	case execRollingBack:
		return "Rolling back"
	case execRolledBack:
		return "Rolled back"
	case execRollbackFailed:
		return "Rollback failed"
	case execCancelled:
		return "Cancelled"
	case execExpired:
		return "Expired"
	}
	return s
}

func execStatusClass(s string) string {
	switch s {
	case execAwaiting, execRollingBack:
		return "badge warn"
	case execExecuting, execRolledBack:
		return "badge info"
	case execSuccess:
		return "badge ok"
	case execFailed, execRollbackFailed:
		return "badge danger"
	}
	return "badge"
}

func execStepLabel(s string) string {
	switch s {
	case "pending":
		return "Pending"
	case "running":
		return "Running"
	case "succeeded":
		return "Succeeded"
	case "failed":
		return "Failed"
	case "interrupted":
		return "Interrupted"
	case "compensated":
		return "Undone"
	case "skipped":
		return "Skipped"
	}
	return s
}

func execStepClass(s string) string {
	switch s {
	case "running":
		return "badge info"
	case "succeeded":
		return "badge ok"
	case "failed", "interrupted":
		return "badge danger"
	case "compensated":
		return "badge warn"
	}
	return "badge"
}

// execStepMark is the stepper's marker of a step: its number, or how it ended.
func execStepMark(st ExecutionStepView) string {
	switch st.Status {
	case "succeeded":
		return "✓"
	case "failed", "interrupted":
		return "✕"
	case "compensated":
		return "↺"
	case "skipped":
		return "–"
	}
	return strconv.Itoa(st.Position + 1)
}

// execDone counts the steps that finished one way or another.
func execDone(steps []ExecutionStepView) int {
	n := 0
	for _, st := range steps {
		if st.Status != "pending" && st.Status != "running" {
			n++
		}
	}
	return n
}

// execFinished are the steps with something to report in the results.
func execFinished(steps []ExecutionStepView) []ExecutionStepView {
	var out []ExecutionStepView
	for _, st := range steps {
		if st.HasResult || st.Error != "" {
			out = append(out, st)
		}
	}
	return out
}

// Bounds of the results an execution's page and each of its live fragments carry,
// counted as the page carries them (escaped): every event of the execution sends them
// all again, to every viewer, and the websocket keeps recent fragments.
const (
	ExecResultShown  = 64 << 10 // one step's result
	ExecResultsShown = 1 << 20  // all steps' results
	// execOutputCost is the markup around one output, so that a result of many empty
	// outputs is bounded too.
	execOutputCost = 256
	// execResultMin: with less than this left of ExecResultsShown, a result that does
	// not fit is left out rather than cut to a few lines.
	execResultMin = 4 << 10
	// ExecResultMin is execResultMin, for the handlers: a result that does not fit in
	// less than it is left out without being read.
	ExecResultMin = execResultMin
)

// BoundExecutionResults cuts the steps' results (the run's, then the rollback's) to
// ExecResultShown each and ExecResultsShown in all: a result cut says so, and one past
// the total is left out and says so.
func BoundExecutionResults(x *ExecutionView) {
	total := ExecResultsShown
	for _, steps := range [][]ExecutionStepView{x.Steps, x.RollbackSteps} {
		for i := range steps {
			BoundExecutionResult(&steps[i], &total)
		}
	}
}

// BoundExecutionResult is BoundExecutionResults for one step, total what is left of
// ExecResultsShown: for steps bounded one by one, in the same order.
func BoundExecutionResult(st *ExecutionStepView, total *int) {
	size, cost := len(st.Structured), escapedCost(st.Structured)
	for _, o := range st.Outputs {
		size += len(o.Text) + len(o.DataURL) + len(o.URI) + len(o.Name) + len(o.MIMEType) + len(o.Size)
		cost += execOutputCost + escapedCost(o.Text) + len(o.DataURL) + escapedCost(o.URI) + escapedCost(o.Name) +
			escapedCost(o.MIMEType) + escapedCost(o.Size)
	}
	b := resultBudget{left: min(ExecResultShown, *total)}
	switch {
	case cost <= b.left:
		*total -= cost
		st.ResultSize = size
		return
	case b.left < execResultMin:
		st.Outputs, st.Structured = nil, ""
		st.ResultOmitted, st.ResultSize = true, size
		return
	}
	outs := make([]TestOutput, 0, len(st.Outputs))
	for _, o := range st.Outputs {
		if b.left < execOutputCost {
			break
		}
		b.left -= execOutputCost
		o.MIMEType, o.Size, o.Name, o.URI = b.take(o.MIMEType), b.take(o.Size), b.take(o.Name), b.take(o.URI)
		if o.DataURL != "" {
			if len(o.DataURL) > b.left { // a data URL cut shows nothing
				o.Type, o.Text = "text", fmt.Sprintf("(%s content of %d KiB: too large to show here)", o.Type, len(o.DataURL)>>10)
				o.DataURL = ""
			} else {
				b.left -= len(o.DataURL)
				b.shown += len(o.DataURL)
			}
		}
		o.Text = b.take(o.Text)
		outs = append(outs, o)
	}
	st.Outputs = outs
	st.Structured = b.take(st.Structured)
	st.ResultShortened, st.ResultShown, st.ResultSize = true, b.shown, size
	*total -= min(ExecResultShown, *total) - b.left
}

// resultBudget is what is left of a result's bound (escaped bytes) and how many bytes
// of the result were kept.
type resultBudget struct{ left, shown int }

// take is as much of s as fits, cut on a character boundary.
func (b *resultBudget) take(s string) string {
	cost := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		c := escapedRuneCost(r, w)
		if cost+c > b.left {
			s = s[:i]
			break
		}
		cost += c
		i += w
	}
	b.left -= cost
	b.shown += len(s)
	return s
}

// escapedCost is s's length once HTML-escaped (as templ escapes text and attributes).
func escapedCost(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>':
			n += 3
		case '&', '\'', '"':
			n += 4
		}
	}
	return n
}

func escapedRuneCost(r rune, width int) int {
	switch r {
	case '<', '>':
		return 4
	case '&', '\'', '"':
		return 5
	}
	return width
}

// execResultNote says that a step's result was cut or left out, and where it is whole.
// execResultsURL is where execResultsLoader asks for x's panels.
func execResultsURL(x ExecutionView) string {
	u := "/executions/" + x.ID + "/results"
	if x.PreviewWithheld {
		u += "?preview=1"
	}
	return u
}

// execResultsSelect is what execResultsLoader swaps in of the answer.
func execResultsSelect(x ExecutionView) string {
	s := "#exec-results-" + x.ID + ",#exec-rollback-" + x.ID
	if x.PreviewWithheld {
		s = "#exec-preview-" + x.ID + "," + s
	}
	return s
}

func execResultNote(executionID string, st ExecutionStepView) string {
	where := "; the full result is in GET /api/v1/executions/" + executionID
	if st.ResultOmitted {
		return fmt.Sprintf("This result (%d KiB) is too large to show here%s", (st.ResultSize+1023)>>10, where)
	}
	return fmt.Sprintf("This result is shortened: %d KiB of %d KiB%s", st.ResultShown>>10, (st.ResultSize+1023)>>10, where)
}

func execDuration(ms *float64) string {
	if ms == nil {
		return ""
	}
	if *ms >= 1000 {
		return fmt.Sprintf("%.2f s", *ms/1000)
	}
	return fmt.Sprintf("%.1f ms", *ms)
}

// execElapsed is how long the execution ran (or has run so far, as of its last change).
func execElapsed(x ExecutionView) string {
	if x.StartedAt == nil || x.FinishedAt == nil {
		return ""
	}
	d := x.FinishedAt.Sub(*x.StartedAt)
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return d.Round(10 * time.Millisecond).String()
}

// ShortHash is the first characters of a plan hash, as people compare them.
func ShortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func execApprovalText(x ExecutionView) string {
	switch x.Approval {
	case "policy":
		return "approved by policy (low risk)"
	case "confirm":
		return "confirmed by " + x.Approver
	case "phrase":
		if x.SelfApproved {
			return "approved by its own requester " + x.Approver + " with the typed phrase (nobody else could approve it)"
		}
		return "approved by " + x.Approver + " with the typed phrase"
	}
	return ""
}

func execPlannerText(p string) string {
	switch {
	case p == "":
		return "a plan given step by step"
	case p == "rules":
		return "the rule-based planner"
	case strings.HasPrefix(p, "llm:"):
		return "the language model " + strings.TrimPrefix(p, "llm:")
	}
	return p
}

func execRequesterText(x ExecutionView) string {
	who := x.Requester
	switch {
	case x.Source == "mcp" && x.Client != "":
		who += " (a call through /mcp from the MCP client " + x.Client + ")"
	case x.Source == "mcp":
		who += " (a call through /mcp from an MCP client)"
	case x.RequesterKind == "token":
		who += " (API token)"
	}
	return who
}

// execCancelledText says who ended a cancelled execution and why.
func execCancelledText(x ExecutionView) string {
	verb := "Cancelled"
	if x.Decision == "rejected" {
		verb = "Rejected"
	}
	switch {
	case x.DecidedBy != "" && x.Reason != "":
		return verb + " by " + x.DecidedBy + ": " + x.Reason
	case x.DecidedBy != "":
		return verb + " by " + x.DecidedBy + "."
	case x.Reason != "":
		return x.Reason
	}
	return "It was cancelled."
}

// ExecutionFieldWhere says in words where in a plan a JSON pointer points:
// "/steps/0/arguments/path" → "Step 1, argument path".
func ExecutionFieldWhere(ptr string) string {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	if len(parts) == 0 || parts[0] == "" {
		return ""
	}
	var out []string
	i := 0
	switch parts[0] {
	case "steps", "rollback":
		noun := "Step"
		if parts[0] == "rollback" {
			noun = "Undo step"
		}
		if len(parts) == 1 {
			if parts[0] == "steps" {
				return "Steps"
			}
			return "Rollback"
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			return ptr
		}
		out = append(out, fmt.Sprintf("%s %d", noun, n+1))
		i = 2
	case "prompt":
		return "Prompt"
	case "confirm":
		return "Confirmation"
	default:
		return ptr
	}
	rest := parts[i:]
	switch {
	case len(rest) == 0:
	case rest[0] == "arguments" && len(rest) > 1:
		out = append(out, "argument "+strings.Join(rest[1:], "."))
	case rest[0] == "arguments":
		out = append(out, "arguments")
	case rest[0] == "undo":
		out = append(out, "its undo step")
	default:
		out = append(out, strings.Join(rest, "."))
	}
	return strings.Join(out, ", ")
}

func execLogTime(t time.Time) string { return t.UTC().Format("15:04:05") }

func execLogClass(l ExecutionLogLine) string { return "log-line " + l.Level }

func execUndoes(u *int) string {
	if u == nil {
		return ""
	}
	return strconv.Itoa(*u + 1)
}

func execPtrStamp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

func execISO(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// execCountRisk counts the steps of the given risk.
func execCountRisk(steps []ExecutionPreviewStep, level string) int {
	n := 0
	for _, st := range steps {
		if st.Risk == level {
			n++
		}
	}
	return n
}
