package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A server search longer than 200 characters is refused naming q, as the tools list's
// is: each row matched the words again, and a search of a megabyte cost seconds of the
// database's CPU a request.
func TestServerSearchBounded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	long := url.QueryEscape(strings.Repeat("x", 201))
	api := webtest.API{T: t, Srv: srv, C: admin}
	api.JSON(http.MethodGet, "/api/v1/servers?q="+long, nil, http.StatusBadRequest, nil)
	api.JSON(http.MethodGet, "/api/v1/servers?q="+url.QueryEscape(strings.Repeat("x", 200)), nil, http.StatusOK, nil)
	if res := srv.Get(t, admin, "/servers?q="+long); res.StatusCode != http.StatusBadRequest {
		t.Errorf("/servers with a 201-character search: %d, want 400", res.StatusCode)
	}
}
