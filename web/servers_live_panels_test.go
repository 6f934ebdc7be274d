package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestServerPageLivePanels: a server's live update carries its page's Connection and
// Health panels with its head, so an edit elsewhere and a reconnection show there too.
func TestServerPageLivePanels(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "panels"})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ctx := context.Background()
	dead := refusedAddress(t)
	sv := mustCreate(t, srv, registry.Spec{Name: "panels", Type: registry.TypeStreamableHTTP, URL: dead, Enabled: true})
	api := svClient{t: t, srv: srv, c: admin}
	api.waitServer(sv.ID, "in error", func(s svServer) bool { return s.Status == registry.StatusError })

	// The page as it is now: the panels have ids the live updates aim at.
	doc := page(t, srv.Get(t, admin, "/servers/"+sv.ID))
	if doc.Find("#server-conn-panel-"+sv.ID).Length() != 1 || doc.Find("#server-health-panel-"+sv.ID).Length() != 1 {
		t.Error("the server page has no Connection or Health panel with an id for live updates")
	}

	// A colleague points it at a working address: it reconnects.
	conn := wsDial(t, srv, admin, []string{registry.ServersTopic}, lastEventID(t, srv))
	good := up.URL()
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{URL: &good}); err != nil {
		t.Fatal(err)
	}
	head := func(status string) func(*goquery.Document) bool {
		return func(d *goquery.Document) bool {
			return d.Find("#server-head-"+sv.ID).AttrOr("data-status", "") == status
		}
	}
	panels := func(d *goquery.Document, what string) *goquery.Selection {
		t.Helper()
		p := d.Find("#server-conn-panel-" + sv.ID)
		if p.Length() != 1 || d.Find("#server-health-panel-"+sv.ID).Length() != 1 {
			t.Fatalf("%s: the live update has the head but not the Connection and Health panels", what)
		}
		return p
	}
	// The edit's own update: the new address.
	frag := wsUntil(t, conn, "the edit's update", func(d *goquery.Document) bool {
		return d.Find("#server-head-"+sv.ID).Length() == 1 && strings.Contains(d.Find("#server-head-"+sv.ID).Text(), good)
	})
	if p := panels(frag, "after the edit"); !strings.Contains(p.Text(), good) || strings.Contains(p.Text(), dead) {
		t.Errorf("after the edit: the Connection panel says %q, want the new URL %s", strings.Join(strings.Fields(p.Text()), " "), good)
	}
	// The reconnection: the panel no longer says when the next attempt is.
	frag = wsUntil(t, conn, "the connected update", head(registry.StatusConnected))
	p := panels(frag, "once connected")
	if strings.Contains(p.Text(), "Next connection attempt") || p.Find("[data-testid=breaker-open]").Length() != 0 {
		t.Errorf("once connected: the Connection panel still says %q", strings.Join(strings.Fields(p.Text()), " "))
	}
}

// TestServerListLiveNew: a server registered elsewhere gets a card on the list's first,
// unfiltered page, once, and the count next to the title follows.
func TestServerListLiveNew(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ctx := context.Background()
	mustCreate(t, srv, disabledSpec("already-here"))

	doc := page(t, srv.Get(t, admin, "/servers"))
	before := doc.Find("[data-testid=server-card]").Length()
	if doc.Find("ul#server-cards").Length() != 1 {
		t.Fatal("the list's first page has no #server-cards for new cards")
	}
	if doc := page(t, srv.Get(t, admin, "/servers?q=already")); doc.Find("#server-cards").Length() != 0 {
		t.Error("a filtered list takes new cards live: it cannot tell whether they match")
	}

	conn := wsDial(t, srv, admin, []string{registry.ServersTopic}, lastEventID(t, srv))
	sv := mustCreate(t, srv, disabledSpec("added-elsewhere"))
	frag := wsUntil(t, conn, "the new server's update", func(d *goquery.Document) bool {
		return d.Find("#server-card-"+sv.ID).Length() > 0
	})
	add := frag.Find("ul#server-cards")
	if add.Length() != 1 || add.AttrOr("hx-swap-oob", "") != "afterbegin" || add.Find("li#server-card-"+sv.ID).Length() != 1 {
		t.Fatalf("the new server's update does not add its card to #server-cards (afterbegin)")
	}
	if got, want := frag.Find("#server-total").Text(), "("+strconv.Itoa(before+1)+")"; got != want {
		t.Errorf("the new server's update: total %q, want %q", got, want)
	}

	// Its later updates replace the card, never add it again.
	desc := "edited"
	if _, err := srv.Registry.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	frag = wsUntil(t, conn, "the edit's update", func(d *goquery.Document) bool {
		return strings.Contains(d.Find("#server-card-"+sv.ID).Text(), desc)
	})
	if frag.Find("ul#server-cards").Length() != 0 {
		t.Error("an edit's update adds the card again")
	}

	// A deletion takes the count down.
	if status, _ := (svClient{t: t, srv: srv, c: admin}).do(http.MethodDelete, "/api/v1/servers/"+sv.ID, nil); status != http.StatusNoContent {
		t.Fatalf("delete: got %d", status)
	}
	frag = wsUntil(t, conn, "the deletion's update", func(d *goquery.Document) bool {
		return d.Find("#server-card-"+sv.ID).AttrOr("hx-swap-oob", "") == "delete"
	})
	if got, want := frag.Find("#server-total").Text(), "("+strconv.Itoa(before)+")"; got != want {
		t.Errorf("after the deletion: total %q, want %q", got, want)
	}
}
