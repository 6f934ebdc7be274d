package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// CollaborationsHandler serves user_collaboration's questions (answered by the person
// asked, in the browser) and the grants their answers gave (/grants).
type CollaborationsHandler struct {
	*Shell
	Grants *grants.Service
}

var collaborationStatuses = []string{"", grants.StatusPending, grants.StatusAnswered, grants.StatusDeclined,
	grants.StatusCancelled, grants.StatusExpired}

// APIList lists the signed-in person's questions: ?status=pending|answered|declined|cancelled|expired.
func (h CollaborationsHandler) APIList(c echo.Context) error {
	status := c.QueryParam("status")
	ok := false
	for _, s := range collaborationStatuses {
		ok = ok || s == status
	}
	if !ok {
		return verr.New("status", "must be one of pending, answered, declined, cancelled, expired")
	}
	items, err := h.Grants.Collaborations(c.Request().Context(), PrincipalOf(c).User.ID, status)
	if err != nil {
		return err
	}
	if items == nil {
		items = []grants.Collaboration{}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIRespond answers a question: {"response":"yes, proceed"} → 200 with the question
// as it ended | 404 not one's own | 409 no longer waiting. A person's session only.
func (h CollaborationsHandler) APIRespond(c echo.Context) error {
	var in struct {
		Response string `json:"response"`
	}
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	if !uuidtext.Canonical(c.Param("id")) {
		return fault.NotFound("collaboration")
	}
	got, err := h.Grants.Respond(c.Request().Context(), ActorOf(c), c.Param("id"), in.Response)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, got)
}

// RespondForm answers from the live prompt or the approvals inbox: the button's
// decision (approve, reject) or the free-text answer. From htmx, the answered prompt is
// swapped for a line saying so; otherwise back to where the person was.
func (h CollaborationsHandler) RespondForm(c echo.Context) error {
	// The buttons decide; the words beside them go along as the answer. Sent on its
	// own, the answer is read for approval and rejection words.
	response := strings.TrimSpace(c.FormValue("response"))
	verdict := grants.Classify(response)
	switch d := c.FormValue("decision"); d {
	case "approve", "reject":
		verdict = map[string]grants.Verdict{"approve": grants.Approve, "reject": grants.Reject}[d]
		if response == "" {
			response = d
		}
	}
	id := c.Param("id")
	if !uuidtext.Canonical(id) {
		return fault.NotFound("collaboration")
	}
	got, err := h.Grants.RespondAs(c.Request().Context(), ActorOf(c), id, response, verdict)
	if c.Request().Header.Get("HX-Request") == "true" {
		if fe, ok := formErrors(err); ok && fe["response"] != "" {
			// An answer the person can fix (only spaces, too long): the card comes back so
			// the question stays answerable, with why at the box and the words as typed
			// (RespondAs returns the question with the refusal). With status 200: htmx
			// swaps no 4xx (app.js would only show a toast).
			return render(c, http.StatusOK, views.CollaborationRefused(promptOf(got), c.FormValue("response"), httperr.Sentence(fe["response"])))
		}
		if err != nil {
			msg, mine := userMessage(err)
			if !mine {
				return err
			}
			return render(c, http.StatusOK, views.CollaborationAnswered(id, "error", msg))
		}
		return render(c, http.StatusOK, views.CollaborationAnswered(id, "success", answeredMessage(got)))
	}
	// Back to the page the question was answered on (the prompt waits on every page),
	// so a refusal (answered meanwhile by someone else) is said where the person was.
	to := "/approvals"
	if ref := c.FormValue("back"); localPath(ref) {
		to = ref
	} else if ref, ok := sameSiteReferer(c); ok && localPath(ref.RequestURI()) {
		to = ref.RequestURI()
	}
	return h.redirectWithOutcome(c, err, func() string { return answeredMessage(got) }, to)
}

// localPath reports whether ref is a path of this site to send a browser back to: not
// another host's ("//host", or "/\host", which browsers read as "//host").
func localPath(ref string) bool {
	// Browsers drop tabs and line breaks from a URL ("/\t/host" is "//host" too).
	return strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, "//") &&
		!strings.ContainsFunc(ref, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f })
}

func answeredMessage(c grants.Collaboration) string {
	switch {
	case c.Status == grants.StatusDeclined:
		return "Declined: the agent is told no."
	case c.GrantID != nil:
		return "Approved: " + c.AuthorizeOperation + " is allowed in conversation " + c.ConversationID + " for a while (see Grants)."
	}
	return "Answered: the agent has your answer."
}

// GrantsPage lists the active grants, and those that ended in the last day: one's own,
// or everyone's for an administrator.
func (h CollaborationsHandler) GrantsPage(c echo.Context) error {
	p := PrincipalOf(c)
	f := grants.Filter{UserID: p.User.ID}
	all := p.User.Role == auth.RoleAdmin
	if all {
		f.UserID = ""
	}
	// The cursor is read before the grants, so a change in between is replayed (never
	// 0: a socket from 0 replays the whole history).
	last, err := h.Events.LatestID(c.Request().Context())
	if err != nil {
		return err
	}
	list, err := h.Grants.Active(c.Request().Context(), f)
	if err != nil {
		return err
	}
	topic := grants.GiverTopic(p.User.ID)
	if all {
		topic = grants.Topic
	}
	page := views.GrantsPage{Layout: h.layout(c, "Grants", topic), All: all}
	page.Layout.Live.LastEventID = last
	for _, g := range list {
		page.Grants = append(page.Grants, grantRow(g))
	}
	ended, err := h.Grants.Ended(c.Request().Context(), f)
	if err != nil {
		return err
	}
	for _, g := range ended {
		page.Ended = append(page.Ended, endedGrantRow(h.Grants, g))
	}
	return render(c, http.StatusOK, views.Grants(page))
}

// Revoke ends a grant now (one's own; an administrator's any).
func (h CollaborationsHandler) Revoke(c echo.Context) error {
	id := c.Param("id")
	if !uuidtext.Canonical(id) {
		return fault.NotFound("grant")
	}
	p := PrincipalOf(c)
	g, err := h.Grants.Revoke(c.Request().Context(), ActorOf(c), id, p.User.Role != auth.RoleAdmin)
	return h.redirectWithOutcome(c, err, func() string { return "Revoked: " + g.Operation + " is no longer allowed." }, "/grants")
}
