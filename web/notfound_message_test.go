package web_test

import (
	"net/http"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A not_found says "Not found." for an id that is missing, so it confirms no id, but a
// tool the caller may inspect that has no compensation says what it lacks
// (docs/api.md, Errors).
func TestNotFoundMessageSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "nf", true, "echo")
	srv.CreateUser(t, "ann", auth.RoleToolUser, "ann-password-123")
	ann := svClient{t: t, srv: srv, c: srv.Login(t, "ann", "ann-password-123")}

	for _, tc := range []struct{ path, msg string }{
		{"/api/v1/tools/" + toolID(t, srv, "nf__echo") + "/compensation", "no compensation is configured for this tool"},
		{"/api/v1/tools/nf__echo/compensation", "no compensation is configured for this tool"},
		{"/api/v1/tools/6f1b1f0e-0000-4000-8000-000000000000/compensation", "Not found."},
		{"/api/v1/tools/nf__nope/compensation", "Not found."},
		{"/api/v1/tools/6f1b1f0e-0000-4000-8000-000000000000", "Not found."},
	} {
		e := expectErr(t, ann, http.MethodGet, tc.path, nil, http.StatusNotFound, "not_found")
		if e.Error.Message != tc.msg || string(e.Error.Details) != "null" {
			t.Errorf("GET %s: message %q, details %s; want %q and null", tc.path, e.Error.Message, e.Error.Details, tc.msg)
		}
	}
}
