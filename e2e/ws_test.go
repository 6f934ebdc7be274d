package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// wsRead bounds every read in these tests; a message that does not come in time is a failure.
const wsRead = 15 * time.Second

// cursorRE finds the page cursor that ends every pushed fragment (views.LiveCursor).
var cursorRE = regexp.MustCompile(`id="ws-cursor"[^>]*\sdata-last-event-id="(\d+)"`)

// wsURL is the websocket address of srv's /ws.
func wsURL(srv *webtest.Server) string {
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

// sessionHeader signs in as username and returns handshake headers that carry the
// session cookie, with the given Origin ("" for none).
func sessionHeader(t *testing.T, srv *webtest.Server, username, password, origin string) http.Header {
	t.Helper()
	c := srv.Login(t, username, password)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, ck := range c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	if len(parts) == 0 {
		t.Fatalf("login as %s left no cookie for %s", username, srv.URL)
	}
	h := http.Header{}
	h.Set("Cookie", strings.Join(parts, "; "))
	if origin != "" {
		h.Set("Origin", origin)
	}
	return h
}

// dialStatus dials /ws and expects the handshake to be refused with status want.
func dialStatus(t *testing.T, srv *webtest.Server, h http.Header, want int) {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial(wsURL(srv), h)
	if err == nil {
		conn.Close()
		t.Fatalf("handshake accepted, want HTTP %d", want)
	}
	if !errors.Is(err, websocket.ErrBadHandshake) || res == nil {
		t.Fatalf("dial: %v (want a refused handshake with HTTP %d)", err, want)
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("handshake refused with HTTP %d, want %d", res.StatusCode, want)
	}
}

// subscribe dials /ws and sends the subscription message.
func subscribe(t *testing.T, srv *webtest.Server, h http.Header, topics []string, lastID int64) *websocket.Conn {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial(wsURL(srv), h)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
			res.Body.Close()
		}
		t.Fatalf("dial /ws: %v (HTTP %d)", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetWriteDeadline(time.Now().Add(wsRead))
	if err := conn.WriteJSON(map[string]any{"subscribe": topics, "last_id": lastID}); err != nil {
		t.Fatalf("send subscription: %v", err)
	}
	return conn
}

// readCursor reads one message and returns its cursor (the id of the event it carries).
func readCursor(t *testing.T, conn *websocket.Conn) (int64, string) {
	t.Helper()
	ids, msg := readMessageCursors(t, conn)
	return ids[len(ids)-1], msg
}

// readMessageCursors reads one message and returns every cursor in it: the audit log's
// events come several to a message (web/ws.go, sampledTopics), each fragment with its own.
func readMessageCursors(t *testing.T, conn *websocket.Conn) ([]int64, string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(wsRead))
	typ, msg, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("message type %d, want text", typ)
	}
	ms := cursorRE.FindAllSubmatch(msg, -1)
	if ms == nil {
		t.Fatalf("message has no ws-cursor element: %s", msg)
	}
	ids := make([]int64, len(ms))
	for i, m := range ms {
		id, err := strconv.ParseInt(string(m[1]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids, string(msg)
}

// readCursors reads messages until they carried n cursors and returns those cursors.
func readCursors(t *testing.T, conn *websocket.Conn, n int) []int64 {
	t.Helper()
	out := make([]int64, 0, n)
	for len(out) < n {
		ids, _ := readMessageCursors(t, conn)
		out = append(out, ids...)
	}
	return out
}

func maxEventID(t *testing.T, srv *webtest.Server) int64 {
	t.Helper()
	var id int64
	if err := srv.Pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM events`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// eventIDs lists the ids of the events after afterID on topics, oldest first.
func eventIDs(t *testing.T, srv *webtest.Server, afterID int64, topics ...string) []int64 {
	t.Helper()
	rows, err := srv.Pool.Query(context.Background(),
		`SELECT id FROM events WHERE id > $1 AND topic = ANY($2) ORDER BY id`, afterID, topics)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWebsocketRefusesUnauthenticated(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	h := http.Header{}
	h.Set("Origin", srv.URL)
	dialStatus(t, srv, h, http.StatusUnauthorized)
	dialStatus(t, srv, nil, http.StatusUnauthorized)
}

func TestWebsocketRefusesForeignOrigin(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	dialStatus(t, srv, sessionHeader(t, srv, "admin", webtest.AdminPassword, "http://evil.example"), http.StatusForbidden)
	// Browsers always send Origin on a websocket handshake; a cookie without one is refused too.
	dialStatus(t, srv, sessionHeader(t, srv, "admin", webtest.AdminPassword, ""), http.StatusForbidden)
}

func TestWebsocketStreamsAndResumes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	h := sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL)
	topics := []string{"audit", "sessions"}

	start := maxEventID(t, srv)
	conn := subscribe(t, srv, h, topics, start)

	// Live: each change arrives with a strictly increasing cursor, exactly the events
	// of the subscribed topics.
	srv.CreateUser(t, "carol", auth.RoleToolUser, "carol-password-1234")
	srv.CreateUser(t, "dave", auth.RoleAuditor, "dave-password-1234")
	srv.Login(t, "carol", "carol-password-1234") // an audit and a sessions event
	want := eventIDs(t, srv, start, topics...)
	if len(want) < 4 {
		t.Fatalf("expected at least 4 audit/sessions events after %d, got %v", start, want)
	}
	got := readCursors(t, conn, len(want))
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("cursors not strictly increasing: %v", got)
		}
	}
	if !equalIDs(got, want) {
		t.Fatalf("live cursors %v, want the events %v", got, want)
	}
	last := got[len(got)-1]

	// Disconnect, miss three changes, reconnect from the last cursor seen.
	if err := conn.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second)); err != nil {
		t.Fatalf("close: %v", err)
	}
	conn.Close()
	srv.CreateUser(t, "erin", auth.RoleGuest, "erin-password-1234")
	srv.CreateUser(t, "frank", auth.RoleGuest, "frank-password-1234")
	srv.CreateUser(t, "grace", auth.RoleGuest, "grace-password-1234")
	missed := eventIDs(t, srv, last, topics...)
	if len(missed) != 3 {
		t.Fatalf("expected 3 events while disconnected, got %v", missed)
	}

	conn2 := subscribe(t, srv, h, topics, last)
	replayed := readCursors(t, conn2, len(missed))
	if !equalIDs(replayed, missed) {
		t.Fatalf("replayed cursors %v, want exactly the missed events %v", replayed, missed)
	}
	// Nothing else was replayed: the next message is the next change, not an older event.
	srv.CreateUser(t, "heidi", auth.RoleGuest, "heidi-password-1234")
	next := eventIDs(t, srv, missed[len(missed)-1], topics...)
	if len(next) != 1 {
		t.Fatalf("expected one new event, got %v", next)
	}
	if id, _ := readCursor(t, conn2); id != next[0] {
		t.Fatalf("after the replay got cursor %d, want the new event %d", id, next[0])
	}
}

func TestWebsocketFiltersTopicsByPermission(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "gina", auth.RoleGuest, "gina-password-1234")
	h := sessionHeader(t, srv, "gina", "gina-password-1234", srv.URL)

	// Only a topic the guest may not see: nothing to subscribe to, a normal close.
	conn := subscribe(t, srv, h, []string{"audit"}, maxEventID(t, srv))
	_ = conn.SetReadDeadline(time.Now().Add(wsRead))
	_, msg, err := conn.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("guest subscribed to audit only: got message %q, err %v; want a close frame", msg, err)
	}
	if ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d (%q), want %d", ce.Code, ce.Text, websocket.CloseNormalClosure)
	}

	// Who is signed in is no guest's either: audit and sessions only, a normal close too.
	conn = subscribe(t, srv, h, []string{"audit", "sessions"}, maxEventID(t, srv))
	_ = conn.SetReadDeadline(time.Now().Add(wsRead))
	if _, msg, err := conn.ReadMessage(); !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("guest subscribed to audit and sessions: got message %q, err %v; want a normal close", msg, err)
	}

	// Audit, sessions and tools: the first two are dropped, tools events still arrive.
	// Servers never enabled: their delete is one tools event, with no discovery after it.
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"wsf1", "wsf2"} {
		sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP,
			URL: "http://127.0.0.1:9/mcp", Enabled: false})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sv.ID)
	}
	start := maxEventID(t, srv)
	conn2 := subscribe(t, srv, h, []string{"audit", "sessions", "tools"}, start)
	if err := srv.Registry.DeleteServer(ctx, audit.System, ids[0]); err != nil {
		t.Fatal(err)
	}
	tools := eventIDs(t, srv, start, "tools")
	audits := eventIDs(t, srv, start, "audit")
	if len(tools) != 1 || len(audits) < 1 {
		t.Fatalf("unexpected events after %d: tools %v, audit %v", start, tools, audits)
	}
	got := readCursors(t, conn2, len(tools))
	if !equalIDs(got, tools) {
		t.Fatalf("guest got cursors %v, want only the tools events %v (audit events: %v)", got, tools, audits)
	}
	// No audit or sessions event follows (a sign-in makes both): the next message is
	// the next tools event.
	srv.Login(t, "admin", webtest.AdminPassword)
	if err := srv.Registry.DeleteServer(ctx, audit.System, ids[1]); err != nil {
		t.Fatal(err)
	}
	more := eventIDs(t, srv, tools[0], "tools")
	if len(more) != 1 {
		t.Fatalf("expected one more tools event, got %v", more)
	}
	id, msg2 := readCursor(t, conn2)
	if id != more[0] {
		t.Fatalf("guest got cursor %d, want the tools event %d (audit %v, sessions %v)", id, more[0],
			eventIDs(t, srv, start, "audit"), eventIDs(t, srv, start, "sessions"))
	}
	if strings.Contains(msg2, "activity-rows") || strings.Contains(msg2, `data-testid="signed-in"`) {
		t.Fatalf("guest received an audit or sessions fragment: %s", msg2)
	}
}

// TestWebsocketDemotionStopsAudit: an auditor following the audit log who is demoted
// to guest is disconnected (1012, so the page resubscribes with what the new role
// allows) before any further audit entry reaches them: also on a page that follows the
// audit log without the sessions topic (the audit browser), which is re-checked on the
// person's own session events all the same and is sent none of the topic's events.
func TestWebsocketDemotionStopsAudit(t *testing.T) {
	t.Parallel()
	for _, topics := range [][]string{{"audit", "sessions"}, {"audit"}} {
		t.Run(strings.Join(topics, "+"), func(t *testing.T) {
			t.Parallel()
			srv := webtest.Start(t, nil)
			aud := srv.CreateUser(t, "audrey", auth.RoleAuditor, "audrey-password-1234")
			h := sessionHeader(t, srv, "audrey", "audrey-password-1234", srv.URL)
			conn := subscribe(t, srv, h, topics, maxEventID(t, srv))
			srv.Login(t, "admin", webtest.AdminPassword) // a sessions event about someone else

			if _, err := srv.Auth.SetRole(context.Background(), audit.System, aud.ID, auth.RoleGuest); err != nil {
				t.Fatal(err)
			}
			srv.CreateUser(t, "after", auth.RoleToolUser, "after-password-1234")
			after := eventIDs(t, srv, 0, "audit")
			lastAudit := after[len(after)-1]
			for {
				_ = conn.SetReadDeadline(time.Now().Add(wsRead))
				_, msg, err := conn.ReadMessage()
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					if ce.Code != 1012 {
						t.Fatalf("close code %d, want 1012 (resubscribe)", ce.Code)
					}
					return
				}
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				for _, m := range cursorRE.FindAllSubmatch(msg, -1) {
					if string(m[1]) == strconv.FormatInt(lastAudit, 10) {
						t.Fatalf("the demoted user received the audit entry written after the demotion: %s", msg)
					}
				}
				if len(topics) == 1 && strings.Contains(string(msg), `data-testid="signed-in"`) {
					t.Fatalf("a socket that did not ask for sessions was sent one of its events: %s", msg)
				}
			}
		})
	}
}

// TestWebsocketAuditEventsComeInBatches: the audit log's events reach a socket a few
// times a second, several to a message (web/ws.go), in id order among the other topics'
// events and none left out: a burst of entries is one message, not one each.
func TestWebsocketAuditEventsComeInBatches(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	h := sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL)
	start := maxEventID(t, srv)
	conn := subscribe(t, srv, h, []string{"audit", "sessions"}, start)
	// Wait until the socket is live (a sessions event arrives) before the burst.
	srv.Login(t, "admin", webtest.AdminPassword)
	seen := readCursors(t, conn, len(eventIDs(t, srv, start, "audit", "sessions")))

	entries := make([]audit.Entry, 5)
	for i := range entries {
		entries[i] = audit.Entry{Actor: audit.System, Action: "test.burst", TargetType: "test", TargetID: strconv.Itoa(i)}
	}
	ctx := context.Background()
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.AppendBatch(ctx, tx, entries); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	burst := eventIDs(t, srv, seen[len(seen)-1], "audit")
	if len(burst) != len(entries) {
		t.Fatalf("the burst announced %v, want %d events", burst, len(entries))
	}
	ids, msg := readMessageCursors(t, conn)
	if !equalIDs(ids, burst) {
		t.Fatalf("one message carried cursors %v, want the whole burst %v", ids, burst)
	}
	if n := strings.Count(msg, `data-testid="activity-row"`); n != len(entries) {
		t.Fatalf("the message carries %d activity rows, want %d: %s", n, len(entries), msg)
	}

	// Held audit events never arrive after a later event of another topic: a sign-in
	// (an audit entry, then a sessions event) comes in id order.
	from := burst[len(burst)-1]
	srv.Login(t, "admin", webtest.AdminPassword)
	want := eventIDs(t, srv, from, "audit", "sessions")
	if got := readCursors(t, conn, len(want)); !equalIDs(got, want) {
		t.Fatalf("after the burst got cursors %v, want %v in id order", got, want)
	}
}

// TestWebsocketDatabaseErrorIsNotASignOut: when the session cannot be re-checked before
// an event about its person (the database does not answer), the socket is closed with
// 1013, so the page reconnects and authenticates again; 4401 would send the person to
// the sign-in page for the database's fault.
func TestWebsocketDatabaseErrorIsNotASignOut(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	admin, err := srv.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := srv.Auth.CreateToken(ctx, audit.System, admin.ID, auth.NewToken{Name: "to revoke"})
	if err != nil {
		t.Fatal(err)
	}
	h := sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL)
	start := maxEventID(t, srv)
	conn := subscribe(t, srv, h, []string{"sessions"}, start)
	srv.Login(t, "admin", webtest.AdminPassword) // the socket is live once this arrives
	readCursors(t, conn, len(eventIDs(t, srv, start, "sessions")))

	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE sessions RENAME TO sessions_away`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = srv.Owner.Exec(ctx, `ALTER TABLE sessions_away RENAME TO sessions`) })
	if _, err := srv.Auth.RevokeToken(ctx, audit.System, tok.ID, admin.ID); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wsRead))
	_, msg, err := conn.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 1013 {
		t.Fatalf("after the event with the session unreadable: %v %s; want close 1013 (reconnect), not 4401 (signed out)", err, msg)
	}
}

// TestWebsocketPeriodicCheckFailures: the periodic session check that the database
// cannot answer keeps the socket the first time (a blip), and closes it with 1013 at the
// second failure in a row, so a session nobody can check stops receiving events without
// the person being signed out (4401).
func TestWebsocketPeriodicCheckFailures(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{SessionRecheck: 200 * time.Millisecond})
	ctx := context.Background()
	h := sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL)
	start := maxEventID(t, srv)
	conn := subscribe(t, srv, h, []string{"tools", "sessions"}, start)
	// The socket is live (its first check, which a database error fails at once, is
	// done) once a sign-in's event arrives.
	srv.Login(t, "admin", webtest.AdminPassword)
	readCursors(t, conn, len(eventIDs(t, srv, start, "sessions")))
	const failed = `"ws: re-check the session` // the quote: not the terminal socket's message
	if n := strings.Count(srv.Logs.String(), failed); n != 0 {
		t.Fatalf("%d failed checks logged before the database stopped answering", n)
	}
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE sessions RENAME TO sessions_away`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = srv.Owner.Exec(ctx, `ALTER TABLE sessions_away RENAME TO sessions`) })
	_ = conn.SetReadDeadline(time.Now().Add(wsRead))
	_, msg, err := conn.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 1013 {
		t.Fatalf("with the session unreadable: %v %s; want close 1013 (reconnect), not 4401 (signed out)", err, msg)
	}
	// Closed at the second failed check, not the first: each is logged before the
	// socket closes.
	if n := strings.Count(srv.Logs.String(), failed); n != 2 {
		t.Fatalf("closed after %d failed checks, want 2:\n%s", n, srv.Logs.String())
	}
}

// TestWebsocketRendersEachEventOnce: an event that reaches many sockets at once is
// rendered once for all of them. Every socket that asked before the first rendering
// was done rendered it again (a query and a template each): with 5,000 clients, a
// transition took tens of milliseconds before the first of them heard of it.
func TestWebsocketRendersEachEventOnce(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "once", true, "echo")
	toolID := srv.ToolID(t, "once__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	h := sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL)
	start := maxEventID(t, srv)
	before := renderedFragments(t, srv, admin)
	conns := make([]*websocket.Conn, 40)
	for i := range conns {
		conns[i] = subscribe(t, srv, h, []string{toolstate.Topic}, start)
	}
	if _, err := srv.Tools.SetEnabled(context.Background(), audit.System, []string{toolID}, false, "test", false); err != nil {
		t.Fatal(err)
	}
	ids := eventIDs(t, srv, start, toolstate.Topic)
	if len(ids) == 0 {
		t.Fatal("the transition published no event on the tools topic")
	}
	for _, c := range conns { // every socket holds the transition (and whatever came before it)
		for got := int64(0); got < ids[len(ids)-1]; {
			cursors, _ := readMessageCursors(t, c)
			for _, id := range cursors {
				got = max(got, id)
			}
		}
	}
	// Other tools of the server may still be settling: each of their events is rendered
	// once too, so at most one rendering per event published since the start.
	n := renderedFragments(t, srv, admin) - before
	if all := eventIDs(t, srv, start, toolstate.Topic); n < 1 || n > len(all) {
		t.Fatalf("%d fragments rendered for %d events sent to %d sockets, want at most one per event", n, len(all), len(conns))
	}
}

// renderedFragments reads toolwarden_websocket_fragments_rendered_total off /metrics.
func renderedFragments(t *testing.T, srv *webtest.Server, c *http.Client) int {
	t.Helper()
	res := srv.Get(t, c, "/metrics")
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "toolwarden_websocket_fragments_rendered_total "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("metric value %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no toolwarden_websocket_fragments_rendered_total in /metrics:\n%.2000s", b)
	return 0
}
