package httperr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// TestClassify pins the API's answers (status and the JSON error body) that the
// per-package error types gave before there was one vocabulary.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"plain", errors.New("boom"), 500, `{"code":"internal","message":"Something went wrong on our side; it has been logged."}`},
		{"auth not found", fmt.Errorf("auth: x: %w", auth.ErrNotFound), 404, `{"code":"not_found","message":"Not found."}`},
		{"execution not found", executions.ErrNotFound, 404, `{"code":"not_found","message":"Not found."}`},
		{"unauthenticated", auth.ErrUnauthenticated, 401, `{"code":"unauthenticated","message":"Sign in, or send an API token as 'Authorization: Bearer \u003ctoken\u003e'."}`},
		{"token mints token", auth.ErrTokenMintsToken, 403, `{"code":"forbidden","message":"an API token cannot create API tokens: sign in to create one"}`},
		{"trust", registry.ErrTrustChange, 403, `{"code":"forbidden","message":"only administrators can mark a server trusted or untrusted: trust decides how risky its tools are"}`},
		{"throttled", auth.Throttled(90*time.Second, "address"), 429,
			`{"code":"rate_limited","message":"too many failed sign-ins for this address; try again in 1m30s","details":{"retry_after_seconds":90}}`},
		{"illegal", toolstate.Illegal("enabled", "verified"), 409,
			`{"code":"illegal_transition","message":"a tool that is enabled cannot become verified; from enabled it can become disabled, updating","details":{"from":"enabled","to":"verified"}}`},
		{"override", toolstate.Override("invalid", "enabled", "it is invalid"), 422,
			`{"code":"override_required","message":"a tool that is invalid becomes enabled only with an override: it is invalid; give a reason"}`},
		{"not connected", mcpclient.ErrNotConnected.Withf("%s: it is disabled", mcpclient.ErrNotConnected.Message), 409,
			`{"code":"not_connected","message":"server is not connected: it is disabled"}`},
		{"fields", verr.New("name", "is required"), 400,
			`{"code":"invalid_input","message":"invalid input: name: is required","details":[{"path":"name","message":"is required"}]}`},
		{"echo", echo.NewHTTPError(http.StatusMethodNotAllowed, "Method Not Allowed"), 405, `{"code":"method_not_allowed","message":"Method Not Allowed"}`},
		{"echo 503", echo.NewHTTPError(http.StatusServiceUnavailable, "shutting down"), 503, `{"code":"unavailable","message":"shutting down"}`},
	} {
		r := httperr.Classify(tc.err)
		body, err := json.Marshal(struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details any    `json:"details,omitempty"`
		}{r.Code, r.Message, r.Details})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != tc.status || string(body) != tc.body {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, r.Status, body, tc.status, tc.body)
		}
	}
}

// TestPageMessage pins the words a flash or form shows, and which errors are the
// person's to fix.
func TestPageMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		msg  string
		mine bool
	}{
		{"plain", errors.New("boom"), "", false},
		{"forbidden", registry.ErrTrustChange, "", false},
		{"execution not found", executions.ErrNotFound, "That execution does not exist.", true},
		{"tool not found", tools.ErrNotFound, "That tool no longer exists; it may have been removed with its server.", true},
		{"server not found", registry.ErrNotFound, "That no longer exists; it may have been deleted.", true},
		{"not connected", mcpclient.ErrNotConnected, "This server is not connected.", true},
		{"illegal", toolstate.Illegal("enabled", "verified"), "A tool that is enabled cannot become verified; from enabled it can become disabled, updating.", true},
		{"fields", verr.New("name", "is required"), "invalid input: name: is required", true},
		{"throttled", auth.Throttled(time.Second, "address"), "", false},
	} {
		msg, mine := httperr.PageMessage(tc.err)
		if msg != tc.msg || mine != tc.mine {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, msg, mine, tc.msg, tc.mine)
		}
	}
}
