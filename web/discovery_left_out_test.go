package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// Tools a discovery left out for their names are shown with its run on the server's
// page and counted in the API's answer, not only logged.
func TestDiscoveryRunShowsToolsLeftOut(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := srv.LiveServer(t, "odd", true)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "tab\tname"})
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	sv, err := srv.Registry.GetServerByName(context.Background(), "odd")
	if err != nil {
		t.Fatal(err)
	}
	id := sv.ID
	var res struct {
		LeftOut int `json:"left_out"`
	}
	admin.json(http.MethodPost, "/api/v1/servers/"+id+"/discover", nil, 200, &res)
	if res.LeftOut != 1 {
		t.Errorf("the discovery's answer counts %d tools left out, want 1", res.LeftOut)
	}
	d := page(t, srv.Get(t, admin.c, "/servers/"+id))
	got := strings.Join(strings.Fields(d.Find("[data-testid=discovery-run]").First().Find("[data-testid=run-left-out]").Text()), " ")
	if !strings.Contains(got, "1 tool left out") || !strings.Contains(got, `"tab\tname": a control character in its name`) {
		t.Errorf("the latest run says %q, want the tool left out and why", got)
	}
}
