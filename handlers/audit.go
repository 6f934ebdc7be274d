package handlers

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// AuditHandler serves the audit browser (/audit, /audit/:id) and its API
// (/api/v1/audit...): filters, keyset pages, saved views, exports and checks of the
// chain. Everything it shows is what audit rows hold, which never holds a secret
// value (docs/security.md); it adds none.
type AuditHandler struct {
	*Shell
	Log *audit.Log
}

// auditGroupLabels name the action filter's groups.
var auditGroupLabels = map[string]string{"auth": "Sign-in, tokens, refused requests", "users": "Users", "servers": "Servers",
	"tools": "Tools", "calls": "Tool calls", "executions": "Executions", "approvals": "Approvals and grants", "secrets": "Secrets",
	"settings": "Settings", "audit": "The audit log itself", "other": "Other"}

// auditURL is /audit with the filter's query and extra parameters.
func auditURL(f audit.Filter, extra ...string) string {
	q := f.Query()
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	if len(q) == 0 {
		return "/audit"
	}
	return "/audit?" + q.Encode()
}

// auditTargetURL is the page of an entry's target, where there is one the viewer may open.
func auditTargetURL(p *auth.Principal, targetType, id string) string {
	if id == "" {
		return ""
	}
	esc := url.PathEscape(id)
	switch {
	case targetType == "tool" && p.Can(auth.PermToolView):
		return "/tools/" + esc
	case targetType == "server" && p.Can(auth.PermServerView):
		return "/servers/" + esc
	case targetType == "execution" && p.Can(auth.PermExecutionView):
		return "/executions/" + esc
	case targetType == "terminal" && p.Can(auth.PermTerminalView):
		return "/terminals/" + esc
	case targetType == "user" && p.Can(auth.PermUsers):
		return "/users"
	}
	return ""
}

// actorKindLabels name the actor kind filter's choices on the page.
var actorKindLabels = map[string]string{
	audit.ActorKindPerson: "A person (signed in or by token)",
	audit.ActorUser:       "A person, signed in",
	audit.ActorToken:      "An API token",
	audit.ActorSystem:     "Toolwarden itself",
	audit.ActorAnonymous:  "Not signed in (a failed sign-in)",
}

func auditRow(p *auth.Principal, r audit.Record) views.AuditRow {
	actor := r.ActorName
	switch {
	case r.ActorKind == audit.ActorSystem:
		actor = "Toolwarden" // not to be taken for a user named "system"
	case actor == "":
		actor = r.ActorKind
	}
	actorURL := ""
	if r.ActorName != "" {
		actorURL = "/audit?" + url.Values{"actor": {r.ActorName}, "actor_kind": {audit.ActorKindFilter(r.ActorKind)}}.Encode()
	}
	return views.AuditRow{ID: r.ID, URL: "/audit/" + strconv.FormatInt(r.ID, 10), At: r.At, Actor: actor, ActorName: r.ActorName, ActorKind: r.ActorKind, ActorURL: actorURL,
		Action: r.Action, Group: audit.ActionGroup(r.Action), TargetType: r.TargetType, TargetID: r.TargetID,
		TargetName: r.TargetName, TargetURL: auditTargetURL(p, r.TargetType, r.TargetID), Result: r.Result, RequestID: r.RequestID}
}

// List renders the browser: the filters of the URL (bad ones said next to their
// fields, 400), one page newest first, the person's saved views and the chain's status.
func (h AuditHandler) List(c echo.Context) error {
	page, status, err := h.page(c, c.QueryParams())
	if err != nil {
		return err
	}
	return render(c, status, views.Audit(page, views.AuditSaveForm{}))
}

// page is the browser for the filters of qp, and its status: 400 when a filter is bad.
func (h AuditHandler) page(c echo.Context, qp url.Values) (views.AuditPage, int, error) {
	ctx := c.Request().Context()
	// The cursor is read before the data, so an entry appended in between is announced.
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return views.AuditPage{}, 0, err
	}
	p := PrincipalOf(c)
	page := views.AuditPage{Layout: h.layout(c, "Audit log", audit.Topic), CanExport: p.Can(auth.PermAuditExport)}
	page.Live.LastEventID = last
	page.Filter = views.AuditFilter{Actor: qp.Get("actor"), ActorKind: qp.Get("actor_kind"), Action: qp.Get("action"), TargetType: qp.Get("target_type"),
		TargetID: qp.Get("target_id"), Result: qp.Get("result"), RequestID: qp.Get("request_id"), Q: qp.Get("q"),
		From: qp.Get("from"), To: qp.Get("to")}
	for _, g := range audit.Groups {
		page.Groups = append(page.Groups, views.Option{Value: g, Label: auditGroupLabels[g]})
	}
	for _, r := range audit.Results {
		page.Results = append(page.Results, views.Option{Value: r, Label: r})
	}
	for _, k := range audit.ActorKinds {
		page.ActorKinds = append(page.ActorKinds, views.Option{Value: k, Label: actorKindLabels[k]})
	}
	status := http.StatusOK
	f, err := audit.ParseFilter(qp)
	if err != nil && onlyCursor(err) {
		qp.Del("cursor")
		f, err = audit.ParseFilter(qp)
		page.Notice = outdatedCursor
	}
	if err != nil {
		fe, ok := formErrors(err)
		if !ok {
			return views.AuditPage{}, 0, err
		}
		page.Errors, status = fe, http.StatusBadRequest
	} else {
		// The list shows no payloads, which may be large: they are not read.
		list, err := h.Log.ListBrief(ctx, f)
		if err != nil && onlyCursor(err) {
			f.Cursor, page.Notice = 0, outdatedCursor
			list, err = h.Log.ListBrief(ctx, f)
		}
		// A search too broad to answer (too many matches, or past the time a page may
		// take) is said at the field to narrow, as a bad filter is; a log too busy to
		// answer a narrow one is the error page's 503, with Retry-After.
		if fe, ok := formErrors(err); ok {
			page.Errors, status = fe, http.StatusBadRequest
		} else if err != nil {
			return views.AuditPage{}, 0, err
		} else {
			page.Query = f.Query().Encode()
			page.ExportCSV = "/api/v1/audit/export?" + withFormat(f, audit.FormatCSV)
			page.ExportJSONL = "/api/v1/audit/export?" + withFormat(f, audit.FormatJSONL)
			page.List = h.results(p, f, list)
		}
	}
	if p.Kind == audit.ActorUser {
		vs, err := h.Log.Views(ctx, p.User.ID)
		if err != nil {
			return views.AuditPage{}, 0, err
		}
		current := f.Query().Encode()
		for _, v := range vs {
			u := "/audit"
			if v.Query != "" {
				u += "?" + v.Query
			}
			page.Views = append(page.Views, views.AuditSavedView{ID: v.ID, Name: v.Name, URL: u, Current: page.Errors == nil && v.Query == current})
		}
	}
	page.Chain, err = h.chain(c)
	if err != nil {
		return views.AuditPage{}, 0, err
	}
	return page, status, nil
}

func withFormat(f audit.Filter, format string) string {
	q := f.Query()
	q.Set("format", format)
	return q.Encode()
}

// results builds the list part: rows, pager links and, on the first page, what the
// "N new entries" banner needs.
func (h AuditHandler) results(p *auth.Principal, f audit.Filter, list audit.Page) views.AuditResults {
	r := views.AuditResults{HasFilter: !f.Empty(), ReloadURL: auditURL(f)}
	for _, rec := range list.Items {
		r.Rows = append(r.Rows, auditRow(p, rec))
	}
	if list.NextCursor != 0 {
		r.NextURL = auditURL(f, "cursor", strconv.FormatInt(list.NextCursor, 10))
	}
	if f.Cursor != 0 {
		r.FirstURL = auditURL(f)
		return r
	}
	q := f.Query()
	if len(list.Items) > 0 {
		// The largest id listed, not the first row's: a page filtered by time is in time
		// order, and an entry may take its time before an entry appended ahead of it.
		for _, rec := range list.Items {
			r.TopID = max(r.TopID, rec.ID)
		}
		q.Set("after", strconv.FormatInt(r.TopID, 10))
	}
	q.Set("shown", "0")
	r.NewURL = "/audit/new?" + q.Encode()
	return r
}

// New renders the "N new entries" banner: how many entries that match the filters are
// newer than the page's top (?after=). When that is the count the banner already shows
// (?shown=) it answers 204, so the page keeps the banner as it is: re-rendering it for
// nothing would take the focus, or a click, from its button.
func (h AuditHandler) New(c echo.Context) error {
	qp := c.QueryParams()
	if c.Request().Header.Get("HX-Request") == "" {
		// A fragment for the page's banner; opened by itself, the page it belongs to.
		qp.Del("after")
		qp.Del("shown")
		to := "/audit"
		if len(qp) > 0 {
			to += "?" + qp.Encode()
		}
		return c.Redirect(http.StatusSeeOther, to)
	}
	f, err := audit.ParseFilter(qp)
	if err != nil {
		return err
	}
	n, err := h.Log.CountNewer(c.Request().Context(), f, f.After)
	if err != nil {
		return err
	}
	if shown, err := strconv.ParseInt(qp.Get("shown"), 10, 64); err == nil && shown == n {
		return c.NoContent(http.StatusNoContent)
	}
	qp.Set("shown", strconv.FormatInt(n, 10))
	top := f.After
	f.After = 0
	return render(c, http.StatusOK, views.AuditNewBanner(views.AuditNew{Count: n, More: n >= audit.MaxNewer,
		NewURL: "/audit/new?" + qp.Encode(), ReloadURL: auditURL(f)}, top))
}

// chain is the chain's status as the page shows it.
func (h AuditHandler) chain(c echo.Context) (views.AuditChain, error) {
	st, err := h.Log.VerifyStatus(c.Request().Context())
	if err != nil {
		return views.AuditChain{}, err
	}
	ch := views.AuditChain{CanVerify: PrincipalOf(c).Can(auth.PermAuditView)}
	if st == nil {
		ch.Never = true
		return ch, nil
	}
	ch.Running, ch.Checked, ch.Total, ch.OK, ch.Through = st.Running, st.Checked, st.Total, st.OK, st.VerifiedThrough
	ch.At, ch.By, ch.BadID, ch.Reason, ch.Err, ch.Checkpoint = st.FinishedAt, st.StartedBy, st.BadID, st.Reason, st.Err, st.Checkpoint
	ch.CheckpointID = st.CheckpointID
	return ch, nil
}

// VerifyStatus renders the chain's status (polled while a check runs).
func (h AuditHandler) VerifyStatus(c echo.Context) error {
	if c.Request().Header.Get("HX-Request") == "" {
		return c.Redirect(http.StatusSeeOther, "/audit") // a fragment of that page, which polls it
	}
	return h.chainStatus(c, false)
}

// chainStatus renders the chain's status; the live region's text goes with it when
// the check started (started) or ended, not with each poll while it runs.
func (h AuditHandler) chainStatus(c echo.Context, started bool) error {
	ch, err := h.chain(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AuditChainStatus(ch, started || !ch.Running))
}

// Verify starts a check of the chain in the background and shows its progress.
func (h AuditHandler) Verify(c echo.Context) error {
	h.Log.StartVerify(PrincipalOf(c).User.Username)
	if c.Request().Header.Get("HX-Request") == "" {
		return c.Redirect(http.StatusSeeOther, "/audit")
	}
	return h.chainStatus(c, true)
}

// SaveView stores the filters of the form's query under a name for the person. A name
// refused (blank, too long, one of theirs already) brings the filtered list back with the
// name as typed and why at its box: a redirect would lose the name. Any other refusal
// goes back to the filtered list with a flash.
func (h AuditHandler) SaveView(c echo.Context) error {
	query, name := c.FormValue("query"), c.FormValue("name")
	v, err := h.Log.SaveView(c.Request().Context(), ActorOf(c), name, query)
	vals, perr := url.ParseQuery(strings.TrimPrefix(query, "?"))
	if fe, status, ok := viewNameError(err); ok && perr == nil {
		page, pageStatus, err := h.page(c, vals)
		if err != nil {
			return err
		}
		if pageStatus == http.StatusOK { // bad filters are said at their fields, with no form to save them
			return render(c, status, views.Audit(page, views.AuditSaveForm{Name: name, Errors: fe}))
		}
	}
	back := "/audit"
	if perr == nil && len(vals) > 0 {
		back += "?" + vals.Encode()
	}
	if err == nil && v.Query != "" {
		back = "/audit?" + v.Query
	}
	return h.redirectWithOutcome(c, err, func() string { return "Saved the view " + v.Name + "." }, back)
}

// viewNameError is the save-view form's error at its name box, and the status to answer
// with, when err refuses the name: 422 for a blank or long one, 409 for one the person
// already uses (audit.CodeViewExists).
func viewNameError(err error) (views.FormErrors, int, bool) {
	if fe, ok := formErrors(err); ok && fe["name"] != "" {
		return views.FormErrors{"name": fe["name"]}, http.StatusUnprocessableEntity, true
	}
	if f, ok := fault.As(err); ok && f.Kind == fault.KindConflict && f.Code == audit.CodeViewExists {
		return views.FormErrors{"name": f.Message}, http.StatusConflict, true
	}
	return nil, 0, false
}

// DeleteView removes one of the person's saved views.
func (h AuditHandler) DeleteView(c echo.Context) error {
	err := h.Log.DeleteView(c.Request().Context(), ActorOf(c), c.Param("id"))
	return h.redirectWithOutcome(c, err, func() string { return "Deleted the saved view." }, "/audit")
}

// entryID reads the :id of an entry; anything but a positive number is not found.
func entryID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, audit.ErrNotFound
	}
	return id, nil
}

// Show renders one entry: who, what, the target, the changes it records, its request
// and its place in the chain.
func (h AuditHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := entryID(c)
	if err != nil {
		return err
	}
	r, err := h.Log.Get(ctx, id)
	if err != nil {
		return err
	}
	head, err := h.Log.HeadID(ctx)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	page := views.AuditEntryPage{Layout: h.layout(c, fmt.Sprintf("Audit entry %d", r.ID)), Row: auditRow(p, r), IP: r.IP,
		PrevHash: hex.EncodeToString(r.PrevHash), Hash: hex.EncodeToString(r.Hash)}
	if r.ActorID != nil {
		page.ActorID = *r.ActorID
	}
	if r.RequestID != "" {
		page.RequestURL = auditURL(audit.Filter{RequestID: r.RequestID})
	}
	if r.ID > 1 {
		page.PrevURL = "/audit/" + strconv.FormatInt(r.ID-1, 10)
	}
	if r.ID < head {
		page.NextURL = "/audit/" + strconv.FormatInt(r.ID+1, 10)
	}
	page.Payload = indentJSON(r.Payload)
	var payload map[string]json.RawMessage
	if json.Unmarshal(r.Payload, &payload) == nil {
		page.TokenName = firstString(payload, "token_name", "token")
		page.UserAgent = firstString(payload, "user_agent")
		page.Client = firstString(payload, "client", "mcp_client", "client_name")
		page.Display = firstString(payload, "display")
		page.Changes, page.Diff = payloadChanges(payload)
	}
	return render(c, http.StatusOK, views.AuditEntry(page))
}

// firstString is the first of keys that holds a JSON string (or an object with a
// name, as an MCP client's clientInfo is kept).
func firstString(m map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
		var named struct{ Name, Version string }
		if json.Unmarshal(raw, &named) == nil && named.Name != "" {
			return strings.TrimSpace(named.Name + " " + named.Version)
		}
	}
	return ""
}

// payloadChanges finds the changes an entry records: a top-level before/after pair
// (a line diff of the two, indented), a top-level from/to (a state move, a role
// change), and per-field {"from","to"} under "changes" or "changed" (a server's edit).
func payloadChanges(m map[string]json.RawMessage) ([]views.AuditChange, []views.ToolDiffLine) {
	var changes []views.AuditChange
	var diff []views.ToolDiffLine
	before, hasBefore := m["before"]
	after, hasAfter := m["after"]
	if hasBefore || hasAfter {
		a, b := strings.Split(strings.TrimRight(indentJSON(orNull(before)), "\n"), "\n"), strings.Split(strings.TrimRight(indentJSON(orNull(after)), "\n"), "\n")
		diff = views.DiffLines(a, b)
	}
	from, hasFrom := m["from"]
	to, hasTo := m["to"]
	if hasFrom && hasTo {
		changes = append(changes, views.AuditChange{Field: "value", Before: auditValue(from), After: auditValue(to)})
	}
	for _, key := range []string{"changes", "changed"} {
		var fields map[string]json.RawMessage
		if json.Unmarshal(m[key], &fields) != nil {
			continue
		}
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			var ft struct {
				From json.RawMessage `json:"from"`
				To   json.RawMessage `json:"to"`
			}
			if json.Unmarshal(fields[k], &ft) == nil && (ft.From != nil || ft.To != nil) {
				changes = append(changes, views.AuditChange{Field: k, Before: auditValue(orNull(ft.From)), After: auditValue(orNull(ft.To))})
			} else {
				changes = append(changes, views.AuditChange{Field: k, Before: "", After: auditValue(fields[k])})
			}
		}
	}
	return changes, diff
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func auditValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// APIList returns one page of entries: GET /api/v1/audit?actor=&action=&target_type=
// &target_id=&result=&request_id=&q=&from=&to=&limit=&cursor= → {"items","next_cursor"}.
// A page of large entries is shorter than limit (audit.Log.List stops at a byte budget),
// so what one request holds stays bounded whatever the payloads.
func (h AuditHandler) APIList(c echo.Context) error {
	f, err := audit.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	if c.QueryParams().Has("after") {
		return verr.New("after", "is not a filter of this list")
	}
	page, err := h.Log.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	items := make([]audit.ExportEntry, len(page.Items))
	for i, r := range page.Items {
		items[i] = r.Export()
	}
	next := ""
	if page.NextCursor != 0 {
		next = strconv.FormatInt(page.NextCursor, 10)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

// APIGet returns one entry.
func (h AuditHandler) APIGet(c echo.Context) error {
	id, err := entryID(c)
	if err != nil {
		return err
	}
	r, err := h.Log.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r.Export())
}

// APIExport streams every entry the filters select as CSV or JSON Lines
// (?format=csv|jsonl), newest first; the export is audited before it starts
// (audit.export) and when it ends (audit.export.finished: rows, bytes, success or
// failure; one that cannot be written is logged, and a complete export still ends
// cleanly). One per person and 3 in the process run at once (audit.Log.Export refuses
// more: 429).
func (h AuditHandler) APIExport(c echo.Context) error {
	// An export is recorded as the person's and streams the whole log: another site's
	// link must not make them "export" it.
	if crossSiteGet(c) {
		return fault.Forbidden("an export of the audit log is not started from another site's link: use Export on /audit, or an API token")
	}
	qp := c.QueryParams()
	format := qp.Get("format")
	var ve verr.Error
	if format != audit.FormatCSV && format != audit.FormatJSONL {
		ve.Add("format", "must be csv or jsonl")
	}
	if qp.Has("after") {
		ve.Add("after", "is not a filter of an export: it holds every entry that matches")
	}
	// The list's query string (its limit and cursor too) may be reused as it is (DESIGN
	// §1: "<same filters>"): the export is the whole filtered set, so they are ignored.
	qp = maps.Clone(qp)
	qp.Del("limit")
	qp.Del("cursor")
	f, err := audit.ParseFilter(qp)
	if err != nil {
		return err
	}
	if err := ve.Err(); err != nil {
		return err
	}
	ctype := "text/csv; charset=utf-8"
	if format == audit.FormatJSONL {
		ctype = "application/jsonl; charset=utf-8"
	}
	hd := c.Response().Header()
	hd.Set(echo.HeaderContentType, ctype)
	hd.Set("Cache-Control", "no-store")
	hd.Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="audit-%s.%s"`, time.Now().UTC().Format("20060102-150405"), format))
	// Nothing is written before the export's own entry is: if it cannot be recorded,
	// the error handler still answers.
	w := &lazyWriter{res: c.Response(), status: http.StatusOK, flush: true}
	logger := h.Logger
	if logger != nil {
		logger = logger.With("request_id", RequestID(c))
	}
	if err := h.Log.ExportLogging(c.Request().Context(), logger, ActorOf(c), f, format, w); err != nil {
		if !w.started {
			// The error is answered as a page or JSON, not saved as the export's file.
			hd.Del(echo.HeaderContentDisposition)
			hd.Del(echo.HeaderContentType)
			return err
		}
		// Mid-stream: the status is sent. Returning would end the body cleanly, cut at
		// an arbitrary byte, and look complete; aborting the handler breaks the transfer
		// (no final chunk, or a reset stream), so the client sees the export failed.
		h.Logger.Error("handlers: audit export cut off", "err", err, "request_id", RequestID(c))
		panic(http.ErrAbortHandler)
	}
	w.finish()
	return nil
}

// crossSiteGet reports a GET or HEAD that a signed-in browser sent from another site's
// link (its cookie goes with a top-level navigation): not one to start recorded, costly
// work with. A token, a program, this site's own pages and POST are not.
func crossSiteGet(c echo.Context) bool {
	r := c.Request()
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || PrincipalOf(c).Kind == audit.ActorToken {
		return false
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "cross-site" || site == "same-site"
}

// APIVerify checks the chain now and answers how far it holds:
// {"ok","verified_through","checked","bad_id","reason","started_at","finished_at",
// "checkpoint","checkpoint_id"}, against the newest checkpoint as the CLI's check is.
func (h AuditHandler) APIVerify(c echo.Context) error {
	// A check reads the whole chain and is recorded.
	if crossSiteGet(c) {
		return fault.Forbidden("a check of the audit chain is not started from another site's link: use Verify on /audit, POST, or an API token")
	}
	v, err := h.Log.VerifyNow(c.Request().Context(), PrincipalOf(c).User.Username)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}
