package handlers

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/router"
)

// callRequest is the body of POST /api/v1/tools/call (docs/api.md).
type callRequest struct {
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	ConversationID string          `json:"conversation_id"`
}

// APICall calls a tool through the router: {"tool","arguments"} → the normalized result,
// or an error whose code says what to do (invalid_arguments, approval_required, ...).
func (h ToolsHandler) APICall(c echo.Context) error {
	var in callRequest
	// A misspelt "arguments" would call the tool with none.
	if err := bindJSONStrict(c, &in); err != nil {
		return err
	}
	p := PrincipalOf(c)
	res, err := h.Router.Call(c.Request().Context(), router.Call{Tool: in.Tool, Arguments: in.Arguments, Actor: ActorOf(c),
		Role: p.User.Role, Source: router.SourceAPI, ConversationID: in.ConversationID})
	if err != nil {
		return err // the error handler adds Retry-After to rate_limited
	}
	return c.JSON(http.StatusOK, res)
}
