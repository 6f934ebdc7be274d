package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// formErrors turns a *verr.Error into per-field messages; ok is false for other errors.
func formErrors(err error) (views.FormErrors, bool) {
	var ve *verr.Error
	if !errors.As(err, &ve) {
		return nil, false
	}
	// Several problems with one field (a template's, each at its line): one a line,
	// joined once (joined as they come, many problems cost the square of their length).
	lines := map[string][]string{}
	for _, f := range ve.Fields {
		lines[f.Field] = append(lines[f.Field], f.Message)
	}
	fe := views.FormErrors{}
	for field, ls := range lines {
		fe[field] = strings.Join(ls, "\n")
	}
	return fe, true
}

// userMessage is the text to show a person for an error that is theirs to fix
// (a conflict or bad input), and false for anything else.
func userMessage(err error) (string, bool) { return httperr.PageMessage(err) }

// bindJSONStrict is bindJSON that also refuses a key the shape does not have, naming
// it: for a body where a misspelt key would silently drop what it held (a plan's
// rollback).
func bindJSONStrict(c echo.Context, v any) error {
	if err := bindJSON(c, v); err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return verr.New("body", "has the key "+name+", which the documented shape does not: check its spelling")
		}
	}
	return nil
}

// bindJSON decodes the request body, turning a malformed body into a field error.
func bindJSON(c echo.Context, v any) error {
	req := c.Request()
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		defer func() { req.Body = io.NopCloser(bytes.NewReader(body)) }() // for bindJSONStrict
		if ptr, bad := textcheck.CaseClash(body, v); bad {
			return verr.New(ptr, textcheck.WhyCaseClash)
		}
	}
	if err := (&echo.DefaultBinder{}).BindBody(c, v); err != nil {
		return verr.New("body", "must be a JSON object matching the documented shape: "+err.Error())
	}
	return nil
}
