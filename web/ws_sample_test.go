package web_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/web"
)

// appendAudit records an audit entry, announced on the audit topic, and returns the
// newest event id after it.
func appendAudit(t *testing.T, srv *webtest.Server, action string) int64 {
	t.Helper()
	ctx := context.Background()
	if err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		_, err := audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: action, TargetType: "test", TargetID: action})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return lastEventID(t, srv)
}

// wsCursorReaches reads conn until a message moves the page's cursor to id or past it,
// failing after within; it returns the messages read. A reload toast fails it unless
// reload is set.
func wsCursorReaches(t *testing.T, conn *websocket.Conn, id int64, within time.Duration, reload bool) []string {
	t.Helper()
	var msgs []string
	deadline := time.Now().Add(within)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for the cursor to reach %d: %v (after %q)", id, err, msgs)
		}
		s := string(msg)
		msgs = append(msgs, s)
		if !reload && strings.Contains(s, "missed too many live updates") {
			t.Fatalf("the page was told to reload: %s", s)
		}
		newest := int64(0)
		for rest := s; ; {
			i := strings.Index(rest, `data-last-event-id="`)
			if i < 0 {
				break
			}
			rest = rest[i+len(`data-last-event-id="`):]
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, '"')], 10, 64)
			newest = max(newest, n)
		}
		if newest >= id {
			return msgs
		}
	}
}

// A page that samples topics (the dashboard: the audit log and the navigation's
// approvals count) does not wake while nothing happens on them: every such socket woke
// four times a second to find nothing held, so a thousand idle dashboards cost four
// thousand wake-ups a second. A sampled event still reaches it within the sampling
// period.
func TestIdleSampledSocketDoesNotWake(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	conn := wsDial(t, srv, admin, []string{audit.Topic, handlers.NavTopic(executions.Topic)}, lastEventID(t, srv))
	// Once the first entry arrived (live or replayed), the socket is subscribed.
	wsCursorReaches(t, conn, appendAudit(t, srv, "test.first"), 20*time.Second, false)
	// A replayed entry the subscription held too wakes the socket once more, at the
	// next tick, to drop it.
	time.Sleep(2 * web.WSSampleEvery)

	before := web.SampleWakes(srv.Web)
	time.Sleep(6 * web.WSSampleEvery)
	if n := web.SampleWakes(srv.Web) - before; n != 0 {
		t.Errorf("an idle socket woke %d times in %s to send its sampled topics, want none", n, 6*web.WSSampleEvery)
	}

	start := time.Now()
	id := appendAudit(t, srv, "test.second")
	wsCursorReaches(t, conn, id, 20*time.Second, false)
	// The period, with room for a slow machine's commit and rendering.
	if took := time.Since(start); took > web.WSSampleEvery+time.Second {
		t.Errorf("a sampled event took %s to arrive, want about %s at most", took, web.WSSampleEvery)
	}
	if web.SampleWakes(srv.Web) == before {
		t.Error("the sampled event arrived without the socket waking for it")
	}
}

// A page whose cursor is past the newest event (the database lost its latest commits,
// and hands their ids out again) is told to reload and then gets the live events: it
// dropped every one as already seen, for as long as the ids stayed below its cursor.
func TestCursorPastTheNewestEventReloads(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	newest := lastEventID(t, srv)
	conn := wsDial(t, srv, admin, []string{audit.Topic, executions.Topic}, newest+1000)
	msgs := wsCursorReaches(t, conn, newest, 20*time.Second, true)
	if !strings.Contains(strings.Join(msgs, ""), "missed too many live updates") {
		t.Fatalf("a page with a cursor past the newest event was not told to reload: %q", msgs)
	}
	wsCursorReaches(t, conn, appendAudit(t, srv, "test.after"), 20*time.Second, false)
}

// Whom a sessions event is about is read once for every socket (hub.aboutUser), and
// still ends that person's sockets alone: one person signing out leaves another's
// page streaming.
func TestSignOutEndsOnlyThatPersonsSockets(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "aud1", auth.RoleAuditor, "aud-password-12345")
	srv.CreateUser(t, "aud2", auth.RoleAuditor, "aud-password-12345")
	one := srv.Login(t, "aud1", "aud-password-12345")
	two := srv.Login(t, "aud2", "aud-password-12345")
	cursor := lastEventID(t, srv)
	// One socket each following the sessions topic, one each following it only for its
	// own checks.
	var ones, twos []*websocket.Conn
	for _, topics := range [][]string{{audit.Topic, auth.SessionsTopic}, {audit.Topic}} {
		ones = append(ones, wsDial(t, srv, one, topics, cursor))
		twos = append(twos, wsDial(t, srv, two, topics, cursor))
	}
	id := appendAudit(t, srv, "test.subscribed")
	for _, conn := range ones {
		wsCursorReaches(t, conn, id, 20*time.Second, false)
	}
	for _, conn := range twos {
		wsCursorReaches(t, conn, id, 20*time.Second, false)
	}

	res := srv.PostForm(t, one, "/logout", url.Values{})
	res.Body.Close()
	for _, conn := range ones {
		wsClosedWith(t, conn, 4401, 10*time.Second, "aud1's socket after aud1 signed out")
	}
	id = appendAudit(t, srv, "test.after_sign_out")
	for _, conn := range twos {
		wsCursorReaches(t, conn, id, 20*time.Second, false)
	}
}
