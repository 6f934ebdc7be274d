package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// The execution history (/executions), the approvals inbox (/approvals), the count of
// waiting approvals in the navigation, and their live updates over the executions
// topic. Deciding happens on an execution's own page (executions.go).

// executionListRow is an execution as the history and the inbox show it.
func executionListRow(ex *executions.Execution) views.ExecutionListRow {
	row := views.ExecutionListRow{ID: ex.ID, Title: ex.Title(), Prompt: ex.ShownPrompt(), Status: string(ex.Status), Risk: ex.Risk,
		RiskWhy: ex.RiskWhy, Requester: ex.RequesterName, CreatedAt: ex.CreatedAt, FinishedAt: ex.FinishedAt,
		ExpiresAt: ex.ExpiresAt, Error: ex.Error, Reason: ex.Reason}
	for _, st := range ex.Plan.Steps {
		if st.Display != "" {
			row.Steps = append(row.Steps, st.Display)
		}
	}
	if ex.Source == executions.SourceMCP {
		row.Client = "MCP client"
		if ex.Client != "" {
			row.Client += " " + ex.Client
		}
	}
	return row
}

// outdatedCursor says why a page link led to the first page: its cursor no longer reads.
const outdatedCursor = "That page link is out of date; this is the first page."

// onlyCursor reports whether err is a bad cursor and nothing else.
func onlyCursor(err error) bool {
	var ve *verr.Error
	return errors.As(err, &ve) && len(ve.Fields) == 1 && ve.For("cursor") != ""
}

// History renders the execution history: filters as a GET form (status, risk, only
// mine, search), keyset pages, bad filters said next to their fields (400).
func (h ExecutionsHandler) History(c echo.Context) error {
	ctx := c.Request().Context()
	// The cursor is read before the data, so an event that lands in between is replayed.
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	v := views.ExecutionsPage{Layout: h.layout(c, "Executions", executions.Topic), CanCreate: p.Can(auth.PermExecutionCreate),
		CanApprove: p.Can(auth.PermExecutionApprove)}
	v.Live.LastEventID = last
	for _, st := range executions.Statuses {
		v.Statuses = append(v.Statuses, views.Option{Value: string(st), Label: executionStatusWords(st)})
	}
	for _, l := range risk.Levels {
		v.Risks = append(v.Risks, views.Option{Value: string(l), Label: l.Label()})
	}
	qp := c.QueryParams()
	for _, s := range qp["status"] {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				v.Filter.Status = append(v.Filter.Status, part)
			}
		}
	}
	v.Filter.Risk, v.Filter.Q = qp.Get("risk"), strings.TrimSpace(qp.Get("q"))
	switch by := qp.Get("requested_by"); by {
	case "":
	case "me":
		v.Filter.Mine = true
	default:
		v.Filter.RequestedBy = by
	}
	v.HasFilter = len(v.Filter.Status) > 0 || v.Filter.Risk != "" || qp.Get("requested_by") != "" || v.Filter.Q != ""

	q, err := queryFrom(c)
	var page executions.Page
	if err == nil {
		page, err = h.Executions.List(ctx, q)
		if onlyCursor(err) {
			q.Cursor, v.Notice = "", outdatedCursor
			page, err = h.Executions.List(ctx, q)
		}
	}
	if fe, ok := formErrors(err); ok {
		v.Errors = fe
		return render(c, http.StatusBadRequest, views.Executions(v))
	}
	if err != nil {
		return err
	}
	for i := range page.Items {
		v.Rows = append(v.Rows, executionListRow(&page.Items[i]))
	}
	v.LiveRows = !v.HasFilter && q.Cursor == ""
	v.Keep = q.Limit // a live page keeps its size as new executions arrive
	if v.Keep == 0 {
		v.Keep = executions.DefaultLimit
	}
	if page.NextCursor != "" {
		v.NextURL = historyURL(qp, page.NextCursor)
	}
	if q.Cursor != "" {
		v.FirstURL = historyURL(qp, "")
	}
	return render(c, http.StatusOK, views.Executions(v))
}

// historyURL is the history with the filters of qp, at cursor.
func historyURL(qp url.Values, cursor string) string {
	out := url.Values{}
	for _, k := range []string{"status", "risk", "requested_by", "q", "limit"} {
		for _, val := range qp[k] {
			if val != "" {
				out.Add(k, val)
			}
		}
	}
	if cursor != "" {
		out.Set("cursor", cursor)
	}
	if len(out) == 0 {
		return "/executions"
	}
	return "/executions?" + out.Encode()
}

// ApprovalsInbox renders what waits for approval, newest first, each with a link to
// its page where it is decided.
func (h ExecutionsHandler) ApprovalsInbox(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	q := executions.Query{Status: []executions.Status{executions.AwaitingApproval}, Cursor: c.QueryParam("cursor")}
	page, err := h.Executions.List(ctx, q)
	notice := false
	if onlyCursor(err) {
		q.Cursor, notice = "", true
		page, err = h.Executions.List(ctx, q)
	}
	if err != nil {
		return err
	}
	v := views.ApprovalsPage{Layout: h.layout(c, "Approvals", executions.Topic), LiveItems: q.Cursor == ""}
	v.Live.LastEventID = last
	if notice && v.Flash == nil {
		v.Flash = &views.Flash{Kind: "info", Message: outdatedCursor}
	}
	for i := range page.Items {
		v.Items = append(v.Items, executionListRow(&page.Items[i]))
	}
	if page.NextCursor != "" {
		v.NextURL = "/approvals?" + url.Values{"cursor": {page.NextCursor}}.Encode()
	}
	if q.Cursor != "" {
		v.FirstURL = "/approvals"
	}
	return render(c, http.StatusOK, views.Approvals(v))
}

// approvalsBadge is the navigation's count of executions awaiting approval (see
// navBadges).
func (d *Shell) approvalsBadge(ctx context.Context) (*views.NavBadge, error) {
	if d.Executions == nil {
		return nil, nil
	}
	n, err := d.Executions.AwaitingCount(ctx)
	if err != nil {
		return nil, err
	}
	b := approvalsNavBadge(n)
	return &b, nil
}

func approvalsNavBadge(n int) views.NavBadge {
	label := fmt.Sprintf("%d plans await approval", n)
	if n == 1 {
		label = "1 plan awaits approval"
	}
	return views.NavBadge{ID: views.ApprovalsCountID, Count: n, Label: label}
}

// questionsNavBadge is the count of the viewer's open questions (user_collaboration)
// next to "Approvals", where they are answered too.
func questionsNavBadge(n int) views.NavBadge {
	label := fmt.Sprintf("%d questions from agents await your answer", n)
	if n == 1 {
		label = "1 question from an agent awaits your answer"
	}
	return views.NavBadge{ID: views.QuestionsCountID, Count: n, Label: label}
}

// executionStatusWords is a state as the filters name it.
func executionStatusWords(s executions.Status) string {
	w := strings.ReplaceAll(string(s), "_", " ")
	if s == executions.Success {
		w = "succeeded"
	}
	return strings.ToUpper(w[:1]) + w[1:]
}

// executionsParts renders an event of the executions topic for lists, the approvals
// inbox and the navigation's count. Every part is the same for every viewer; a page
// drops the parts whose target it does not have (app.js, tw-live).
func (l Live) executionsParts(ctx context.Context, ev events.Event) ([]templ.Component, error) {
	var p events.Execution // what every kind on executions.Topic carries first
	if err := ev.Decode(&p); err != nil {
		return nil, err
	}
	n, err := l.Executions.AwaitingCount(ctx)
	if err != nil {
		return nil, err
	}
	badge := views.LiveNavBadge(approvalsNavBadge(n))
	if p.ExecutionID == "" {
		return []templ.Component{badge}, nil
	}
	// The execution as it is now, not as the event saw it: a replayed event then shows
	// the present, and later events of the same execution change nothing back.
	ex, err := l.Executions.Get(ctx, p.ExecutionID)
	if errors.Is(err, executions.ErrNotFound) {
		return []templ.Component{badge}, nil
	}
	if err != nil {
		return nil, err
	}
	row := executionListRow(ex)
	// The table part comes first: the fragment is parsed as a template's content, where
	// a <tbody> or <tr> after any other element would be dropped (HTML's "in template"
	// insertion mode), while other elements after it are kept.
	var parts []templ.Component
	if events.PlanCreated.Is(ev) {
		// Its first event: the row is on no page yet.
		parts = append(parts, views.LiveExecutionNew(row))
	} else {
		parts = append(parts, views.LiveExecutionRow(row))
	}
	parts = append(parts, badge)
	switch {
	case ex.Status != executions.AwaitingApproval:
		parts = append(parts, views.LiveApprovalGone(ex.ID))
	case events.ApprovalRequested.Is(ev):
		parts = append(parts, views.LiveApprovalNew(row), views.LiveApprovalToast(row))
	}
	return parts, nil
}
