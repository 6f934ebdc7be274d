package web_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
)

// A page that follows the executions topic only for the navigation's approvals count
// (the dashboard) gets its events sampled, as the audit log's: a burst of execution
// changes is a frame or two there, the last one carrying the final count, while the
// history (/executions), which shows every execution, still gets each event (issue #21:
// a thousand open dashboards must not cost a thousand writes per plan).
func TestNavOnlyExecutionsAreSampled(t *testing.T) {
	t.Parallel()
	e := xlStart(t)
	ctx := context.Background()
	const waiting = 40
	for range waiting {
		e.create(t, auth.RoleToolUser, "xl__echo", `{"message":"burst"}`)
	}
	// live opens the socket a page of path opens, with its topics and cursor.
	live := func(path string) *websocket.Conn {
		doc := e.get(t, auth.RoleAdmin, path, 200)
		topics := strings.Split(doc.Find("[ws-connect]").AttrOr("data-topics", ""), ",")
		cursor, err := strconv.ParseInt(doc.Find("#ws-cursor").AttrOr("data-last-event-id", ""), 10, 64)
		if err != nil {
			t.Fatalf("%s: no cursor: %v", path, err)
		}
		return wsDial(t, e.srv, e.clients[auth.RoleAdmin], topics, cursor)
	}
	dash, list := live("/"), live("/executions")
	// One more plan: once both sockets show its count they are subscribed.
	e.create(t, auth.RoleToolUser, "xl__echo", `{"message":"probe"}`)
	for name, conn := range map[string]*websocket.Conn{"dashboard": dash, "history": list} {
		wsUntil(t, conn, name+"'s count of the probe", func(doc *goquery.Document) bool {
			return doc.Find("#nav-approvals-count").Last().AttrOr("data-count", "") == strconv.Itoa(waiting+1)
		})
	}

	// The burst: every waiting plan expires in one transaction, one event each.
	tx, err := e.srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit: nothing to undo
	rows, err := tx.Query(ctx, `UPDATE executions SET status = 'expired', finished_at = now(), updated_at = now()
		WHERE status = 'awaiting_approval' RETURNING id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil || len(ids) != waiting+1 {
		t.Fatalf("expired %d plans (%v), want %d", len(ids), rows.Err(), waiting+1)
	}
	var first, last int64
	for _, id := range ids {
		ev, err := events.ExecutionExpired.Publish(ctx, tx, executions.Topic, events.Execution{ExecutionID: id, Status: "expired"})
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = ev
		}
		last = ev
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// burstFrames reads conn until the burst's last event and returns the messages that
	// carried any of the burst's events.
	burstFrames := func(name string, conn *websocket.Conn) []*goquery.Document {
		var frames []*goquery.Document
		deadline := time.Now().Add(30 * time.Second)
		for {
			_ = conn.SetReadDeadline(deadline)
			_, msg, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("%s: waiting for the burst's last event %d: %v (%d frames of it)", name, last, err, len(frames))
			}
			doc, err := goquery.NewDocumentFromReader(strings.NewReader("<template>" + string(msg) + "</template>"))
			if err != nil {
				t.Fatal(err)
			}
			newest := int64(0)
			doc.Find("#ws-cursor").Each(func(_ int, s *goquery.Selection) {
				id, _ := strconv.ParseInt(s.AttrOr("data-last-event-id", ""), 10, 64)
				newest = max(newest, id)
			})
			if newest >= first {
				frames = append(frames, doc)
			}
			if newest >= last {
				return frames
			}
		}
	}
	got := burstFrames("history", list)
	if len(got) != len(ids) {
		t.Errorf("the history got the burst of %d events in %d frames, want one each", len(ids), len(got))
	}
	seen := map[string]bool{}
	for _, doc := range got {
		doc.Find("[data-testid=execution-row][data-status=expired]").Each(func(_ int, s *goquery.Selection) {
			seen[s.AttrOr("data-execution-id", "")] = true
		})
	}
	if len(seen) != len(ids) {
		t.Errorf("the history saw %d of the %d expired rows", len(seen), len(ids))
	}

	got = burstFrames("dashboard", dash)
	if len(got) > 3 {
		t.Errorf("the dashboard got the burst of %d events in %d frames, want a few at most (sampled)", len(ids), len(got))
	}
	if n := got[len(got)-1].Find("#nav-approvals-count").Last().AttrOr("data-count", ""); n != "0" {
		t.Errorf("the dashboard's last frame counts %q plans awaiting approval, want 0", n)
	}
}
