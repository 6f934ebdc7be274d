package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// "Signed in now" names everyone signed in and their role: which accounts are worth
// targeting, and when each was last active. Only administrators and auditors see it, on
// the dashboard and over the websocket alike (live and replayed); guests, tool users and
// tool managers get neither the panel nor the sessions topic's fragments.
func TestSignedInNowOnlyForAdministratorsAndAuditors(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "signed-in-password-1"
	viewers := []struct {
		user string
		role auth.Role
		sees bool
	}{
		{"admin", auth.RoleAdmin, true},
		{"sn-auditor", auth.RoleAuditor, true},
		{"sn-guest", auth.RoleGuest, false},
		{"sn-user", auth.RoleToolUser, false},
		{"sn-manager", auth.RoleToolManager, false},
	}
	srv.CreateUser(t, "sn-watched", auth.RoleToolManager, pw)
	clients := map[string]*http.Client{}
	for _, v := range viewers {
		password := pw
		if v.role == auth.RoleAdmin {
			password = webtest.AdminPassword
		} else {
			srv.CreateUser(t, v.user, v.role, pw)
		}
		clients[v.user] = srv.Login(t, v.user, password)
	}

	// What a dashboard subscribes to, and tools (which every role follows) so that the
	// socket stays open whatever it is refused. One socket each is open when sn-watched
	// signs in; one each opens after it and replays it.
	topics := []string{"sessions", audit.Topic, registry.ToolsTopic}
	cursor := lastEventID(t, srv)
	live := map[string]*websocket.Conn{}
	for _, v := range viewers {
		live[v.user] = wsDial(t, srv, clients[v.user], topics, cursor)
	}
	// The sockets are subscribed once their first check is made: a sign-in published
	// before that is replayed from the cursor all the same.
	srv.Login(t, "sn-watched", pw)
	replayed := map[string]*websocket.Conn{}
	for _, v := range viewers {
		replayed[v.user] = wsDial(t, srv, clients[v.user], topics, cursor)
	}

	for _, v := range viewers {
		others := []string{"sn-watched"}
		for _, o := range viewers {
			if o.user != v.user && o.user != "admin" {
				others = append(others, o.user)
			}
		}

		// The page.
		res := srv.Get(t, clients[v.user], "/")
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: dashboard %d %v", v.user, res.StatusCode, err)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		row := doc.Find(`[data-testid="signed-in-user"][data-username="sn-watched"]`)
		if v.sees {
			if row.Length() != 1 {
				t.Errorf("%s: sn-watched is not listed in Signed in now", v.user)
			} else if !strings.Contains(row.Text(), auth.RoleToolManager.Label()) {
				t.Errorf("%s: sn-watched's role is not shown: %q", v.user, row.Text())
			}
		} else {
			if doc.Find(`[data-testid="signed-in"]`).Length() != 0 {
				t.Errorf("%s: the dashboard shows Signed in now", v.user)
			}
			for _, o := range others {
				if strings.Contains(string(body), o) {
					t.Errorf("%s: the dashboard names %s", v.user, o)
				}
			}
			if topics, _ := doc.Find("[data-topics]").Attr("data-topics"); strings.Contains(topics, "sessions") {
				t.Errorf("%s: the dashboard follows the sessions topic (%q)", v.user, topics)
			}
		}

		// The sockets.
		for what, conn := range map[string]*websocket.Conn{"live": live[v.user], "replayed": replayed[v.user]} {
			if v.sees {
				frag := wsUntil(t, conn, v.user+": the "+what+" sign-in of sn-watched", func(d *goquery.Document) bool {
					return d.Find(`[data-testid="signed-in-user"][data-username="sn-watched"]`).Length() == 1
				})
				if !strings.Contains(frag.Find(`[data-username="sn-watched"]`).Text(), auth.RoleToolManager.Label()) {
					t.Errorf("%s: the %s fragment does not show sn-watched's role", v.user, what)
				}
				continue
			}
			// Whatever the socket sends (the sign-in's event was published before the
			// page above was read, and the sockets of those who see it got it), until it
			// is quiet or closed.
			for _, msg := range wsDrain(conn, 2*time.Second) {
				if strings.Contains(msg, `signed-in`) {
					t.Errorf("%s: the %s socket sent the Signed in now panel: %.300s", v.user, what, msg)
				}
				for _, o := range others {
					if strings.Contains(msg, o) {
						t.Errorf("%s: the %s socket named %s: %.300s", v.user, what, o, msg)
					}
				}
			}
		}
	}
}

// wsDrain reads what conn sends until it is quiet for d or ends.
func wsDrain(conn *websocket.Conn, d time.Duration) []string {
	var out []string
	for {
		_ = conn.SetReadDeadline(time.Now().Add(d))
		_, msg, err := conn.ReadMessage()
		if err != nil { // quiet (a timeout) or closed
			return out
		}
		out = append(out, string(msg))
	}
}
