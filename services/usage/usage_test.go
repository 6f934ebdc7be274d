package usage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixture is a database with one server and tools on it, as toolstate's tests make them.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	pool   *pgxpool.Pool
	server string
	n      int
}

func newFixture(t testing.TB, pool *pgxpool.Pool) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), pool: pool, server: uuid.NewString()}
	if _, err := pool.Exec(f.ctx, `INSERT INTO mcp_servers (id, name, server_type, command) VALUES ($1, 'srv', 'stdio', 'x')`, f.server); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) tool() string {
	f.t.Helper()
	f.n++
	id := uuid.NewString()
	if _, err := f.pool.Exec(f.ctx, `INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash)
		VALUES ($1, $2, $3, '{}', 'h')`, id, f.server, fmt.Sprintf("tool%d", f.n)); err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *fixture) insert(entries ...usage.Entry) {
	f.t.Helper()
	if err := usage.Insert(f.ctx, f.pool, entries); err != nil {
		f.t.Fatal(err)
	}
}

func ms(v float64) *float64 { return &v }

// percentileCont is PostgreSQL's percentile_cont: linear interpolation between the
// sorted values at position p*(n-1).
func percentileCont(vals []float64, p float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	pos := p * float64(len(s)-1)
	lo, hi := math.Floor(pos), math.Ceil(pos)
	return s[int(lo)] + (pos-lo)*(s[int(hi)]-s[int(lo)])
}

func near(a *float64, b float64) bool { return a != nil && math.Abs(*a-b) < 1e-9 }

func fmtp(p *float64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func TestSummaryAndSeries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.New(t))
	tool, other := f.tool(), f.tool()
	from := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour) // 6 buckets of 10 minutes

	// Calls in buckets 0, 1 and 4; 2, 3 and 5 stay empty. Durations are multiples of
	// 0.25 so the real column holds them exactly.
	type call struct {
		at  time.Duration
		dur *float64
		ok  bool
	}
	calls := []call{
		{0, ms(10), true}, // exactly at from: included
		{time.Minute, ms(20), true},
		{2 * time.Minute, ms(30.5), false},
		{9*time.Minute + 59*time.Second, ms(1000.25), true},
		{10 * time.Minute, ms(7), true}, // first instant of bucket 1
		{15 * time.Minute, nil, false},  // rejected before running: no duration
		{40 * time.Minute, ms(3), true},
		{41 * time.Minute, ms(5), true},
		{42 * time.Minute, ms(4), false},
		{43 * time.Minute, ms(100), true},
		{44 * time.Minute, ms(1.5), true},
	}
	var entries []usage.Entry
	for _, c := range calls {
		entries = append(entries, usage.Entry{ToolID: tool, UsedAt: from.Add(c.at), DurationMS: c.dur, Success: c.ok, Source: "api"})
	}
	// Outside the period (before, exactly at to) and other tools' calls: not counted.
	entries = append(entries,
		usage.Entry{ToolID: tool, UsedAt: from.Add(-time.Second), DurationMS: ms(9999), Success: false},
		usage.Entry{ToolID: tool, UsedAt: to, DurationMS: ms(9999), Success: false},
		// Refused later still (no duration): not a use.
		usage.Entry{ToolID: tool, UsedAt: to.Add(time.Minute), Success: false},
		usage.Entry{ToolID: other, UsedAt: from.Add(20 * time.Minute), DurationMS: ms(5000), Success: false},
		usage.Entry{ToolID: other, UsedAt: from.Add(30 * time.Minute), DurationMS: ms(6000), Success: true},
	)
	f.insert(entries...)
	// The stats count the calls that ran: the one rejected before running stays in the
	// log but is neither a call nor a failure of the tool.
	calls = slices.DeleteFunc(calls, func(c call) bool { return c.dur == nil })

	t.Run("summary", func(t *testing.T) {
		s, err := usage.Summary(f.ctx, f.pool, tool, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var durs []float64
		var ok int64
		for _, c := range calls {
			if c.dur != nil {
				durs = append(durs, *c.dur)
			}
			if c.ok {
				ok++
			}
		}
		if s.Calls != int64(len(calls)) || s.Successes != ok || s.Failures != int64(len(calls))-ok {
			t.Errorf("calls/successes/failures = %d/%d/%d, want %d/%d/%d", s.Calls, s.Successes, s.Failures, len(calls), ok, int64(len(calls))-ok)
		}
		if want := float64(ok) / float64(len(calls)); math.Abs(s.SuccessRate-want) > 1e-12 {
			t.Errorf("success rate = %v, want %v", s.SuccessRate, want)
		}
		if want := percentileCont(durs, 0.5); !near(s.P50MS, want) {
			t.Errorf("p50 = %s, want %v", fmtp(s.P50MS), want)
		}
		if want := percentileCont(durs, 0.95); !near(s.P95MS, want) {
			t.Errorf("p95 = %s, want %v", fmtp(s.P95MS), want)
		}
		var sum float64
		for _, d := range durs {
			sum += d
		}
		if s.AvgMS == nil || math.Abs(*s.AvgMS-sum/float64(len(durs))) > 1e-6 {
			t.Errorf("avg = %s, want %v", fmtp(s.AvgMS), sum/float64(len(durs)))
		}
		// The newest call of the tool that ran, in any period (the one at `to`): the
		// refusal after it is not a use.
		if s.LastUsed == nil || !s.LastUsed.Equal(to) {
			t.Errorf("last used = %v, want %v", s.LastUsed, to)
		}
	})

	t.Run("summary of a period without calls", func(t *testing.T) {
		s, err := usage.Summary(f.ctx, f.pool, tool, from.Add(-48*time.Hour), from.Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if s.Calls != 0 || s.SuccessRate != 0 || s.P50MS != nil || s.P95MS != nil || s.AvgMS != nil {
			t.Errorf("empty period: got %+v", s)
		}
		never := f.tool()
		s, err = usage.Summary(f.ctx, f.pool, never, from, to)
		if err != nil || s.LastUsed != nil || s.Calls != 0 {
			t.Errorf("unused tool: got %+v, %v", s, err)
		}
	})

	t.Run("series", func(t *testing.T) {
		bs, err := usage.Series(f.ctx, f.pool, tool, from, to, 6)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) != 6 {
			t.Fatalf("got %d buckets, want 6 (empty ones included)", len(bs))
		}
		for i, b := range bs {
			wantStart := from.Add(time.Duration(i) * 10 * time.Minute)
			if !b.Start.Equal(wantStart) || !b.End.Equal(wantStart.Add(10*time.Minute)) {
				t.Errorf("bucket %d = [%v, %v), want start %v, 10 minutes wide", i, b.Start, b.End, wantStart)
			}
			var durs []float64
			var n, failed int64
			for _, c := range calls {
				if at := from.Add(c.at); !at.Before(b.Start) && at.Before(b.End) {
					n++
					if !c.ok {
						failed++
					}
					if c.dur != nil {
						durs = append(durs, *c.dur)
					}
				}
			}
			if b.Calls != n || b.Failures != failed {
				t.Errorf("bucket %d: calls/failures = %d/%d, want %d/%d", i, b.Calls, b.Failures, n, failed)
			}
			if len(durs) == 0 {
				if b.P50MS != nil || b.P95MS != nil {
					t.Errorf("bucket %d without durations: p50 %s p95 %s, want nil", i, fmtp(b.P50MS), fmtp(b.P95MS))
				}
				continue
			}
			if !near(b.P50MS, percentileCont(durs, 0.5)) || !near(b.P95MS, percentileCont(durs, 0.95)) {
				t.Errorf("bucket %d: p50 %s p95 %s, want %v %v", i, fmtp(b.P50MS), fmtp(b.P95MS), percentileCont(durs, 0.5), percentileCont(durs, 0.95))
			}
		}
		for _, i := range []int{2, 3, 5} {
			if bs[i].Calls != 0 {
				t.Errorf("bucket %d should be empty, has %d calls", i, bs[i].Calls)
			}
		}
		if bs[1].Calls != 1 || bs[1].Failures != 0 || bs[1].P50MS == nil || *bs[1].P50MS != 7 {
			t.Errorf("bucket 1 (a call rejected before running, not counted, and one of 7 ms) = %+v, p50 %s", bs[1], fmtp(bs[1].P50MS))
		}
	})

	t.Run("series buckets that do not divide the period", func(t *testing.T) {
		// 7 buckets of an hour: widths are not whole microseconds; every call is counted
		// exactly once and the buckets tile the period.
		bs, err := usage.Series(f.ctx, f.pool, tool, from, to, 7)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for i, b := range bs {
			total += b.Calls
			if i > 0 && !b.Start.Equal(bs[i-1].End) {
				t.Errorf("gap between bucket %d and %d", i-1, i)
			}
			for _, c := range calls {
				at := from.Add(c.at)
				if in := !at.Before(b.Start) && at.Before(b.End); in && b.Calls == 0 {
					t.Errorf("call at %v lies in empty bucket %d [%v, %v)", at, i, b.Start, b.End)
				}
			}
		}
		if len(bs) != 7 || !bs[0].Start.Equal(from) || !bs[6].End.Equal(to) || total != int64(len(calls)) {
			t.Errorf("got %d buckets from %v to %v with %d calls; want 7 from %v to %v with %d", len(bs), bs[0].Start, bs[len(bs)-1].End, total, from, to, len(calls))
		}
	})

	t.Run("arguments", func(t *testing.T) {
		if _, err := usage.Series(f.ctx, f.pool, tool, to, from, 5); err == nil {
			t.Error("reversed period: want an error")
		}
		if _, err := usage.Summary(f.ctx, f.pool, tool, from, from); err == nil {
			t.Error("empty period: want an error")
		}
		bs, err := usage.Series(f.ctx, f.pool, tool, from, to, 0)
		if err != nil || len(bs) != 1 || bs[0].Calls != int64(len(calls)) {
			t.Errorf("0 buckets → one: got %d buckets, %v", len(bs), err)
		}
		bs, err = usage.Series(f.ctx, f.pool, tool, from, to, 1_000_000)
		if err != nil || len(bs) != usage.MaxBuckets {
			t.Errorf("too many buckets: got %d, want %d (%v)", len(bs), usage.MaxBuckets, err)
		}
	})
}

func TestRecentPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.New(t))
	tool, other := f.tool(), f.tool()
	base := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	// 37 calls, several sharing a used_at (ties are broken by id), inserted out of time
	// order so id order and time order differ; other tools' calls interleaved.
	var entries []usage.Entry
	for i := range 37 {
		at := base.Add(time.Duration((i*7)%13) * time.Second)
		entries = append(entries, usage.Entry{ToolID: tool, UsedAt: at, Success: true, Actor: strconv.Itoa(i)})
		if i%3 == 0 {
			entries = append(entries, usage.Entry{ToolID: other, UsedAt: at, Success: true})
		}
	}
	f.insert(entries...)

	// The expected order, read straight from the table.
	rows, _ := f.pool.Query(f.ctx, `SELECT id FROM tool_usage_logs WHERE tool_id = $1 ORDER BY used_at DESC, id DESC`, tool)
	want, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(want) != 37 {
		t.Fatalf("expected order: %v, %d rows", err, len(want))
	}

	for _, size := range []int{1, 5, 36, 37, 200} {
		var got []int64
		before, pages := int64(0), 0
		for {
			logs, next, err := usage.Recent(f.ctx, f.pool, tool, before, size)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(logs) > size {
				t.Fatalf("size %d: page of %d", size, len(logs))
			}
			for i, l := range logs {
				if l.ToolID != tool {
					t.Fatalf("size %d: another tool's log %d", size, l.ID)
				}
				if i > 0 && (l.UsedAt.After(logs[i-1].UsedAt) || l.UsedAt.Equal(logs[i-1].UsedAt) && l.ID > logs[i-1].ID) {
					t.Errorf("size %d: not newest first at %d", size, l.ID)
				}
				got = append(got, l.ID)
			}
			if next == 0 {
				break
			}
			if next != logs[len(logs)-1].ID {
				t.Errorf("size %d: next %d is not the last id on the page %d", size, next, logs[len(logs)-1].ID)
			}
			before = next
			if pages > 100 {
				t.Fatal("paging does not end")
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("size %d: paged ids\n%v\nwant\n%v", size, got, want)
		}
		if wantPages := (37 + size - 1) / size; pages != wantPages {
			t.Errorf("size %d: %d pages, want %d", size, pages, wantPages)
		}
	}

	t.Run("limit is clamped", func(t *testing.T) {
		logs, next, err := usage.Recent(f.ctx, f.pool, tool, 0, 0)
		if err != nil || len(logs) != 1 || next != logs[0].ID {
			t.Errorf("limit 0: %d logs, next %d, %v; want 1", len(logs), next, err)
		}
		many := make([]usage.Entry, 250)
		for i := range many {
			many[i] = usage.Entry{ToolID: tool, UsedAt: base.Add(time.Hour), Success: true}
		}
		f.insert(many...)
		logs, next, err = usage.Recent(f.ctx, f.pool, tool, 0, 5000)
		if err != nil || len(logs) != usage.MaxRecent || next == 0 {
			t.Errorf("limit 5000: %d logs, next %d, %v; want %d and more", len(logs), next, err, usage.MaxRecent)
		}
	})

	t.Run("a cursor from another tool gives nothing", func(t *testing.T) {
		var otherID int64
		if err := f.pool.QueryRow(f.ctx, `SELECT max(id) FROM tool_usage_logs WHERE tool_id = $1`, other).Scan(&otherID); err != nil {
			t.Fatal(err)
		}
		logs, next, err := usage.Recent(f.ctx, f.pool, tool, otherID, 10)
		if err != nil || len(logs) != 0 || next != 0 {
			t.Errorf("got %d logs, next %d, %v", len(logs), next, err)
		}
	})
}

func TestRecentRedactsAndTruncates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbtest.New(t))
	tool := f.tool()
	user := uuid.NewString()
	const (
		ghp    = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
		bearer = "Bearer abcdefghijklmnopqrstuvwxyz012345"
		jwt    = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	)
	req := `{"query":"weather in Paris","api_key":"plain-looking-but-named-secret",
		"items":[{"name":"a","password":"hunter2"},[{"deep":{"GITHUB_TOKEN":"x","note":"` + ghp + `"}}, "` + bearer + `", "plain text", 42, true]],
		"headers":{"Authorization":"Basic dXNlcjpwYXNzd29yZA==","Accept":"text/html"},
		"refresh_token":null,"max_tokens":256,"sort_key":"name","html":"<b>&</b>"}`
	resp := `{"content":[{"type":"text","text":"token is ` + jwt + `"},{"type":"text","text":"` + jwt + `"}]}`
	// A response far above the cap, with multi-byte characters to cut between and a
	// secret named by its key only, stored as the router stores it (calls.go, completed):
	// cut by ForLog, its size in the metadata. Cut as text (usage.Cap), the password
	// was kept in the row and shown: a cut JSON text is masked by its words' shape only.
	note := strings.Repeat("héllo wörld ✓ ", 3000)
	big, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": "done"}},
		"structured_content": map[string]any{"db_password": "opensesame", "note": note}})
	stored, cut := usage.ForLog(big)
	if !cut {
		t.Fatalf("ForLog did not cut %d bytes", len(big))
	}
	bigMeta, _ := json.Marshal(map[string]any{"call_id": "c1", usage.MetaResponseBytes: len(big)})
	f.insert(
		usage.Entry{ToolID: tool, UserID: user, Actor: "alice", Source: "test_panel", UsedAt: time.Now().Add(-time.Minute),
			DurationMS: ms(12.5), Success: true, Request: json.RawMessage(req), Response: json.RawMessage(resp),
			Metadata: json.RawMessage(`{"client":"ide","session_token":"abc"}`)},
		usage.Entry{ToolID: tool, Success: false, ErrorCode: "upstream_error", Response: stored, Metadata: bigMeta,
			Error: json.RawMessage(`{"message":"auth failed for ` + ghp + `","details":["` + ghp + `"]}`)},
	)
	var row string
	if err := f.pool.QueryRow(f.ctx, `SELECT response::text FROM tool_usage_logs WHERE tool_id = $1 AND NOT success`, tool).Scan(&row); err != nil ||
		strings.Contains(row, "opensesame") {
		t.Errorf("the stored row keeps the password (%v): %.200s", err, row)
	}
	logs, next, err := usage.Recent(f.ctx, f.pool, tool, 0, 10)
	if err != nil || len(logs) != 2 || next != 0 {
		t.Fatalf("recent: %d logs, next %d, %v", len(logs), next, err)
	}
	failed, ok := logs[0], logs[1]

	for name, raw := range map[string]json.RawMessage{"request": ok.Request, "response": ok.Response, "error": failed.Error,
		"metadata": ok.Metadata, "big response": failed.Response} {
		if !json.Valid(raw) {
			t.Errorf("%s is not valid JSON: %.200s", name, raw)
		}
		for _, secret := range []string{"hunter2", ghp, "abcdefghijklmnopqrstuvwxyz012345", jwt, "dXNlcjpwYXNzd29yZA==", "plain-looking-but-named-secret", "opensesame"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("%s leaks %q: %s", name, secret, raw)
			}
		}
	}
	var r map[string]any
	if err := json.Unmarshal(ok.Request, &r); err != nil {
		t.Fatal(err)
	}
	items := r["items"].([]any)
	nested := items[1].([]any)
	deep := nested[0].(map[string]any)["deep"].(map[string]any)
	checks := []struct {
		what      string
		got, want any
	}{
		{"query", r["query"], "weather in Paris"},
		{"api_key", r["api_key"], usage.Mask},
		{"items[0].password", items[0].(map[string]any)["password"], usage.Mask},
		{"items[0].name", items[0].(map[string]any)["name"], "a"},
		{"deep GITHUB_TOKEN", deep["GITHUB_TOKEN"], usage.Mask},
		{"deep note (a GitHub token)", deep["note"], usage.Mask},
		{"bearer in an array", nested[1], usage.Mask},
		{"plain text in an array", nested[2], "plain text"},
		{"number", nested[3], float64(42)},
		{"bool", nested[4], true},
		{"Authorization", r["headers"].(map[string]any)["Authorization"], usage.Mask},
		{"Accept", r["headers"].(map[string]any)["Accept"], "text/html"},
		{"null secret stays null", r["refresh_token"], nil},
		{"max_tokens is not a secret", r["max_tokens"], float64(256)},
		{"sort_key is not a secret", r["sort_key"], "name"},
		{"html is not escaped", r["html"], "<b>&</b>"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(string(ok.Request), `"<b>&</b>"`) {
		t.Errorf("request JSON escapes HTML: %s", ok.Request)
	}
	// A JWT is masked as a whole string and as a word in prose.
	var rs struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(ok.Response, &rs); err != nil || len(rs.Content) != 2 ||
		rs.Content[0].Text != "token is "+usage.Mask || rs.Content[1].Text != usage.Mask {
		t.Errorf("response = %s (%v)", ok.Response, err)
	}
	if string(ok.Metadata) != `{"client":"ide","session_token":"********"}` {
		t.Errorf("metadata = %s", ok.Metadata)
	}
	if ok.Truncated || ok.RequestTruncated || ok.UserID != user || ok.Actor != "alice" || ok.Source != "test_panel" ||
		ok.DurationMS == nil || *ok.DurationMS != 12.5 || !ok.Success || ok.ErrorCode != "" || ok.Error != nil {
		t.Errorf("successful log = %+v", ok)
	}

	// The failed call: its big response was cut keeping its structure, once (not a JSON
	// string of JSON text, escaped again when read), and its size is the one before.
	if !failed.Truncated || failed.ResponseBytes != len(big) || failed.ErrorCode != "upstream_error" ||
		failed.Success || failed.DurationMS != nil || failed.UserID != "" || string(failed.Request) != "{}" {
		t.Errorf("failed log = %+v (response of %d bytes)", failed, len(big))
	}
	var shown struct {
		Content           []struct{ Type, Text string } `json:"content"`
		StructuredContent map[string]string             `json:"structured_content"`
	}
	if err := json.Unmarshal(failed.Response, &shown); err != nil {
		t.Fatalf("truncated response is not the response's structure: %v: %.200s", err, failed.Response)
	}
	cutNote := shown.StructuredContent["note"]
	if len(shown.Content) != 1 || shown.Content[0].Text != "done" || shown.StructuredContent["db_password"] != usage.Mask ||
		len(cutNote) > usage.MaxJSONBytes || len(cutNote) < usage.MaxJSONBytes/2 || !strings.HasPrefix(note, cutNote) {
		t.Errorf("truncated response: %d bytes of note, %.300s", len(cutNote), failed.Response)
	}
	if len(failed.Response) > 2*usage.MaxJSONBytes || strings.Contains(string(failed.Response), `\"`) {
		t.Errorf("truncated response: %d bytes, escaped twice: %.200s", len(failed.Response), failed.Response)
	}
	var e struct {
		Message string
		Details []string
	}
	if err := json.Unmarshal(failed.Error, &e); err != nil || len(e.Details) != 1 || e.Details[0] != usage.Mask ||
		e.Message != "auth failed for "+usage.Mask {
		t.Errorf("error = %s (%v)", failed.Error, err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{``, ``},
		{`null`, `null`},
		{`"sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"`, `"********"`},
		{`[["Bearer abcdefghijklmnopqrstuvwxyz"],{"Password":{"nested":"x"}}]`, `[["********"],{"Password":"********"}]`},
		{`{"big":12345678901234567890123}`, `{"big":12345678901234567890123}`},
		{`{"a":1} trailing`, `"(unreadable JSON withheld)"`},
		{`{not json`, `"(unreadable JSON withheld)"`},
		// Credentials inside prose, one word at a time.
		{`"curl -H 'Authorization: Bearer abc123def456' https://x"`, `"curl -H 'Authorization: Bearer ********' https://x"`},
		{`"login (basic dXNlcjpwYXNz), then retry"`, `"login (basic ********), then retry"`},
		{`"export OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234567890."`, `"export OPENAI_API_KEY=********."`},
		{`"key: AKIAABCDEFGHIJKLMNOP\nnext line"`, `"key: ********\nnext line"`},
		{`"call mt__echo message=\"ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee\" now"`, `"call mt__echo message=\"********\" now"`},
		{`"token='glpat-AbCdEfGhIjKlMnOpQrSt'"`, `"token='********'"`},
		{`"Bearer authentication uses Basic Settings for a monkey_keyboard_tokenizer"`, `"Bearer authentication uses Basic Settings for a monkey_keyboard_tokenizer"`},
		{`"see /usr/lib/postgresql/15/bin/postgres and 0123456789abcdef0123456789abcdef"`, `"see /usr/lib/postgresql/15/bin/postgres and 0123456789abcdef0123456789abcdef"`},
	} {
		if got := string(usage.Redact(json.RawMessage(c.in))); got != c.want {
			t.Errorf("Redact(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestInsertRejectsBadIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	if err := usage.Insert(ctx, pool, []usage.Entry{{ToolID: "nope"}}); err == nil {
		t.Error("bad tool id: want an error")
	}
	if err := usage.Insert(ctx, pool, []usage.Entry{{ToolID: uuid.NewString(), UserID: "nope"}}); err == nil {
		t.Error("bad user id: want an error")
	}
	if err := usage.Insert(ctx, pool, nil); err != nil {
		t.Errorf("no entries: %v", err)
	}
	// In a transaction: rolled back with it.
	f := newFixture(t, pool)
	tool := f.tool()
	_ = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if err := usage.Insert(ctx, tx, []usage.Entry{{ToolID: tool, Success: true}}); err != nil {
			t.Fatal(err)
		}
		return fmt.Errorf("roll back")
	})
	if s, err := usage.Summary(ctx, pool, tool, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil || s.Calls != 0 {
		t.Errorf("after rollback: %+v, %v", s, err)
	}
}

// TestQueriesUseToolTimeIndex runs each read against a table of many tools and checks
// the planner serves it from tool_usage_logs_tool_time_idx (or its twin of the calls
// that ran, for the reads of those only) rather than a scan of the whole table.
func TestQueriesUseToolTimeIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, rec := dbtest.TracedPool(t)
	f := newFixture(t, pool)
	tools := make([]string, 40)
	for i := range tools {
		tools[i] = f.tool()
	}
	start := time.Now().Add(-30 * 24 * time.Hour)
	seed(t, pool, tools, start, 40_000)
	if _, err := pool.Exec(ctx, `ANALYZE tool_usage_logs`); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	rec.Reset()
	if _, err := usage.Summary(ctx, pool, tools[3], end.Add(-24*time.Hour), end); err != nil {
		t.Fatal(err)
	}
	if _, err := usage.Series(ctx, pool, tools[3], end.Add(-24*time.Hour), end, 48); err != nil {
		t.Fatal(err)
	}
	_, next, err := usage.Recent(ctx, pool, tools[3], 0, 50)
	if err != nil || next == 0 {
		t.Fatal(next, err)
	}
	if _, _, err := usage.Recent(ctx, pool, tools[3], next, 50); err != nil {
		t.Fatal(err)
	}
	// A person's own calls (a built-in tool's Logs tab without audit.view).
	someone := "00000000-0000-4000-8000-000000000001" // none of the calls: the whole tool is searched
	if _, _, err = usage.RecentOf(ctx, pool, tools[3], &someone, 0, 50); err != nil {
		t.Fatal(err)
	}
	if _, _, err := usage.RecentOf(ctx, pool, tools[3], &someone, next, 50); err != nil {
		t.Fatal(err)
	}
	queries := rec.All()
	if len(queries) != 6 {
		t.Fatalf("recorded %d queries, want 6", len(queries))
	}
	for _, q := range queries {
		var plan string
		rows, err := pool.Query(ctx, "EXPLAIN "+q.SQL, q.Args...)
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan = strings.Join(lines, "\n")
		tag := q.SQL[:strings.Index(q.SQL, "*/")+2]
		t.Logf("%s\n%s", tag, plan)
		index := "tool_usage_logs_tool_time_idx"
		switch {
		case strings.Contains(q.SQL, "l.user_id = "):
			index = "tool_usage_logs_tool_user_time_idx"
		case strings.Contains(q.SQL, "duration_ms IS NOT NULL"):
			// The calls that ran only (the charts, the summary): the same columns, indexed
			// without the refused calls (migration 67).
			index = "tool_usage_logs_tool_ran_idx"
		}
		if !strings.Contains(plan, index) || strings.Contains(plan, "Seq Scan on tool_usage_logs") {
			t.Errorf("%s does not use %s:\n%s", tag, index, plan)
		}
		// A page after a cursor starts the index scan at the cursor, not at the newest row.
		if strings.Contains(q.SQL, "c.id = $2") && strings.HasPrefix(tag, "/* usage.Recent") && !strings.Contains(plan, "AND (used_at <= ") {
			t.Errorf("%s with a cursor does not bound the index scan by it:\n%s", tag, plan)
		}
	}
}

// seed writes n calls spread over tools and the 30 days after start, in batches.
func seed(tb testing.TB, pool *pgxpool.Pool, tools []string, start time.Time, n int) {
	tb.Helper()
	const batch = 20_000
	span := float64(30 * 24 * time.Hour)
	entries := make([]usage.Entry, 0, batch)
	for i := range n {
		d := float64(i%997) + 0.5
		entries = append(entries, usage.Entry{
			ToolID:     tools[i%len(tools)],
			UsedAt:     start.Add(time.Duration(span * float64(i) / float64(n))),
			DurationMS: &d,
			Success:    i%11 != 0,
			Source:     "api",
			Request:    json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`),
		})
		if len(entries) == batch || i == n-1 {
			if err := usage.Insert(context.Background(), pool, entries); err != nil {
				tb.Fatal(err)
			}
			entries = entries[:0]
		}
	}
}

// BenchmarkSeries measures a day of one tool's series, 96 buckets, in a table of
// TOOLWARDEN_BENCH_USAGE_ROWS calls (default 200,000) spread over 5 tools and 30 days.
func BenchmarkSeries(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("TOOLWARDEN_BENCH_USAGE_ROWS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	pool := dbtest.New(b)
	f := newFixture(b, pool)
	tools := []string{f.tool(), f.tool(), f.tool(), f.tool(), f.tool()}
	start := time.Now().Add(-30 * 24 * time.Hour)
	began := time.Now()
	seed(b, pool, tools, start, n)
	if _, err := pool.Exec(ctx, `ANALYZE tool_usage_logs`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d rows in %v", n, time.Since(began).Round(time.Millisecond))
	end := time.Now()
	b.ResetTimer()
	for b.Loop() {
		bs, err := usage.Series(ctx, pool, tools[0], end.Add(-24*time.Hour), end, 96)
		if err != nil || len(bs) != 96 {
			b.Fatal(len(bs), err)
		}
	}
}
