package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// ToolsHandler serves tool management: the list, the detail page, actions and the JSON API.
type ToolsHandler struct {
	*Shell
	Tools  *tools.Service
	Router *router.Router
}

// toolsPerPage is the page size of the list: the page renders this many cards at most.
// 24 fill whole rows of two, three, four or six columns and keep the page under 60 KB
// however many tools there are (issue #23 P3; it was 48, about 100 KB); search, the
// filters and "Next page" reach the rest.
const toolsPerPage = 24

// toolCard is the view of one tool.
func toolCard(it tools.Item) views.ToolCard {
	r := it.Risk()
	return views.ToolCard{ID: it.ID, Name: it.Name, QualifiedName: it.QualifiedName(), Title: it.Title,
		Description: it.Description, Server: it.Server, ServerID: it.ServerID, Status: it.Status, Available: it.Available,
		Risk: string(r.Level), RiskWhy: r.Why, RiskSource: r.Source, Category: deref(it.Category), Tags: it.Tags,
		Version: it.Version(), DefinitionHash: it.DefinitionHash, Worst: deref(it.ValidationWorst), Override: deref(it.EnableOverride)}
}

// toolQuery reads the list's search, filters, order and cursor from the query string
// (the same names on the page and the API).
func toolQuery(c echo.Context) tools.Query {
	qp := c.QueryParams()
	var status []string
	for _, s := range qp["status"] {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				status = append(status, p)
			}
		}
	}
	var tags []string
	for _, s := range qp["tag"] {
		tags = append(tags, strings.Split(s, ",")...)
	}
	return tools.Query{Q: qp.Get("q"), Server: qp.Get("server"), Category: qp.Get("category"), Status: status,
		Tags: tags, Risk: qp.Get("risk"), Sort: qp.Get("sort"), Cursor: qp.Get("cursor")}
}

// List renders the tool list: server-side search, filters, keyset pages.
func (h ToolsHandler) List(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	q := toolQuery(c)
	q.Limit, q.Brief = toolsPerPage, true
	v := views.ToolsPage{Layout: h.layout(c, "Tools", tools.Topic)}
	v.Live.LastEventID = last
	page, err := h.Tools.List(ctx, q)
	var ve *verr.Error
	if errors.As(err, &ve) && q.Cursor != "" && ve.For("cursor") != "" && len(ve.Fields) == 1 {
		// An old link (the search changed under it): show the first page of this search.
		q.Cursor = ""
		page, err = h.Tools.List(ctx, q)
	}
	if errors.As(err, &ve) {
		// A bad filter in a hand-edited URL: said, and left out alone; the search and the
		// other filters still apply, so the list never looks like an unfiltered match.
		var kept tools.Query
		kept, v.Notice = withoutRefused(q, ve)
		page, err = h.Tools.List(ctx, kept)
		if errors.As(err, &ve) { // not expected: every refused field was cleared
			kept, v.Notice = tools.Query{Limit: toolsPerPage, Brief: true}, "These filters cannot be used, so every tool is shown: "+ve.Error()+"."
			page, err = h.Tools.List(ctx, kept)
		}
		q = kept
	}
	if err != nil {
		return err
	}
	// The facets first: kept in memory, they also answer the count of an unfiltered or
	// single-filter list without counting again.
	facets, err := h.Tools.Facets(ctx)
	if err != nil {
		return err
	}
	total := page.Total // a search's first page counted its matches
	if total < 0 {
		if total, err = h.Tools.Count(ctx, q); err != nil {
			return err
		}
	}
	v.Filter = views.ToolFilter{Q: q.Q, Server: q.Server, Category: q.Category, Tags: q.Tags, Risk: q.Risk, Sort: q.Sort}
	if len(q.Status) > 0 {
		v.Filter.Status = q.Status[0]
	}
	v.HasFilter = q.Q != "" || q.Server != "" || q.Category != "" || len(q.Status) > 0 || len(q.Tags) > 0 || q.Risk != ""
	v.Total = total
	for _, f := range facets.Statuses {
		v.All += f.Count
		v.Statuses = append(v.Statuses, views.Option{Value: f.Value, Label: fmt.Sprintf("%s (%d)", f.Value, f.Count)})
	}
	for _, f := range facets.Servers {
		v.Servers = append(v.Servers, views.Option{Value: f.Value, Label: fmt.Sprintf("%s (%d)", f.Value, f.Count)})
	}
	for _, f := range facets.Categories {
		v.Categories = append(v.Categories, views.Option{Value: f.Value, Label: fmt.Sprintf("%s (%d)", f.Value, f.Count)})
	}
	for _, f := range facets.Tags {
		v.TagOpts = append(v.TagOpts, views.Option{Value: f.Value, Label: fmt.Sprintf("%s (%d)", f.Value, f.Count)})
	}
	for _, l := range risk.Levels {
		v.Risks = append(v.Risks, views.Option{Value: string(l), Label: l.Label()})
	}
	v.Sorts = []views.Option{{Value: tools.SortRelevance, Label: "Best match (when searching)"}, {Value: tools.SortName, Label: "Name"},
		{Value: tools.SortServer, Label: "Server"}, {Value: tools.SortUpdated, Label: "Recently changed"}}
	// After a refused bulk action (withBulkState): its ticks and tags, as they were.
	picked := map[string]bool{}
	for _, id := range c.QueryParams()["picked"] {
		picked[id] = true
	}
	v.BulkTags = c.QueryParam("bulk_tags")
	for _, it := range page.Items {
		card := toolCard(it)
		card.Picked = picked[it.ID]
		v.Tools = append(v.Tools, card)
	}
	v.Back = listURL(q, "")
	if page.NextCursor != "" {
		v.NextURL = listURL(q, page.NextCursor)
	}
	if q.Cursor != "" {
		v.FirstURL = listURL(q, "")
	}
	return render(c, http.StatusOK, views.Tools(v))
}

// toolFilterWords name the list's query parameters in a notice.
var toolFilterWords = map[string]string{"q": "search", "server": "server filter", "category": "category filter",
	"status": "status filter", "tag": "tag filter", "risk": "risk filter", "sort": "order", "cursor": "page link", "limit": "page size"}

// withoutRefused is q without the parameters ve refuses, and a notice saying which
// were left out and why.
func withoutRefused(q tools.Query, ve *verr.Error) (tools.Query, string) {
	var said []string
	for _, f := range ve.Fields {
		switch f.Field {
		case "q":
			q.Q = ""
		case "server":
			q.Server = ""
		case "category":
			q.Category = ""
		case "status":
			q.Status = nil
		case "tag":
			q.Tags = nil
		case "risk":
			q.Risk = ""
		case "sort":
			q.Sort = ""
		case "limit":
			q.Limit = toolsPerPage
		}
		what := toolFilterWords[f.Field]
		if what == "" {
			what = f.Field
		}
		said = append(said, "the "+what+": "+f.Message)
	}
	// A page link belongs to the search it was made for, which this no longer is.
	q.Cursor = ""
	return q, httperr.Sentence("left out "+strings.Join(said, "; ")) + " The tools shown match the rest."
}

// listURL is the list with q's search and filters, at cursor.
func listURL(q tools.Query, cursor string) string {
	v := url.Values{}
	for k, val := range map[string]string{"q": q.Q, "server": q.Server, "category": q.Category, "risk": q.Risk,
		"sort": q.Sort, "cursor": cursor} {
		if val != "" {
			v.Set(k, val)
		}
	}
	for _, s := range q.Status {
		v.Add("status", s)
	}
	for _, t := range q.Tags {
		v.Add("tag", t)
	}
	if len(v) == 0 {
		return "/tools"
	}
	return "/tools?" + v.Encode()
}

// toolsBack is where a form asked to return: a tools page, else def. A tool page's head
// asks for the bare page on every tab (views.ToolHeadBack): it returns to the page of that
// tool the form was used on (its tab, the test panel), which the Referer names.
func toolsBack(c echo.Context, def string) string {
	b := c.FormValue("back")
	if !strings.HasPrefix(b, "/tools") || !localPath(b) {
		return def
	}
	id, ok := strings.CutPrefix(b, "/tools/")
	if !ok || b != views.ToolHeadBack(id) || strings.ContainsAny(id, "/?#") {
		return b
	}
	ref, ok := sameSiteReferer(c)
	if !ok {
		return b
	}
	switch ref.Path {
	case b, testURL(id), views.ToolAccessURL(id), views.ToolCompensationURL(id):
		if u := ref.RequestURI(); localPath(u) {
			return u
		}
	case b + "/configure": // a refused configuration, shown where it was posted
		return toolTabURL(id, views.ToolTabConfiguration, nil)
	}
	return b
}

// SetEnabled enables or disables one tool from a page (the card toggle, the detail page,
// the override form with a reason; the detail page's forms send the definition's hash).
// A refused override shows the tool page again with the reason as typed
// (overrideRefused); other refusals go back with a flash, having nothing typed to lose.
func (h ToolsHandler) SetEnabled(enable bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Param("id")
		override := c.FormValue("override") != ""
		if err := overrideCheck(c, override); err != nil {
			return err
		}
		// definition_hash: the definition the page showed, so an enable from a page opened
		// before rediscovery changed it is refused rather than enabling what nobody saw.
		out, err := h.Tools.SetEnabledSeen(c.Request().Context(), ActorOf(c), id, enable, c.FormValue("reason"), override,
			c.FormValue("definition_hash"))
		if err == nil && out[0].Err() != nil {
			if errors.Is(out[0].Err(), tools.ErrNotFound) {
				return tools.ErrNotFound
			}
			if override && enable {
				return h.overrideRefused(c, id, out[0].Err())
			}
			setFlash(c, "error", out[0].Error, h.SecureCookies)
			return c.Redirect(http.StatusSeeOther, toolsBack(c, "/tools/"+id))
		}
		if _, bad := formErrors(err); bad && override && enable {
			return h.overrideRefused(c, id, err)
		}
		return h.redirectWithOutcome(c, err, func() string { return outcomeMessage(out, enable) },
			toolsBack(c, "/tools/"+id))
	}
}

// overrideRefused shows the tool page (its overview, where the findings are) again after
// its override form was refused: the reason as typed stays in the form, with what is
// wrong with it at the field (422), or, when the tool refused (its state, a definition
// changed since), with the refusal at the top of the page and its status.
func (h ToolsHandler) overrideRefused(c echo.Context, id string, refusal error) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx) // before the tool, as Show reads it
	if err != nil {
		return err
	}
	it, err := h.Tools.Get(ctx, id)
	if err != nil {
		return err
	}
	page := ToolPageHandler{Shell: h.Shell, Tools: h.Tools} // the overview needs no more
	v := page.toolPageAt(c, it, views.ToolTabOverview, last)
	form, status := views.ToolOverrideForm{Reason: c.FormValue("reason")}, http.StatusUnprocessableEntity
	if fe, ok := formErrors(refusal); ok {
		// The input was refused before the tool was looked at: the page stays tied to the
		// definition it was opened at, so a change since is still refused and said.
		if seen := c.FormValue("definition_hash"); seen != "" {
			v.Tool.DefinitionHash = seen
		}
		form.Errors = views.FormErrors{"reason": fe["reason"]}
		if fe["reason"] == "" { // not expected from the form: said at the top
			msg, _ := userMessage(refusal)
			v.Flash = &views.Flash{Kind: "error", Message: msg}
		}
	} else {
		msg, mine := userMessage(refusal)
		if !mine {
			return refusal
		}
		v.Flash, status = &views.Flash{Kind: "error", Message: msg}, httperr.Classify(refusal).Status
	}
	if v.Overview, err = page.toolOverview(ctx, it, PrincipalOf(c).Can(auth.PermToolInspect)); err != nil {
		return err
	}
	return render(c, status, views.ToolOverrideRefused(v, form))
}

// overrideCheck: only holders of tool.override may enable a tool despite its findings.
func overrideCheck(c echo.Context, override bool) error {
	if override && !PrincipalOf(c).Can(auth.PermToolOverride) {
		return fault.Forbidden("only administrators may enable a tool despite its findings or a failed test")
	}
	return nil
}

// outcomeMessage sums up what an enable or disable did.
func outcomeMessage(out []tools.Outcome, enable bool) string {
	verb, state := "Disabled", toolstate.Disabled
	if enable {
		verb, state = "Enabled", toolstate.Enabled
	}
	var moved, already []string
	var failed []string
	for _, o := range out {
		switch {
		case o.Error != "":
			failed = append(failed, o.Error)
		case o.From == state:
			already = append(already, o.Name)
		default:
			moved = append(moved, o.Name)
		}
	}
	var parts []string
	if len(moved) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s.", verb, joinShort(moved)))
	}
	if len(already) > 0 {
		parts = append(parts, fmt.Sprintf("%s already %s.", joinShort(already), state))
	}
	if len(failed) > 3 {
		failed = append(failed[:3], fmt.Sprintf("and %d more", len(failed)-3))
	}
	if len(failed) > 0 {
		parts = append(parts, fmt.Sprintf("Not changed: %s.", strings.Join(failed, "; ")))
	}
	msg := strings.Join(parts, " ")
	if len(msg) > 1200 { // the flash travels in a cookie
		msg = msg[:1200] + "…"
	}
	return msg
}

func joinShort(names []string) string {
	if len(names) > 5 {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
	}
	return strings.Join(names, ", ")
}

// Bulk applies one action to the tools ticked on the list: enable, disable, tag, untag.
func (h ToolsHandler) Bulk(c echo.Context) error {
	ctx := c.Request().Context()
	form, err := c.FormParams()
	if err != nil {
		return verr.New("body", "could not read the form")
	}
	// Each pick box sends its tool's id and the definition hash its card shows.
	ids, seen, serr := picked(form["id"])
	back := toolsBack(c, "/tools")
	p := PrincipalOf(c)
	var msg string
	switch action := c.FormValue("action"); action {
	case "enable", "disable":
		if !p.Can(auth.PermToolEnable) {
			return ErrForbidden
		}
		if err = serr; err != nil {
			break // said on the list, as the form's other mistakes are
		}
		// seen: the definition each card showed, so a tool rediscovered since the page was
		// opened is refused (stale) rather than enabled unseen; the others still move.
		var out []tools.Outcome
		out, err = h.Tools.SetEnabledSeenEach(ctx, ActorOf(c), ids, action == "enable", "", false, seen)
		msg = outcomeMessage(out, action == "enable")
		if err == nil && slices.ContainsFunc(out, func(o tools.Outcome) bool { return o.Error != "" }) {
			setFlash(c, "info", msg, h.SecureCookies)
			return c.Redirect(http.StatusSeeOther, back)
		}
	case "tag", "untag":
		if !p.Can(auth.PermToolConfigure) {
			return ErrForbidden
		}
		var n int
		n, err = h.Tools.Tag(ctx, ActorOf(c), ids, strings.Split(c.FormValue("tags"), ","), action == "untag")
		msg = fmt.Sprintf("Tags changed on %d of %d tools.", n, len(slices.Compact(slices.Sorted(slices.Values(ids)))))
	default:
		err = verr.New("action", "choose enable, disable, tag or untag")
	}
	if ve := (*verr.Error)(nil); errors.As(err, &ve) {
		// The list comes back as it was, the tools still ticked and the tags still
		// typed, with what to fix.
		setFlash(c, "error", bulkProblem(ve), h.SecureCookies)
		return c.Redirect(http.StatusSeeOther, withBulkState(back, ids, c.FormValue("tags")))
	}
	return h.redirectWithOutcome(c, err, func() string { return msg }, back)
}

// picked reads the list's ticked pick boxes: each is a tool's id and, after a colon, the
// start of the definition hash its card showed (views.pickValue); an id alone (a
// client's form) checks no definition. Two definitions of one tool are refused.
func picked(vals []string) (ids []string, seen map[string]string, err error) {
	ids = make([]string, 0, len(vals))
	for _, v := range vals {
		id, h, ok := strings.Cut(v, ":")
		ids = append(ids, id)
		if !ok || h == "" {
			continue
		}
		if seen == nil {
			seen = make(map[string]string, len(vals))
		}
		if was, dup := seen[id]; dup && was != h {
			err = verr.New("seen", "the page sent two definitions of one tool: reload the page")
		}
		seen[id] = h
	}
	return ids, seen, err
}

// bulkProblem says what to fix in a refused bulk action, in the words of its form.
func bulkProblem(ve *verr.Error) string {
	var out []string
	for _, f := range ve.Fields {
		switch f.Field {
		case "ids", "id":
			out = append(out, "Tick at least one tool first.")
		case "tags":
			out = append(out, "Tags: "+f.Message+".")
		default:
			out = append(out, f.Message+".")
		}
	}
	return strings.Join(out, " ")
}

// withBulkState is back with the ticked tools (picked) and the typed tags, which the
// list shows again (List); ids that are not tool ids are left out.
func withBulkState(back string, ids []string, tags string) string {
	u, err := url.Parse(back)
	if err != nil {
		return back
	}
	q := u.Query()
	for _, id := range ids {
		if uuid.Validate(id) == nil && len(q["picked"]) < toolsPerPage {
			q.Add("picked", id)
		}
	}
	if tags = strings.TrimSpace(tags); tags != "" && len(tags) <= 500 {
		q.Set("bulk_tags", tags)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
