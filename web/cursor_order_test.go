package web_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
)

// The tool page and its test panel read the event cursor before the tool: a change
// that lands between the two reads is then either in the page or replayed after the
// cursor, never neither. The change is made to land there by holding the events table
// locked: the page's cursor read waits on it (first with the fix, after reading the
// tool without it) while the tool is disabled, then enabled, in the lock's transaction.
func TestToolPageReadsTheCursorFirst(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	id := srv.ToolID(t, "mt__echo")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	ctx := context.Background()
	actor := audit.Actor{Kind: audit.ActorUser, Name: "admin"}
	for i, path := range []string{"/tools/" + id, "/tools/" + id + "/test", "/tools/" + id + "/access", "/tools/" + id + "/compensation"} {
		enable := i%2 == 1 // each path sees the tool change: disabled, enabled again, and so on
		tx, err := srv.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) // a no-op once committed; frees the lock if the test fails first
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			res *http.Response
			err error
		}
		got := make(chan answer, 1)
		go func() {
			res, err := admin.Get(srv.URL + path)
			got <- answer{res, err}
		}()
		webtest.WaitFor(t, 30*time.Second, func() bool {
			var n int
			err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE '%events.LatestID%'`, pid).Scan(&n)
			return err == nil && n > 0
		}, path+": the page reads the cursor")
		out, err := srv.Tools.SetEnabledTx(ctx, tx, actor, []string{id}, enable, "", false)
		if err != nil || len(out) != 1 || out[0].Error != "" {
			t.Fatalf("%s: set enabled=%v: %v %+v", path, enable, err, out)
		}
		var changed int64
		if err := tx.QueryRow(ctx, `SELECT max(id) FROM events`).Scan(&changed); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.res.StatusCode != http.StatusOK {
			t.Fatalf("%s: got %d", path, a.res.StatusCode)
		}
		doc := page(t, a.res)
		cursor, err := strconv.ParseInt(doc.Find(`#ws-cursor`).AttrOr("data-last-event-id", ""), 10, 64)
		if err != nil {
			t.Fatalf("%s: no cursor: %v", path, err)
		}
		status := doc.Find(`[data-testid=tool-head]`).AttrOr("data-status", "")
		want := "disabled"
		if enable {
			want = "enabled"
		}
		if cursor >= changed && status != want {
			t.Errorf("%s: read at cursor %d, past the change (event %d), but shows the tool %q, not %q: the change is never replayed",
				path, cursor, changed, status, want)
		}
	}
}
