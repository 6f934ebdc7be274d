package web

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/verr"
)

// refuseBadText answers 400 naming the field when the request's path parameters, query,
// form or JSON body hold text that is not text: a NUL byte, bytes that are not UTF-8, or
// (in JSON) a lone surrogate escape; or when a JSON body gives one key twice in an
// object. Nothing is changed by such a request.
func refuseBadText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if strings.HasPrefix(req.URL.Path, "/static/") {
			return next(c)
		}
		names := c.ParamNames()
		for i, v := range c.ParamValues() {
			if why := textcheck.Bad(v); why != "" && i < len(names) {
				return verr.New(names[i], why)
			}
		}
		if why := textcheck.Bad(req.URL.Path); why != "" {
			return verr.New("path", why)
		}
		// A query the form parser cannot read is refused here: URL.Query drops its bad
		// pairs silently, and a handler reading the form later met the error as a 500.
		q, err := url.ParseQuery(req.URL.RawQuery)
		if err != nil {
			return verr.New("query", "is not a query string the server can read: "+err.Error())
		}
		if err := valuesText(q); err != nil {
			return err
		}
		if req.Body == nil || req.Body == http.NoBody || req.Method == http.MethodGet || req.Method == http.MethodHead {
			return next(c)
		}
		ct, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
		switch {
		case ct == echo.MIMEApplicationForm || ct == echo.MIMEMultipartForm:
			f, err := c.FormParams()
			if err != nil {
				return verr.New("body", "is not a form the server can read: "+err.Error())
			}
			if err := valuesText(f); err != nil {
				return err
			}
		case handlers.IsJSONMediaType(req.Header.Get(echo.HeaderContentType)) || handlers.IsAPI(c):
			body, err := io.ReadAll(req.Body)
			if err != nil {
				var mb *http.MaxBytesError
				if errors.As(err, &mb) {
					return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "the request body is too large")
				}
				return err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			if ptr, why, found := textcheck.JSON(body); found {
				return verr.New(ptr, why)
			}
			// One strict rule for every JSON body (tool arguments and plans included): a
			// key given twice in one object is refused, naming it.
			if ptr, found := textcheck.DuplicateKey(body); found {
				return verr.New(ptr, textcheck.WhyDuplicate)
			}
		}
		return next(c)
	}
}

// valuesText checks the names and values of a query or form.
func valuesText(vs url.Values) error {
	keys := make([]string, 0, len(vs))
	for k := range vs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same input always names the same field
	for _, k := range keys {
		if why := textcheck.Bad(k); why != "" {
			return verr.New(strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", ""), "\uFFFD"), "the parameter's name "+why)
		}
		for _, v := range vs[k] {
			if why := textcheck.Bad(v); why != "" {
				return verr.New(k, why)
			}
		}
	}
	return nil
}
