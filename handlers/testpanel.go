package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/uuidtext"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/views/form"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// testWait is how long a run from the test panel is awaited before the page shows its
// running panel, which follows the run over the websocket (testlive.go): most calls end
// well within it, so they show their result at once.
const testWait = 1500 * time.Millisecond

func testURL(id string) string { return "/tools/" + id + "/test" }

// TestPage renders the test panel (/tools/:id/test); ?case= loads a saved case.
// TestPanelHandler serves a tool's test panel: the form, runs in the background with
// live progress, saved test cases, and asking for approval.
type TestPanelHandler struct {
	*Shell
	page   ToolPageHandler // the tool page around the panel
	Tools  *tools.Service
	Router *router.Router
	Runs   *router.Runs
	Decide *decide.Service
}

// NewTestPanel is the test panel inside the tool page.
func NewTestPanel(page ToolPageHandler, r *router.Router, runs *router.Runs, dec *decide.Service) TestPanelHandler {
	return TestPanelHandler{Shell: page.Shell, page: page, Tools: page.Tools, Router: r, Runs: runs, Decide: dec}
}

func (h TestPanelHandler) TestPage(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.cursor(c, true)
	if err != nil {
		return err
	}
	ci, err := h.forCaller(c, c.Param("id"))
	if err != nil {
		return err
	}
	it := ci.Item
	tv := h.testView(c, it, "form", nil, nil)
	if id := c.QueryParam("case"); id != "" {
		tc, err := h.Tools.TestCase(ctx, it.ID, id)
		if err != nil {
			return err
		}
		args, held := ci.shownArgs(tc.Arguments)
		tv = h.testView(c, it, "form", withoutMasked(tc.Arguments, args), nil)
		tv.CaseName, tv.Expect, tv.ExpectTxt = tc.Name, tc.Expect, tc.ExpectText
		if held {
			tv.Notice = "This case holds a value for a parameter that is now secret: it is not shown, and its field is left empty. " +
				"Save the case again to drop it (the case's own Run still sends it)."
		}
	}
	return h.renderTest(c, ci, tv, true, last) // which lists the cases
}

// callerItem is a tool as its test panel shows it: its input schema without the
// parameters its configuration fixes (the router adds their values, and refuses another
// value for one), which the workspace lists instead.
type callerItem struct {
	tools.Item
	fixed []views.FixedParam
	// secret lists where the tool's current schema (fixed parameters included) marks
	// an argument secret (tools.SecretArgNames), as the export masks saved cases by.
	secret []string
}

// shownArgs is a saved case's arguments as the panel may show them: the values the
// tool's current schema marks secret masked (a case saved before its parameter became
// writeOnly still holds one, and every tool.view holder sees the panel), and whether
// any was.
func (ci callerItem) shownArgs(args json.RawMessage) (json.RawMessage, bool) {
	shown := tools.MaskArgs(args, ci.secret)
	return shown, !bytes.Equal(shown, args)
}

// withoutMasked is orig with each value that masked (tools.MaskArgs of orig) masks
// left out: a form field left empty rather than filled with the mask, which a Save
// would then store. An array's masked element becomes null, keeping the others' places.
// Anything it cannot pair up is masked's, never orig's.
func withoutMasked(orig, masked json.RawMessage) json.RawMessage {
	if bytes.Equal(orig, masked) {
		return orig
	}
	isMask := func(v json.RawMessage) bool {
		var s string
		return json.Unmarshal(v, &s) == nil && s == usage.Mask
	}
	var om, mm map[string]json.RawMessage
	if json.Unmarshal(orig, &om) == nil && json.Unmarshal(masked, &mm) == nil && om != nil && mm != nil {
		out := make(map[string]json.RawMessage, len(mm))
		for k, mv := range mm {
			switch ov, ok := om[k]; {
			case !ok:
				out[k] = mv
			case isMask(mv) && !isMask(ov):
				// left out
			default:
				out[k] = withoutMasked(ov, mv)
			}
		}
		if b, err := json.Marshal(out); err == nil {
			return b
		}
		return masked
	}
	var oa, ma []json.RawMessage
	if json.Unmarshal(orig, &oa) == nil && json.Unmarshal(masked, &ma) == nil && len(oa) == len(ma) && ma != nil {
		out := make([]json.RawMessage, len(ma))
		for i, mv := range ma {
			if isMask(mv) && !isMask(oa[i]) {
				out[i] = json.RawMessage("null")
			} else {
				out[i] = withoutMasked(oa[i], mv)
			}
		}
		if b, err := json.Marshal(out); err == nil {
			return b
		}
	}
	return masked
}

// forCaller reads tool id for the test panel (callerItem). The fixed values are shown
// only to who may see a tool's configuration (tool.inspect); others see the names.
func (h TestPanelHandler) forCaller(c echo.Context, id string) (callerItem, error) {
	if !uuidtext.Canonical(id) {
		return callerItem{}, tools.ErrNotFound // an id, as the page's address holds (Target also takes names)
	}
	// The router's own read of a tool: the item and its configuration in one query.
	tg, err := h.Tools.Target(c.Request().Context(), id)
	if err != nil {
		return callerItem{}, err
	}
	names, values := tg.Configuration().Declared(tg.InputSchema).FixedParams(tg.InputSchema) // as the router sends them
	ci := callerItem{Item: tg.Item, secret: tools.SecretArgNames(tg.InputSchema)}
	ci.InputSchema = tools.CallerSchema(tg.InputSchema, names)
	inspect := PrincipalOf(c).Can(auth.PermToolInspect)
	for i, n := range names {
		fp := views.FixedParam{Name: n, Value: values[i]}
		switch {
		case !inspect:
			fp.Value, fp.Why = "", "set by the tool's configuration"
		case fp.Value == "":
			fp.Why = "a secret value"
		}
		ci.fixed = append(ci.fixed, fp)
	}
	return ci, nil
}

// testFragment reports whether renderTest answers with the workspace alone.
func testFragment(c echo.Context, page bool) bool {
	return !page && c.Request().Header.Get("HX-Request") == "true"
}

// cursor is the event cursor the whole page renderTest answers with follows from, read
// before the tool so that a change landing in between is replayed rather than lost
// (dashboard.go). The workspace alone follows nothing: none is read for it.
func (h TestPanelHandler) cursor(c echo.Context, page bool) (int64, error) {
	if testFragment(c, page) {
		return 0, nil
	}
	return h.Events.LatestID(c.Request().Context())
}

// renderTest answers htmx with the workspace alone and a browser with the whole page,
// which follows events after last (cursor).
func (h TestPanelHandler) renderTest(c echo.Context, ci callerItem, tv views.ToolTest, page bool, last int64) error {
	it := ci.Item
	tv.Fixed = ci.fixed
	if testFragment(c, page) {
		return render(c, http.StatusOK, views.TestWorkspace(toolCard(it), tv))
	}
	if err := h.fillCases(c, ci, &tv); err != nil {
		return err
	}
	v := h.page.toolPageAt(c, it, views.ToolTabTest, last)
	v.Test = &tv
	return render(c, http.StatusOK, views.Tool(v))
}

// testView builds the workspace for arguments args shown in mode.
func (h TestPanelHandler) testView(c echo.Context, it tools.Item, mode string, args json.RawMessage, errs *verr.Error) views.ToolTest {
	p := PrincipalOf(c)
	r := h.riskOf(c, it, args)
	tv := views.ToolTest{Action: testURL(it.ID), Mode: mode, Errors: errs, Risk: string(r.Level), RiskWhy: r.Why,
		Phrase: router.Phrase(it.QualifiedName()), CanSave: p.Can(auth.PermToolConfigure)}
	if mode == "json" {
		tv.JSON = indentJSON(args)
		if tv.JSON == "" {
			tv.JSON = "{}"
		}
	} else {
		tv.Form = form.Build(it.InputSchema, args)
		if tv.Form.JSONOnly {
			tv.Mode, tv.JSON = "json", indentJSON(args)
		}
	}
	tv.CanRun, tv.CannotRun = h.mayRun(c, it)
	tv.Verifies = p.Can(auth.PermToolEnable) && toolstate.Allowed(it.Status, toolstate.Testing)
	if tv.CanRun && r.Level != risk.Low {
		if v := h.mayConfirm(c, it, r.Level); !v.ok {
			tv.CanRun, tv.CannotRun, tv.NeedsApprover = false, v.why, v.needsApprover
		}
	}
	return tv
}

// riskOf is the level of a call of it with args, as the router will rate it (the
// tool's own level when the router cannot say).
func (h TestPanelHandler) riskOf(c echo.Context, it tools.Item, args json.RawMessage) risk.Decision {
	if h.Router == nil {
		return it.Risk()
	}
	d, err := h.Router.RiskOf(c.Request().Context(), it.ID, args)
	if err != nil {
		return it.Risk()
	}
	return d
}

// runVerdict is whether the caller may run a call, why not, and, when another person
// must approve it instead, why (the workspace then offers to ask for that approval).
type runVerdict struct {
	ok                 bool
	why, needsApprover string
}

// mayConfirm asks package decide whether the caller may confirm their own run of a
// call of this level, as the router will; when another person must approve it, the
// workspace offers to ask for that approval instead of a Run that would be refused.
func (h TestPanelHandler) mayConfirm(c echo.Context, it tools.Item, level risk.Level) runVerdict {
	p := PrincipalOf(c)
	vetting := false
	if level == risk.High && p.Can(auth.PermToolEnable) { // decide reads Vetting for HIGH only
		var err error
		if vetting, err = h.Tools.Vetting(c.Request().Context(), it.ID, it.Status); err != nil {
			h.Logger.Warn("handlers: could not read whether a tool was ever enabled", "tool", it.ID, "err", err)
		}
	}
	_, err := h.Decide.Check(c.Request().Context(), decide.Decision{Actor: ActorOf(c), Role: p.User.Role,
		Requester: p.User.ID, Level: level, Verb: "run a " + string(level) + "-risk tool",
		Vetting: vetting})
	fe, _ := fault.As(err)
	forbidden := fe != nil && fe.Kind == fault.KindForbidden
	switch {
	case forbidden && decide.NeedsOther(err) && it.Status == "enabled" && p.Can(auth.PermExecutionCreate):
		return runVerdict{why: "Another person must approve a run of this tool: use Ask for approval.", needsApprover: httperr.Sentence(fe.Message)}
	case forbidden:
		return runVerdict{why: httperr.Sentence(fe.Message)}
	case err != nil:
		h.Logger.Warn("handlers: could not ask who may confirm a run", "tool", it.ID, "err", err)
	}
	return runVerdict{ok: true}
}

// mayRun says before a run why it would be refused (mayRunAs for the caller).
func (h TestPanelHandler) mayRun(c echo.Context, it tools.Item) (bool, string) {
	p := PrincipalOf(c)
	ok, why, err := mayRunAs(c.Request().Context(), h.Router, p, ActorOf(c), it)
	if err != nil {
		h.Logger.Warn("handlers: could not ask whether the caller may use a tool", "tool", it.ID, "err", err)
		return true, "" // the router says it at the run
	}
	return ok, why
}

// mayRunAs is canRun and the router's permission rule (the role's tool.use, or the
// person's own rule for the tool) for actor, whom p describes: whether a run would
// pass them, and why not. On an error it says yes: the router decides at the run.
func mayRunAs(ctx context.Context, rt *router.Router, p *auth.Principal, actor audit.Actor, it tools.Item) (bool, string, error) {
	if ok, why := canRun(p, it); !ok || rt == nil {
		return ok, why, nil
	}
	ok, err := rt.MayUse(ctx, actor, p.User.Role, it.ID)
	if err != nil || ok {
		return true, "", err
	}
	return false, "You may not use this tool; ask an administrator for access.", nil
}

// canRun mirrors the router's first checks on the tool's state.
func canRun(p *auth.Principal, it tools.Item) (bool, string) {
	switch {
	case !it.Available:
		return false, "Its server no longer offers this tool."
	case it.Status == "enabled":
		return true, ""
	case !p.Can(auth.PermToolEnable):
		return false, "Only people who may enable tools can test a tool that is not enabled."
	case router.Testable(it.Status):
		return true, ""
	}
	return false, fmt.Sprintf("A tool that is %s cannot be run.", it.Status)
}

// fillCases lists the saved cases, each with the level of a call with its arguments
// and whether the caller may run it (what the workspace's Run would say for those
// arguments); Run all is offered when every case may run, and asks for what any needs.
// A case's arguments are shown with what the tool's schema now marks secret masked.
func (h TestPanelHandler) fillCases(c echo.Context, ci callerItem, tv *views.ToolTest) error {
	it := ci.Item
	cs, err := h.Tools.TestCases(c.Request().Context(), it.ID)
	if err != nil {
		return err
	}
	tv.Cases = tv.Cases[:0]
	may, why := h.mayRun(c, it)
	byLevel := map[risk.Level]runVerdict{}
	tv.CasesCanRun, tv.CasesMedium, tv.CasesHigh = may, false, false
	for _, tc := range cs {
		level := h.riskOf(c, it, tc.Arguments).Level
		v, seen := byLevel[level]
		if !seen {
			v = runVerdict{ok: may, why: why}
			if may && level != risk.Low {
				if v = h.mayConfirm(c, it, level); v.needsApprover != "" {
					v.why = "Another person must approve a run with these arguments: load the case and use Ask for approval."
				}
			}
			byLevel[level] = v
		}
		tv.CasesCanRun = tv.CasesCanRun && v.ok
		tv.CasesMedium = tv.CasesMedium || level == risk.Medium
		tv.CasesHigh = tv.CasesHigh || level == risk.High
		shown, held := ci.shownArgs(tc.Arguments)
		vc := views.TestCase{ID: tc.ID, Name: tc.Name, Arguments: string(shown), HeldSecret: held, Expect: tc.Expect, ExpectText: tc.ExpectText,
			LastRun: tc.LastRunAt, LastPassed: tc.LastPassed, LastMsg: tc.LastMessage, Risk: string(level), CanRun: v.ok,
			LoadURL: testURL(it.ID) + "?case=" + url.QueryEscape(tc.ID), RunURL: testURL(it.ID) + "/cases/" + tc.ID + "/run",
			DeleteURL: testURL(it.ID) + "/cases/" + tc.ID + "/delete"}
		if may && !v.ok {
			vc.CannotRun = v.why // this case's own reason; the tool's is said once, at Run
		}
		if tc.LastDurationMS != nil {
			vc.LastMS = float64(*tc.LastDurationMS)
		}
		tv.Cases = append(tv.Cases, vc)
	}
	tv.CasesWithheld = may && !tv.CasesCanRun
	return nil
}

// workspaceArgs reads the workspace's form: the form values, its mode ("form" or
// "json") and the arguments it holds (readArgs).
func workspaceArgs(c echo.Context, it tools.Item) (url.Values, string, json.RawMessage, *verr.Error, error) {
	f, err := c.FormParams()
	if err != nil {
		return nil, "", nil, nil, err
	}
	mode := f.Get("mode")
	if mode != "json" {
		mode = "form"
	}
	args, errs := readArgs(it, mode, f)
	return f, mode, args, errs, nil
}

// readArgs reads the arguments the workspace holds, from the form or the JSON editor.
func readArgs(it tools.Item, mode string, f url.Values) (json.RawMessage, *verr.Error) {
	if mode != "json" {
		return form.Decode(it.InputSchema, f)
	}
	text := strings.TrimSpace(f.Get("arguments_json"))
	if text == "" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &obj); err != nil || obj == nil {
		msg := "must be a JSON object"
		if err != nil {
			msg = "is not valid JSON: " + err.Error()
		}
		return json.RawMessage(text), &verr.Error{Fields: []verr.Field{{Field: "", Message: msg}}}
	}
	if ptr, why, bad := textcheck.JSON([]byte(text)); bad {
		// PostgreSQL refuses such text where the run is recorded: said here, not as a 500.
		return json.RawMessage(text), &verr.Error{Fields: []verr.Field{{Field: ptr, Message: ptr + ": " + why}}}
	}
	if ptr, dup := textcheck.DuplicateKey([]byte(text)); dup {
		return json.RawMessage(text), &verr.Error{Fields: []verr.Field{{Field: ptr, Message: ptr + " " + textcheck.WhyDuplicate}}}
	}
	return json.RawMessage(text), nil
}

// TestPost handles the workspace's buttons: run, save as a case, switch between the
// form and JSON, add or remove array items. Input is never lost: every answer renders
// the arguments as they were sent.
func (h TestPanelHandler) TestPost(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.cursor(c, false)
	if err != nil {
		return err
	}
	ci, err := h.forCaller(c, c.Param("id"))
	if err != nil {
		return err
	}
	it := ci.Item
	f, mode, args, errs, err := workspaceArgs(c, it)
	if err != nil {
		return err
	}
	action := f.Get("_action")
	if edit := f.Get("_edit"); edit != "" {
		action = "edit"
	}
	keep := func(tv *views.ToolTest) {
		tv.Confirm, tv.Typed = f.Get("confirm") == "1", f.Get("phrase")
		tv.CaseName, tv.Expect, tv.ExpectTxt = f.Get("case_name"), f.Get("expect"), f.Get("expect_text")
	}
	var tv views.ToolTest
	// kept shows the form as it was sent, where the arguments cannot (form.BuildFrom).
	kept := mode == "form"
	switch action {
	case "edit":
		op, ptr, _ := strings.Cut(f.Get("_edit"), ":")
		if errs != nil && op == "remove" {
			// The arguments leave out what could not be read, so their items would not
			// line up with the form's: the item is removed from the form as sent, as a
			// map row is (what could not be read keeps its place, or goes with it).
			op = form.OpRemoveRow
		}
		if op == form.OpAddRow || op == form.OpRemoveRow {
			// Map rows: the edit is made to the form as sent, whose rows may hold keys the
			// arguments cannot (empty, or used twice); errors wait for the next run.
			next, err := form.EditRows(it.InputSchema, f, op, ptr)
			if err != nil {
				tv = h.testView(c, it, mode, args, verr.New(ptr, err.Error()).(*verr.Error))
				break
			}
			f = next
			args, _ = readArgs(it, mode, f)
			tv = h.testView(c, it, mode, args, nil)
			break
		}
		if errs != nil && errorsWithin(errs, ptr) {
			// An item added to an array with an item that could not be read would
			// shift the rest: the form comes back as sent, with what to fix first.
			tv = h.testView(c, it, mode, args, errs)
			break
		}
		if op == "remove" {
			// The button names the item's inputs' path; the arguments know it by its pointer.
			if p, ok := form.PointerAt(it.InputSchema, args, f, ptr); ok {
				ptr = p
			}
		}
		next, err := form.EditArray(it.InputSchema, args, op, ptr)
		if err != nil {
			tv = h.testView(c, it, mode, args, verr.New(ptr, err.Error()).(*verr.Error))
		} else {
			// The items after a removed one move up, so the form as sent no longer lines up
			// with them; an added item is new, and the rest of the form is as it was sent.
			tv, kept, args = h.testView(c, it, mode, next, nil), op != "remove", next
		}
	case "mode:json", "mode:form":
		to := strings.TrimPrefix(action, "mode:")
		switch {
		case errs != nil && mode == "json":
			tv = h.testView(c, it, mode, args, errs) // fix the JSON before the form can show it
			tv.JSON = f.Get("arguments_json")
		case errs != nil && to == "json":
			// The JSON would leave out what could not be read: the form as sent, with
			// what to fix before it can be shown as JSON.
			tv = h.testView(c, it, mode, args, errs)
			tv.Notice = "Fix the marked fields first: as JSON, what the form could not read would be lost."
		default:
			tv = h.testView(c, it, to, args, nil)
		}
	case "save":
		if !PrincipalOf(c).Can(auth.PermToolConfigure) {
			return ErrForbidden
		}
		tv = h.testView(c, it, mode, args, errs)
		if errs == nil {
			tc, err := h.Tools.SaveTestCase(ctx, ActorOf(c), it.ID, tools.TestCase{Name: f.Get("case_name"), Arguments: args,
				Expect: f.Get("expect"), ExpectText: f.Get("expect_text")})
			var ve *verr.Error
			switch {
			case errors.As(err, &ve):
				tv.Errors = ve
			case err != nil:
				return err
			default:
				tv.Notice = "Saved the test case “" + tc.Name + "”."
			}
		}
	case "request":
		if !PrincipalOf(c).Can(auth.PermExecutionCreate) {
			return ErrForbidden
		}
		tv = h.testView(c, it, mode, args, errs)
		if errs == nil {
			ex, err := h.Executions.Create(ctx, callerOf(c), executions.Input{Plan: &executions.Request{
				Steps: []executions.RequestStep{{Tool: it.QualifiedName(), Arguments: args}}}})
			var ve *verr.Error
			switch {
			case errors.As(err, &ve):
				tv.Errors = ownStep(ve) // at the fields, as Run shows them
			case err != nil:
				return err
			default:
				setFlash(c, "success", "Asked for approval: the call runs once someone who may approve it does.", h.SecureCookies)
				to := "/executions/" + ex.ID
				if c.Request().Header.Get("HX-Request") == "true" {
					c.Response().Header().Set("HX-Redirect", to)
					return c.NoContent(http.StatusOK)
				}
				return c.Redirect(http.StatusSeeOther, to)
			}
		}
	case "run", "": // "" is a form submitted with Enter, no button named
		tv = h.testView(c, it, mode, args, errs)
		if errs == nil {
			if tv.Result, tv.Errors, err = h.startRun(c, it, args, f); err != nil {
				return err
			}
			// Refused for want of the box ticked or the phrase typed: said at that control
			// (where the focus goes), not as a failed run.
			// Only a person's run with the box left empty (or no phrase): anything else keeps
			// the router's reason (an API token confirms nothing, a wrong phrase).
			missing := (tv.Risk == "medium" && f.Get("confirm") != "1") || (tv.Risk == "high" && tv.NeedsApprover == "" && f.Get("phrase") == "")
			if r := tv.Result; r != nil && r.Code == router.CodeApprovalRequired && missing && ActorOf(c).Kind == audit.ActorUser {
				tv.ConfirmError = "Tick this box to confirm the call, then run it again."
				if tv.Risk == "high" {
					tv.ConfirmError = "Type the phrase exactly as shown to run the call."
				}
				tv.Result = nil
			}
		}
	default:
		// A button this page does not have (a mistyped or stale one) must not run the tool.
		return verr.New("_action", "must be run, save, request, mode:form or mode:json")
	}
	if tv.Result == nil {
		// A mode switch, an edit or a saved case while a run goes on keeps its panel.
		if tv.Result, err = h.liveRun(c, it.ID, f.Get("_run"), f.Get("_run_replica")); err != nil {
			return err
		}
	}
	keep(&tv)
	if kept && tv.Mode == "form" && !tv.Form.JSONOnly {
		tv.Form = form.BuildFrom(it.InputSchema, args, f)
	}
	if mode == "json" && tv.Mode == "json" && action != "mode:json" && errs != nil {
		tv.JSON = f.Get("arguments_json")
	}
	return h.renderTest(c, ci, tv, false, last)
}

// ownStep is a plan's errors about its one step as the workspace shows them: those at
// the step's arguments at the arguments' own fields, the rest (the tool) at the top.
func ownStep(ve *verr.Error) *verr.Error {
	out := &verr.Error{}
	for _, f := range ve.Fields {
		const args = "/steps/0/arguments"
		switch {
		case f.Field == args || strings.HasPrefix(f.Field, args+"/"):
			f.Field = strings.TrimPrefix(f.Field, args)
		case f.Field == "/steps/0" || strings.HasPrefix(f.Field, "/steps/0/"):
			f.Field = ""
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}

// TestRisk answers a change of the workspace's arguments (POST /tools/:id/test/risk):
// the approval part for the level of a call with them, and the Run button as it allows,
// so a built-in file read shows no phrase to type and a write shows one before Run.
// The box and the phrase keep what was entered.
func (h TestPanelHandler) TestRisk(c echo.Context) error {
	ci, err := h.forCaller(c, c.Param("id"))
	if err != nil {
		return err
	}
	// What is wrong with the arguments is said at Run.
	f, mode, args, _, err := workspaceArgs(c, ci.Item)
	if err != nil {
		return err
	}
	tv := h.testView(c, ci.Item, mode, args, nil)
	live, err := h.liveRun(c, ci.Item.ID, f.Get("_run"), f.Get("_run_replica"))
	if err != nil {
		return err
	}
	if live != nil && live.Running {
		tv.Result = live // Run stays off until the run ends
	}
	if tv.ApprovalShown() == f.Get("_approval_shown") {
		return c.NoContent(http.StatusNoContent) // htmx swaps nothing
	}
	tv.Confirm, tv.Typed = f.Get("confirm") == "1", f.Get("phrase")
	return render(c, http.StatusOK, views.TestRisk(toolCard(ci.Item), tv))
}

// testCall is the router call of a test panel run.
func testCall(c echo.Context, it tools.Item, args json.RawMessage, f url.Values) router.Call {
	p := PrincipalOf(c)
	return router.Call{Tool: it.ID, Arguments: args, Actor: ActorOf(c), Role: p.User.Role, Source: router.SourceTestPanel,
		Test: p.Can(auth.PermToolEnable), Approval: router.Approval{Confirmed: f.Get("confirm") == "1", Phrase: f.Get("phrase")}}
}

// startRun starts the call on its own topic and waits a moment for it; a refusal of the
// arguments comes back as field errors for the form or the JSON editor, which show each
// one where it belongs, so the result panel does not repeat them.
func (h TestPanelHandler) startRun(c echo.Context, it tools.Item, args json.RawMessage, f url.Values) (*views.TestResult, *verr.Error, error) {
	// Taken before the run starts, every event of the run comes after it: a page that
	// subscribes late is replayed all of them.
	since, err := h.Events.LatestID(c.Request().Context())
	if err != nil {
		return nil, nil, err
	}
	call := testCall(c, it, args, f)
	call.ID = uuid.NewString()
	call.Topic = TestRunTopic(call.ID, h.Runs.Replica)
	run := h.Runs.Start(call, it.ID)
	run.Wait(testWait)
	res := runResult(it.ID, run, since)
	var fields *verr.Error
	if res.Code == router.CodeInvalidArguments && len(res.Details) > 0 {
		fields = &verr.Error{Fields: res.Details}
		res.Message, res.Details = "The tool was not called: fix the arguments marked in the form.", nil
		if f.Get("mode") == "json" {
			res.Message = "The tool was not called: fix the arguments as the errors under the JSON editor say."
		}
	}
	return &res, fields, nil
}

// runResult is what a run shows now; since is the newest event id the caller saw
// before it read the run (see views.TestResult).
func runResult(toolID string, run *router.Run, since int64) views.TestResult {
	progress, res, err, ended := run.State()
	if !ended {
		out := views.TestResult{CallID: run.ID, Running: true, Replica: run.Replica, Topic: TestRunTopic(run.ID, run.Replica), Since: since,
			PollURL: runURL(toolID, run.ID, "", run.Replica), CancelURL: runURL(toolID, run.ID, "/cancel", run.Replica),
			Elapsed: time.Since(run.Started)}
		for _, p := range progress {
			tp := views.TestProgress{Message: p.Message, Percent: -1}
			if p.Total > 0 {
				tp.Percent = int(100 * p.Progress / p.Total)
				tp.Step = fmt.Sprintf("%g of %g", p.Progress, p.Total)
			}
			out.Progress = append(out.Progress, tp)
		}
		return out
	}
	return resultView(run.ID, res, err)
}

// resultView turns a router outcome into the result panel.
func resultView(callID string, res *router.Result, err error) views.TestResult {
	out := views.TestResult{CallID: callID}
	if err != nil {
		var re *router.Error
		if !errors.As(err, &re) {
			out.Status, out.Code, out.Message = "failed", "internal", "Something went wrong on our side; it has been logged."
			return out
		}
		out.Status, out.Code, out.Message = "failed", re.Code, re.Message
		if re.Code == router.CodeCancelled {
			out.Status = "cancelled"
		}
		if fs, ok := re.Details.([]verr.Field); ok {
			out.Details = fs
		}
		return out
	}
	out.Status, out.DurationMS, out.Attempts = "success", res.DurationMS, res.Attempts
	if res.IsError {
		out.Status = "tool_error"
	}
	for _, c := range res.Content {
		out.Output = append(out.Output, outputView(c))
	}
	if len(res.StructuredContent) > 0 {
		out.Structured = indentJSON(res.StructuredContent)
	}
	return out
}

func outputView(c router.Content) views.TestOutput {
	o := views.TestOutput{Type: c.Type, Text: c.Text, MIMEType: c.MIMEType, URI: c.URI, Name: c.Name}
	if c.Size != nil {
		o.Size = fmt.Sprintf("%d bytes", *c.Size)
	}
	switch c.Type {
	case "text":
		if t := strings.TrimSpace(c.Text); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			if pretty := indentJSON(json.RawMessage(t)); pretty != t && json.Valid([]byte(t)) {
				o.Type, o.Text = "json", pretty
			}
		}
	case "image", "audio":
		prefix := c.Type + "/"
		if strings.HasPrefix(c.MIMEType, prefix) && !strings.ContainsAny(c.MIMEType, ";,\"' ") {
			o.DataURL = "data:" + c.MIMEType + ";base64," + c.Data
		} else {
			o.Type, o.Text = "text", fmt.Sprintf("(%s content of type %q, not shown)", c.Type, c.MIMEType)
		}
	case "resource":
		if c.Resource != nil {
			o.URI, o.MIMEType, o.Text = c.Resource.URI, c.Resource.MIMEType, c.Resource.Text
			if c.Resource.Blob != "" {
				o.Size = fmt.Sprintf("%d bytes (base64)", len(c.Resource.Blob))
			}
		}
	}
	return o
}

// liveRun is the caller's run callID of tool toolID as its panel shows it now (running,
// or how it ended), or nil when there is none to show (no id, not theirs, forgotten).
// A run that another replica runs (replica) is shown running, and its panel asks that
// replica how it is: the first answer tells whether it is the caller's and still kept.
func (h TestPanelHandler) liveRun(c echo.Context, toolID, callID, replica string) (*views.TestResult, error) {
	if callID == "" {
		return nil, nil
	}
	since, err := h.Events.LatestID(c.Request().Context())
	if err != nil {
		return nil, err
	}
	run, ok := h.Runs.Get(callID, router.OwnerOf(router.Call{Actor: ActorOf(c)}))
	if ok && run.ToolID == toolID {
		r := runResult(toolID, run, since)
		return &r, nil
	}
	if ok || replica == "" || replica == h.Runs.Replica || uuid.Validate(callID) != nil || uuid.Validate(replica) != nil {
		return nil, nil
	}
	return &views.TestResult{CallID: callID, Running: true, Replica: replica, Topic: TestRunTopic(callID, replica), Since: since,
		PollURL: runURL(toolID, callID, "", replica), CancelURL: runURL(toolID, callID, "/cancel", replica)}, nil
}

// runURL is the address of run callID of tool toolID (then what), at replica.
func runURL(toolID, callID, what, replica string) string {
	return views.AtReplica(testURL(toolID)+"/runs/"+callID+what, replica)
}

// ownRun is the caller's run named in the path, or false when it is not kept (it ended
// long ago, the server restarted) or not theirs.
func (h TestPanelHandler) ownRun(c echo.Context) (*router.Run, bool) {
	run, ok := h.Runs.Get(c.Param("call"), router.OwnerOf(router.Call{Actor: ActorOf(c)}))
	return run, ok && run.ToolID == c.Param("id")
}

// renderPoll answers the running panel (its fallback poll, its Cancel) with res; once the run
// has ended, the Run button that was disabled while it ran comes back with it.
func (h TestPanelHandler) renderPoll(c echo.Context, res views.TestResult) error {
	var run views.TestRunButton
	if !res.Running {
		it, err := h.Tools.Get(c.Request().Context(), c.Param("id"))
		if err != nil {
			return err
		}
		run.CanRun, run.CannotRun = h.mayRun(c, it)
	}
	return render(c, http.StatusOK, views.TestPoll(res, run))
}

// runGone answers for a run that is not kept: the panel shows it as ended (htmx swaps
// no error answer, so it would poll no more and keep Run disabled); others get a 404.
func (h TestPanelHandler) runGone(c echo.Context) error {
	const msg = "This run is over and no longer kept; run the tool again."
	if c.Request().Header.Get("HX-Request") != "true" {
		return echo.NewHTTPError(http.StatusNotFound, msg)
	}
	return h.renderPoll(c, views.TestResult{Status: "failed", Code: "not_found", Message: msg})
}

// TestRun answers the running panel when it asks how the run is: progress, or the
// result once it ended. The panel follows its run over the websocket; app.js asks here
// only as a fallback, while the page's socket is not connected (or once after it
// reconnected, in case the server forgot the run meanwhile).
func (h TestPanelHandler) TestRun(c echo.Context) error {
	run, ok := h.ownRun(c)
	if !ok {
		return h.runGone(c)
	}
	run.Wait(250 * time.Millisecond) // answer as soon as it ends, within a poll's span
	return h.renderRun(c, run)
}

// renderRun answers the running panel with its run as it is now.
func (h TestPanelHandler) renderRun(c echo.Context, run *router.Run) error {
	since, err := h.Events.LatestID(c.Request().Context())
	if err != nil {
		return err
	}
	return h.renderPoll(c, runResult(c.Param("id"), run, since))
}

// TestCancel cancels a run (the server is told) and shows how it ended.
func (h TestPanelHandler) TestCancel(c echo.Context) error {
	run, ok := h.ownRun(c)
	if !ok {
		return h.runGone(c)
	}
	run.Cancel()
	run.Wait(5 * time.Second)
	return h.renderRun(c, run)
}

// TestCaseRun runs one saved case and records its outcome.
func (h TestPanelHandler) TestCaseRun(c echo.Context) error {
	return h.runCases(c, c.Param("case"))
}

// TestCasesRun runs every saved case in order; run by someone who may enable tools on a
// tool not yet enabled, it verifies the tool (testing → verified | failed).
func (h TestPanelHandler) TestCasesRun(c echo.Context) error {
	return h.runCases(c, "")
}

func (h TestPanelHandler) runCases(c echo.Context, only string) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	cs, err := h.Tools.TestCases(ctx, it.ID)
	if err != nil {
		return err
	}
	f, err := c.FormParams()
	if err != nil {
		return err
	}
	if only != "" {
		cs = slices.DeleteFunc(cs, func(tc tools.TestCase) bool { return tc.ID != only })
	}
	results, err := h.Router.RunCases(ctx, testCall(c, it, nil, f), cs)
	if stopped := (*router.CasesStopped)(nil); errors.As(err, &stopped) && len(results) > 0 {
		return h.casesStopped(c, it, results, stopped)
	}
	if err != nil {
		return h.redirectWithOutcome(c, err, nil, testURL(it.ID)) // not a test outcome: nothing ran
	}
	if len(results) == 0 {
		return echo.NewHTTPError(http.StatusNotFound, "No such test case.")
	}
	verify := only == "" && PrincipalOf(c).Can(auth.PermToolEnable)
	// The cases started against the definition read above; if discovery changed it
	// meanwhile, the run must not verify the new one.
	rec, err := h.Tools.RecordTestRun(ctx, ActorOf(c), it.ID, it.DefinitionHash, results, verify, PrincipalOf(c).Can(auth.PermToolOverride))
	passed := 0
	for _, r := range results {
		if r.Passed {
			passed++
		}
	}
	return h.redirectWithOutcome(c, err, func() string {
		msg := fmt.Sprintf("%d of %d test cases passed.", passed, len(results))
		switch {
		case verify && rec.DefinitionChanged:
			msg += " The tool's definition changed while they ran, so they did not verify it: run them again."
		case verify && rec.CasesChanged:
			msg += " The tool's cases changed while they ran (one was saved, added or deleted), so they did not verify it: run them again."
		case verify && rec.OverrideNeeded != "":
			msg += " The tool stays " + rec.Status + ": " + rec.OverrideNeeded + "."
		case verify && rec.Status != it.Status:
			msg += " The tool is now " + rec.Status + "."
		}
		return msg
	}, testURL(it.ID)+"#test-cases")
}

// casesStopped answers a run of cases that stopped part way: the cases that ran did
// reach the server (and are audited), so their outcomes are recorded, even when the
// browser went away; they verify nothing, since the rest did not run.
func (h TestPanelHandler) casesStopped(c echo.Context, it tools.Item, results []tools.CaseResult, stopped *router.CasesStopped) error {
	ctx := context.WithoutCancel(c.Request().Context())
	if _, err := h.Tools.RecordTestRun(ctx, ActorOf(c), it.ID, it.DefinitionHash, results, false, false); err != nil {
		return err
	}
	passed := 0
	for _, r := range results {
		if r.Passed {
			passed++
		}
	}
	outcome := fmt.Sprintf("%d of the %d that ran passed", passed, len(results))
	if len(results) == 1 {
		outcome = "the one that ran failed"
		if passed == 1 {
			outcome = "the one that ran passed"
		}
	}
	msg := httperr.Sentence(stopped.Message()) + " " + httperr.Sentence(outcome+"; a run that did not finish does not change the tool's state")
	setFlash(c, "error", msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, testURL(it.ID)+"#test-cases")
}

// TestCaseDelete removes a saved case.
func (h TestPanelHandler) TestCaseDelete(c echo.Context) error {
	err := h.Tools.DeleteTestCase(c.Request().Context(), ActorOf(c), c.Param("id"), c.Param("case"))
	return h.redirectWithOutcome(c, err, func() string { return "Deleted the test case." }, testURL(c.Param("id"))+"#test-cases")
}

// errorsWithin reports whether one of errs is at ptr or under it.
func errorsWithin(errs *verr.Error, ptr string) bool {
	for _, f := range errs.Fields {
		if f.Field == ptr || strings.HasPrefix(f.Field, ptr+"/") {
			return true
		}
	}
	return false
}
