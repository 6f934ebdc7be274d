package handlers

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// formErrors turns a *verr.Error into per-field messages; ok is false for other errors.
func formErrors(err error) (views.FormErrors, bool) {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return nil, false
	}
	fe := views.FormErrors{}
	for _, f := range ve.Fields {
		if _, dup := fe[f.Field]; !dup {
			fe[f.Field] = f.Message
		}
	}
	return fe, true
}

// userMessage is the text to show a person for an error that is theirs to fix
// (a conflict or bad input), and false for anything else.
func userMessage(err error) (string, bool) {
	var ce *auth.ConflictError
	var ve *verr.Error
	var re *router.Error
	var nu *planner.NotUnderstood
	var xc *executions.ConflictError
	var xp *executions.PhraseError
	var xf *executions.ForbiddenError
	var xs *executions.StaleError
	var xl *executions.PlannerError
	switch {
	case errors.As(err, &re):
		return re.Message, true
	case errors.As(err, &nu):
		return nu.Message, true
	case errors.As(err, &xc), errors.As(err, &xp), errors.As(err, &xl), errors.As(err, &xf), errors.As(err, &xs):
		return sentence(err), true
	case errors.Is(err, executions.ErrNotFound):
		return "That execution does not exist.", true
	case errors.As(err, &ce):
		return ce.Message, true
	case errors.As(err, &ve):
		return ve.Error(), true
	case errors.Is(err, auth.ErrNotFound), errors.Is(err, registry.ErrNotFound):
		return "That no longer exists; it may have been deleted.", true
	case errors.Is(err, mcpclient.ErrNotConnected):
		return "This " + err.Error() + ".", true
	}
	return toolErrorMessage(err)
}

// bindJSON decodes the request body, turning a malformed body into a field error.
func bindJSON(c echo.Context, v any) error {
	if err := (&echo.DefaultBinder{}).BindBody(c, v); err != nil {
		return verr.New("body", "must be a JSON object matching the documented shape: "+err.Error())
	}
	return nil
}
