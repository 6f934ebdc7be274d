package web_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestToolHeadBackFollowsTheTab: the head of a tool page asks for the bare page on every
// tab (its live updates are the same for all tabs), so Validate returns to the page of
// that tool it was used on, which the Referer names; a Referer elsewhere, or a form that
// names its own back, is not followed.
func TestToolHeadBackFollowsTheTab(t *testing.T) {
	t.Parallel()
	e := tdStart(t)
	id := e.ids["echo"]
	page, other := "/tools/"+id, "/tools/"+e.ids["sneaky"]
	for _, tc := range []struct{ back, referer, want string }{
		{page, e.srv.URL + page + "?tab=schema", page + "?tab=schema"},
		{page, e.srv.URL + page + "/test?case=x", page + "/test?case=x"},
		{page, e.srv.URL + page + "/access", page + "/access"},
		{page, e.srv.URL + page + "/configure", page + "?tab=configuration"}, // a refused configuration
		{page, e.srv.URL + page, page},
		{page, "", page},
		{page, e.srv.URL + other + "?tab=schema", page},               // another tool
		{page, e.srv.URL + page + "/validate", page},                  // no page of its own
		{page, "http://elsewhere.example" + page + "?tab=logs", page}, // another site
		{page + "?tab=history", e.srv.URL + page + "?tab=schema", page + "?tab=history"},
		{"/tools?q=x", e.srv.URL + page + "?tab=schema", "/tools?q=x"},
	} {
		res := e.srv.PostFormHeaders(t, e.admin, page+"/validate", url.Values{"back": {tc.back}}, map[string]string{"Referer": tc.referer})
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != tc.want {
			t.Errorf("back %q from %q: got %d to %q, want %q", tc.back, tc.referer, res.StatusCode, res.Header.Get("Location"), tc.want)
		}
	}
}
