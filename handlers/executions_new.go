package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/textcheck"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// New renders the empty form: a prompt, or a plan as JSON.
func (h ExecutionsHandler) New(c echo.Context) error {
	p := views.ExecutionNewPage{Mode: "prompt", Prompt: c.QueryParam("prompt")}
	return h.newPage(c, http.StatusOK, p)
}

func (h ExecutionsHandler) newPage(c echo.Context, status int, p views.ExecutionNewPage) error {
	p.Layout = h.layout(c, "New execution")
	page, err := h.Tools.List(c.Request().Context(), tools.Query{Status: []string{"enabled"}, Limit: execToolHints, Brief: true})
	if err != nil {
		return err
	}
	for _, t := range page.Items {
		desc := t.Description
		if r := []rune(desc); len(r) > 120 {
			desc = string(r[:120]) + "…"
		}
		p.Tools = append(p.Tools, views.ExecutionToolHint{ID: t.ID, Name: t.QualifiedName(), Description: desc, Risk: string(t.Risk().Level)})
	}
	p.MoreTools = page.NextCursor != ""
	return render(c, status, views.ExecutionNew(p))
}

// Create plans the prompt (or takes the JSON plan), stores it and shows it. Input the
// planner or the router refuses comes back on the form, as typed, with what is wrong.
func (h ExecutionsHandler) Create(c echo.Context) error {
	p := views.ExecutionNewPage{Mode: c.FormValue("mode"), Prompt: c.FormValue("prompt"), Plan: c.FormValue("plan")}
	var in executions.Input
	if p.Mode == "plan" {
		req, perr := parsePlanText(p.Plan)
		if perr != nil {
			p.Error = perr
			return h.newPage(c, http.StatusBadRequest, p)
		}
		in.Plan = req
	} else {
		p.Mode = "prompt"
		in.Prompt = p.Prompt
	}
	ex, err := h.Executions.Create(c.Request().Context(), callerOf(c), in)
	if err != nil {
		ie, status, ok := execInputError(p.Prompt, err)
		if !ok {
			return err
		}
		p.Error = ie
		return h.newPage(c, status, p)
	}
	msg := "Planned. It is low risk, so it was approved by policy and runs now."
	switch ex.Risk {
	case "medium":
		msg = "Planned. It is medium risk: it runs once someone who may approve executions confirms it."
	case "high":
		msg = "Planned. It is high risk: it runs once someone who may approve executions types its confirmation phrase."
	}
	setFlash(c, "success", msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, "/executions/"+ex.ID)
}

// parsePlanText reads the JSON plan of the form; the error says where it is wrong.
func parsePlanText(text string) (*executions.Request, *views.ExecutionInputError) {
	if strings.TrimSpace(text) == "" {
		return nil, &views.ExecutionInputError{Message: `The plan is empty. Give it as {"steps": [{"tool": "server__tool", "arguments": {...}}]}, or write a prompt instead.`}
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var req executions.Request
	err := dec.Decode(&req)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("there is more after the plan's closing brace")
		}
	}
	if err == nil {
		if ptr, dup := textcheck.DuplicateKey([]byte(text)); dup {
			return nil, &views.ExecutionInputError{Message: "The plan gives the key " + ptr + " twice in the same object; each key may appear once."}
		}
		// "Tool" after "tool" would be read as the step's tool (the decoder matches keys
		// in any case, the last wins) while a person reads the first: refused, as the
		// API refuses it.
		if ptr, bad := textcheck.CaseClash([]byte(text), &req); bad {
			return nil, &views.ExecutionInputError{Message: "The plan's key " + ptr + ": " + textcheck.WhyCaseClash}
		}
		return &req, nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	msg := strings.TrimPrefix(err.Error(), "json: ")
	switch {
	case errors.As(err, &se):
		line, col := lineCol(text, se.Offset)
		msg = fmt.Sprintf("%s (line %d, column %d)", msg, line, col)
	case errors.As(err, &te):
		where := te.Field
		if where == "" {
			where = "the plan"
		}
		msg = fmt.Sprintf("%s must be %s, not %s", where, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "it ends too early: a brace or bracket is not closed"
	}
	return nil, &views.ExecutionInputError{Message: "The plan is not valid JSON of the documented shape: " + msg + "."}
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(s string, off int64) (int, int) {
	if off > int64(len(s)) {
		off = int64(len(s))
	}
	before := s[:off]
	line := strings.Count(before, "\n") + 1
	col := len([]rune(before[strings.LastIndex(before, "\n")+1:]))
	return line, max(col, 1)
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "a list"
	case "struct", "map":
		return "an object"
	case "string":
		return "a string"
	case "int", "int64":
		return "a whole number"
	}
	return k
}

// execInputError is what the form says about input Create refused, with its status;
// ok is false for errors that are not the person's to fix.
func execInputError(prompt string, err error) (*views.ExecutionInputError, int, bool) {
	nu, isNU := planner.NotUnderstoodIn(err)
	pe, _ := fault.As(err)
	var ve *verr.Error
	switch {
	case isNU:
		ie := &views.ExecutionInputError{Message: nu.Message}
		if nu.Fragment != "" && nu.Offset >= 0 && nu.Offset <= len(prompt) && strings.HasPrefix(prompt[nu.Offset:], nu.Fragment) {
			ie.Before, ie.Fragment, ie.After = prompt[:nu.Offset], nu.Fragment, prompt[nu.Offset+len(nu.Fragment):]
		}
		return ie, http.StatusUnprocessableEntity, true
	case pe != nil && pe.Code == executions.CodePlanner:
		// The planner failed, not the person: 502, with the form kept to try again.
		return &views.ExecutionInputError{Message: httperr.Sentence(pe.Message)}, http.StatusBadGateway, true
	case pe != nil && executions.PlannerRefused(err):
		// The model is busy or the person's rate is spent: the form kept to try again.
		return &views.ExecutionInputError{Message: httperr.Sentence(pe.Message)}, httperr.Status(pe.Kind), true
	case pe != nil && pe.Code == executions.CodeTooManyWaiting:
		// An API token with too many plans waiting: the form kept for when they are decided.
		return &views.ExecutionInputError{Message: httperr.Sentence(pe.Message)}, http.StatusConflict, true
	case errors.As(err, &ve):
		ie := &views.ExecutionInputError{Message: "The plan was not accepted; fix what is listed below."}
		for _, f := range ve.Fields {
			ie.Fields = append(ie.Fields, views.ExecutionFieldError{Path: f.Field, Message: f.Message})
		}
		return ie, http.StatusUnprocessableEntity, true
	}
	return nil, 0, false
}
