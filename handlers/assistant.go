package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/assistant"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// AssistantHandler serves /assistant, its slide-over and POST /api/v1/assistant/messages:
// managing Toolwarden in plain language (services/assistant).
type AssistantHandler struct {
	*Shell
	Assistant *assistant.Service
}

// historyShown bounds the messages a page shows of a conversation.
const historyShown = 100

// Page renders /assistant with the person's latest conversation (?c= picks one; ?new=1
// starts a new one).
func (h AssistantHandler) Page(c echo.Context) error {
	m, seen, err := h.model(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.AssistantPage(views.AssistantView{Layout: h.layout(c, "Assistant"), Chat: m}, seen))
}

// Panel renders the chat alone, for the slide-over every page has.
func (h AssistantHandler) Panel(c echo.Context) error {
	m, seen, err := h.model(c)
	if err != nil {
		return err
	}
	m.Panel = true
	return render(c, http.StatusOK, views.AssistantChat(m, seen))
}

// model reads the conversation as the caller (an API token's page shows the token's own
// conversations, never the person's) with its last turn (0 for a new one): the chat form
// sends that back as seen, so the service can tell a window the conversation moved on
// from. Both come from ShownOf, which reads the turn before the messages: a turn read
// after them could be newer than what the page shows.
func (h AssistantHandler) model(c echo.Context) (views.AssistantChatModel, int64, error) {
	ctx := c.Request().Context()
	p := PrincipalOf(c)
	conv := c.QueryParam("c")
	if conv != "" && !assistant.ValidConversationID(conv) {
		// Not an id a conversation can be named by: among them, an API token's stored
		// ids ("~<token>~…"), which a person's page must not open as theirs.
		return views.AssistantChatModel{}, 0, fault.NotFound("conversation")
	}
	if conv == "" && c.QueryParam("new") == "" {
		var err error
		if conv, err = h.Assistant.LatestConversationOf(ctx, p); err != nil {
			return views.AssistantChatModel{}, 0, err
		}
	}
	m := views.AssistantChatModel{ConversationID: conv}
	var seen int64
	if conv != "" {
		ms, turn, err := h.Assistant.ShownOf(ctx, p, conv, historyShown)
		if err != nil {
			return m, 0, err
		}
		seen = turn
		for i, msg := range ms {
			v := messageView(msg)
			if i > 0 && v.Person {
				v.Body = choiceLabel(ms[i-1].Choices, msg.Body)
			}
			m.Messages = append(m.Messages, v)
		}
		// Only the last reply's choices are open; older ones answer nothing now, but stay
		// shown (a list of tools is given as choices).
		for i := range m.Messages[:max(len(m.Messages)-1, 0)] {
			m.Messages[i].Spent = true
		}
	}
	return m, seen, nil
}

// choiceLabel is what a person's message reads as in the conversation: the label of
// the choice they clicked ("Yes, guide me"), not the target it sent ("yes"), when the
// reply before offered a choice with that target; their own words otherwise.
func choiceLabel(offered []assistant.Choice, said string) string {
	for _, ch := range offered {
		if ch.Target == said && ch.Label != "" {
			return ch.Label
		}
	}
	return said
}

func messageView(m assistant.Message) views.AssistantMessage {
	out := views.AssistantMessage{Person: m.Author == "person", Body: m.Body, Question: m.Question}
	for _, ch := range m.Choices {
		out.Choices = append(out.Choices, views.AssistantChoice{Label: ch.Label, Target: ch.Target})
	}
	for _, a := range m.Actions {
		out.Actions = append(out.Actions, views.AssistantAction{Name: a.Name, Href: a.Href, OK: a.OK, Error: a.Error})
	}
	return out
}

// Send answers the chat form: the two new messages as a fragment for htmx, or the page
// again without JavaScript.
func (h AssistantHandler) Send(c echo.Context) error {
	conv, msg := c.FormValue("conversation_id"), c.FormValue("message")
	var question int64
	if q := c.FormValue("question"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 1 {
			return verr.New("question", "is not a question this conversation asked")
		}
		question = n
	}
	var seen int64
	if q := c.FormValue("seen"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 0 {
			return verr.New("seen", "is not a turn of this conversation")
		}
		seen = n
	}
	r, err := h.Assistant.Handle(c.Request().Context(), PrincipalOf(c), ActorOf(c), conv, msg, question, seen)
	if err != nil {
		return err
	}
	if c.Request().Header.Get("HX-Request") != "true" {
		return c.Redirect(http.StatusSeeOther, "/assistant?c="+r.ConversationID)
	}
	c.Response().Header().Set("HX-Trigger", `{"assistant-replied":{"conversation_id":"`+r.ConversationID+`"}}`)
	reply := assistant.Message{Author: "assistant", Body: r.Reply, Choices: r.Choices, Actions: r.Actions, Question: r.Question}
	shown := msg
	if label := strings.TrimSpace(c.FormValue("label")); label != "" {
		shown = label // a choice clicked: read as it was offered (the page after a reload says the same)
	}
	return render(c, http.StatusOK, views.AssistantReplied(r.ConversationID,
		[]views.AssistantMessage{{Person: true, Body: shown}, messageView(reply)}, r.Turn))
}

// APIMessage answers POST /api/v1/assistant/messages {"conversation_id","message"}.
func (h AssistantHandler) APIMessage(c echo.Context) error {
	var in struct {
		ConversationID string `json:"conversation_id"`
		Message        string `json:"message"`
		InReplyTo      int64  `json:"in_reply_to"`
		Seen           int64  `json:"seen"`
	}
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	if in.InReplyTo < 0 {
		return verr.New("in_reply_to", "is not a question this conversation asked")
	}
	if in.Seen < 0 {
		return verr.New("seen", "is not a turn of this conversation")
	}
	r, err := h.Assistant.Handle(c.Request().Context(), PrincipalOf(c), ActorOf(c), in.ConversationID, in.Message, in.InReplyTo, in.Seen)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}
