package handlers

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
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

// bindJSON decodes the request body, turning a malformed body into a field error. An
// empty body leaves v as it is. A body must be sent as JSON (application/json or any
// +json) and be one JSON value: a form-encoded body used to bind as an empty object, so
// the request "succeeded" having done nothing.
func bindJSON(c echo.Context, v any) error {
	req := c.Request()
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	defer func() { req.Body = io.NopCloser(bytes.NewReader(body)) }() // for bindJSONStrict
	// A form body was read (and emptied) by web's text check; it still was a body.
	sent := len(body) > 0 || req.ContentLength > 0 || len(req.PostForm) > 0 || req.MultipartForm != nil
	if !sent {
		return nil
	}
	if !IsJSONMediaType(req.Header.Get(echo.HeaderContentType)) {
		return verr.New("body", "send the body as JSON with Content-Type: application/json")
	}
	if ptr, bad := textcheck.CaseClash(body, v); bad {
		return verr.New(ptr, textcheck.WhyCaseClash)
	}
	// Duplicate keys and text that is not text were refused on the raw body before this
	// (web's text check).
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return verr.New("body", "has more after the JSON value: send one JSON value")
	}
	return nil
}

// IsJSONMediaType reports whether a Content-Type is JSON: application/json or any
// +json type (application/merge-patch+json), in any case, with any parameters. (A
// malformed parameter, "charset" alone, still names the type: ParseMediaType returns it.)
func IsJSONMediaType(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == echo.MIMEApplicationJSON || strings.HasSuffix(mt, "+json")
}

// decodeError words a decoding error for the caller: the field by its pointer and the
// kind of JSON value it takes, or where the JSON stops being JSON.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		path := "body"
		if te.Field != "" {
			path = "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		// The path leaves out array indexes (encoding/json names fields only): the byte
		// offset says which element.
		return verr.New(path, fmt.Sprintf("must be %s (at byte %d)", bodyKind(te.Type), te.Offset))
	case errors.As(err, &se):
		return verr.New("body", fmt.Sprintf("is not valid JSON (at byte %d)", se.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return verr.New("body", "is not valid JSON (it ends early)")
	}
	return verr.New("body", "must be a JSON object matching the documented shape: "+err.Error())
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// bodyKind names the JSON value that decodes into t, with its article.
func bodyKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value of another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string (base64)"
		}
		return "an array"
	}
	return "a JSON value of another type"
}
