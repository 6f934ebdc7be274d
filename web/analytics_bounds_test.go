package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// Periods the analytics and the tool page cannot show are refused 400 naming the
// field, not served as a 500 or as another period: a from and to that parse but lie in
// the year 10000 in UTC, and a Usage range that is none of the tab's.
func TestAnalyticsBounds(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	for _, c := range []struct{ query, field string }{
		{"from=9999-12-31T20:00:00-05:00&to=9999-12-31T23:00:00-05:00", "from"},
		{"from=9999-12-31T12:00:00Z&to=9999-12-31T23:00:00-05:00", "to"},
		{"from=1969-12-31T00:00:00Z&to=1970-01-02T00:00:00Z", "from"},
	} {
		if status, raw := api.do(http.MethodGet, "/api/v1/analytics?"+c.query, nil); status != http.StatusBadRequest ||
			!strings.Contains(string(raw), `"path":"`+c.field+`"`) {
			t.Errorf("?%s: %d %s, want 400 naming %s", c.query, status, raw, c.field)
		}
	}
	api.json(http.MethodGet, "/api/v1/analytics?from=9999-12-30T00:00:00Z&to=9999-12-31T23:59:59Z", nil, http.StatusOK, nil)

	liveServer(t, srv, "mt", true, "echo")
	id := toolID(t, srv, "mt__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	for _, c := range []struct {
		rng  string
		want int
	}{{"99d", http.StatusBadRequest}, {"7D", http.StatusBadRequest}, {"7d", http.StatusOK}, {"", http.StatusOK}} {
		res := srv.Get(t, admin, "/tools/"+id+"?tab=usage&range="+c.rng)
		html := bodyString(t, res)
		if res.StatusCode != c.want || c.want == http.StatusBadRequest && !strings.Contains(html, "must be 24h, 7d or 30d") {
			t.Errorf("range %q: %d %.300s, want %d", c.rng, res.StatusCode, html, c.want)
		}
	}
}
