package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// A poll of a run that names a replica this one cannot reach (a wrong advertised
// address, none, a replica that just died) is answered here, where the run is not
// kept: the page says the run is over instead of asking on in vain. (Cancel is not:
// TestUnreachableReplicaAnswers.)
func TestRunOfAnUnreachableReplica(t *testing.T) {
	t.Parallel()
	srv, admin, tool, ln := forwardFixture(t, nil)
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, address := range []string{closed, ""} {
		id := uuid.NewString()
		if _, err := srv.Pool.Exec(context.Background(), `INSERT INTO replicas (id, name, address, host, pid) VALUES ($1, $2, $3, 'elsewhere', 1)`,
			id, "r-"+id[:8], address); err != nil {
			t.Fatal(err)
		}
		at := "?replica=" + id
		call := uuid.NewString()
		for _, ask := range []struct {
			method, path, want string
		}{
			{http.MethodGet, "/tools/" + tool + "/test/runs/" + call + at, "This run is over and no longer kept"},
			{http.MethodGet, "/servers/test/runs/ABCDEF" + at, "this test is over and its result is gone"},
		} {
			var res *http.Response
			if ask.method == http.MethodGet {
				res = hxGet(t, srv, admin, ask.path)
			} else {
				res = srv.PostFormHeaders(t, admin, ask.path, url.Values{"x": {"1"}}, map[string]string{"HX-Request": "true"})
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(b), ask.want) {
				t.Errorf("%s %s (replica at %q): got %d %s, want 200 saying %q", ask.method, ask.path, address, res.StatusCode, b, ask.want)
			}
		}
	}
}
