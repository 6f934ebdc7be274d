package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views/form"
)

// ToolTabTest is the test panel, a page of its own (/tools/:id/test) shown as a tab.
const ToolTabTest = "test"

// ToolTest is the test panel: the arguments (form or JSON), the approval the tool's
// risk needs, the result of the last run and the saved cases.
type ToolTest struct {
	Action string // where the workspace posts
	Mode   string // "form" or "json"
	// Fixed are the parameters the tool's configuration fixes, with their values (JSON
	// text): not in the form, and added to every call.
	Fixed  []FixedParam
	Form   form.Model
	JSON   string // the arguments as JSON text (mode json)
	Errors *verr.Error
	// Risk is the level of a call with these arguments (low, medium, high), as the
	// router rates it: a built-in tool's read is low though the tool is high.
	Risk    string
	RiskWhy string
	Phrase  string // what to type for a HIGH tool
	Confirm bool   // the confirm box was ticked
	// ConfirmError: the last run was refused because the box was not ticked (medium) or
	// the phrase not typed (high); said at that control.
	ConfirmError string
	Typed        string // the phrase as typed
	// CanRun: the caller may call the tool (enabled, or testable by someone who may enable it).
	CanRun    bool
	CannotRun string
	CanSave   bool // may save test cases (tool.configure)
	// NeedsApprover says why another person must approve a run (high risk, and the
	// caller may not approve their own): the workspace offers to ask for approval.
	NeedsApprover string
	Verifies      bool // Run all moves the tool to verified | failed (an administrator, a testable state)
	Notice        string
	Result        *TestResult
	Cases         []TestCase
	// CasesCanRun: every case may run, so Run all is offered; it asks for the box when
	// a case is medium risk and the phrase when one is high (CasesMedium, CasesHigh).
	CasesCanRun            bool
	CasesWithheld          bool // the caller may run the tool, but not every case
	CasesMedium, CasesHigh bool
	CaseName               string
	Expect                 string
	ExpectTxt              string
}

// caseFields are the save-case form's own inputs: their errors are shown beside them,
// not again with the arguments'.
var caseFields = map[string]bool{"case_name": true, "expect": true, "expect_text": true}

// ArgErrors are the errors about the arguments, without the save-case form's.
func (v ToolTest) ArgErrors() *verr.Error {
	if v.Errors == nil {
		return nil
	}
	out := &verr.Error{}
	for _, f := range v.Errors.Fields {
		if !caseFields[f.Field] {
			out.Fields = append(out.Fields, f)
		}
	}
	if len(out.Fields) == 0 {
		return nil
	}
	return out
}

// CaseHasErrors: saving a case was refused for one of its own inputs (the save-case
// form opens to show it).
func (v ToolTest) CaseHasErrors() bool {
	if v.Errors == nil {
		return false
	}
	for _, f := range v.Errors.Fields {
		if caseFields[f.Field] {
			return true
		}
	}
	return false
}

// TestRunButton is the state of the workspace's Run button.
type TestRunButton struct {
	CanRun    bool
	CannotRun string // why not, when !CanRun
	Busy      bool   // a run is in progress: disabled until it ends
	Run       string // the call id of that run: the workspace sends it back (_run)
	// RunReplica is the replica that runs it (_run_replica): a workspace served by
	// another replica keeps polling that one.
	RunReplica string
}

// ApprovalShown names what the approval part and the Run button show, so that a change
// of the arguments that changes neither renders nothing again (TestRisk): a swap would
// replace the button a person is about to press.
func (v ToolTest) ApprovalShown() string {
	return strings.Join([]string{v.Risk, v.RiskWhy, v.NeedsApprover, strconv.FormatBool(v.CanRun), v.CannotRun}, "\x1f")
}

// RunButton is the Run button of the workspace.
func (v ToolTest) RunButton() TestRunButton {
	b := TestRunButton{CanRun: v.CanRun, CannotRun: v.CannotRun}
	if v.Result != nil && v.Result.Running {
		b.Busy, b.Run, b.RunReplica = true, v.Result.CallID, v.Result.Replica
	}
	return b
}

// TestResult is a run: in progress (Running) or ended.
type TestResult struct {
	CallID  string
	Running bool
	Replica string // the replica that runs it, while it runs
	// Topic is the run's websocket topic, which the page follows while it runs; Since
	// is the last event id the panel reflects (the socket replays what came after).
	Topic string
	Since int64
	// PollURL answers with the panel as it is now: the fallback for a page whose
	// websocket is not connected (app.js asks only then).
	PollURL    string
	CancelURL  string
	Progress   []TestProgress
	Elapsed    time.Duration
	Status     string // success, tool_error, failed, cancelled
	Code       string // the router's error code when failed
	Message    string
	Details    []verr.Field
	DurationMS float64
	Attempts   int
	Output     []TestOutput
	Structured string // pretty JSON
}

// RunPanelID is the id of the progress of run callID in its running panel.
func RunPanelID(callID string) string { return "test-run-" + callID }

// TestProgress is one progress notification.
type TestProgress struct {
	Message string
	Percent int // -1 when the total is unknown
	Step    string
}

// TestOutput is one content item of a result.
type TestOutput struct {
	Type     string // text, json, image, audio, resource_link, resource, blob
	Text     string
	MIMEType string
	DataURL  string // images and audio
	URI      string
	Name     string
	Size     string
}

// TestCase is a saved case with its last outcome.
type TestCase struct {
	ID        string
	Name      string
	Arguments string // masked where the tool's schema now marks a parameter secret
	// HeldSecret: the case holds a value for a parameter that became secret after it
	// was saved (masked in Arguments): saving it again drops the value.
	HeldSecret bool
	Expect     string
	ExpectText string
	LastRun    *time.Time
	LastPassed *bool
	LastMS     float64
	LastMsg    string
	Risk       string // of a call with the case's arguments
	CanRun     bool   // the caller may run the case (as the workspace's Run for its arguments)
	CannotRun  string // why not
	LoadURL    string
	RunURL     string
	DeleteURL  string
}

// FixedParam is a parameter the tool's configuration fixes, as the test panel names it:
// its value (JSON text), or why it is not shown (a secret; a viewer who may not see the
// tool's configuration).
type FixedParam struct {
	Name, Value, Why string
}
