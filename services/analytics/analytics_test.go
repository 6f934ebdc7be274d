package analytics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// world is a database with servers, tools, people, calls and executions made to order.
type world struct {
	t    testing.TB
	ctx  context.Context
	pool *pgxpool.Pool
}

func (w world) exec(sql string, args ...any) {
	w.t.Helper()
	if _, err := w.pool.Exec(w.ctx, sql, args...); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
}

func (w world) server(name string) string {
	id := uuid.NewString()
	w.exec(`INSERT INTO mcp_servers (id, name, server_type, command) VALUES ($1, $2, 'stdio', 'x')`, id, name)
	return id
}

// builtin adds the built-in server (its name is reserved to it).
func (w world) builtin() string {
	id := uuid.NewString()
	w.exec(`INSERT INTO mcp_servers (id, name, server_type) VALUES ($1, 'builtin', 'builtin')`, id)
	return id
}

// tool adds an enabled tool, enabled since.
func (w world) tool(server, name string, since time.Time) string {
	id := uuid.NewString()
	w.exec(`INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash, status, created_at)
		VALUES ($1, $2, $3, '{}', 'h', 'enabled', $4)`, id, server, name, since)
	return id
}

// level makes tool's level what an administrator set.
func (w world) level(tool, level string) {
	w.exec(`UPDATE mcp_tools SET risk_override = $2 WHERE id = $1`, tool, level)
}

func (w world) user(name string) string {
	id := uuid.NewString()
	w.exec(`INSERT INTO users (id, username, role, password_hash) VALUES ($1, $2, 'tool_user', 'x')`, id, name)
	return id
}

// calls records n calls of tool by actor at at, failing the first fail, taking ms each.
func (w world) calls(tool, actor string, at time.Time, n, fail int, ms float64) {
	w.t.Helper()
	es := make([]usage.Entry, n)
	for i := range es {
		d := ms
		es[i] = usage.Entry{ToolID: tool, Actor: actor, Source: "api", UsedAt: at.Add(time.Duration(i) * time.Millisecond),
			DurationMS: &d, Success: i >= fail}
	}
	if err := usage.Insert(w.ctx, w.pool, es); err != nil {
		w.t.Fatal(err)
	}
}

// execution records an execution asked for by ann of one step of tool at risk,
// approved by approver (its id; "" for policy) after wait.
func (w world) execution(toolID, tool, level, status, approver string, created time.Time, wait time.Duration) {
	w.t.Helper()
	w.plan("ann", [][2]string{{toolID, tool}}, level, status, approver, created, wait)
}

// plan records an execution asked for by requester of steps ({tool id, qualified
// name}), every one at level, approved by approver (its id; "" for policy) after wait.
func (w world) plan(requester string, steps [][2]string, level, status, approver string, created time.Time, wait time.Duration) {
	w.t.Helper()
	w.planFrom(requester, steps, level, "annotations", status, approver, created, wait)
}

// planFrom is plan with every step's level from source (risk.Source*).
func (w world) planFrom(requester string, steps [][2]string, level, source, status, approver string, created time.Time, wait time.Duration) {
	w.t.Helper()
	var sts []any
	for _, st := range steps {
		sts = append(sts, map[string]any{"tool_id": st[0], "tool": st[1], "risk": map[string]any{"level": level, "source": source}})
	}
	plan, _ := json.Marshal(map[string]any{"steps": sts})
	approval, approved := "policy", (*time.Time)(nil)
	var by *string
	if approver != "" {
		approval = map[string]string{"medium": "confirm", "high": "phrase"}[level]
		at := created.Add(wait)
		approved, by = &at, &approver
	}
	w.exec(`INSERT INTO executions (requester_name, requester_kind, plan, plan_hash, status, risk, approval, approved_by,
			approver_name, approved_at, created_at)
		VALUES ($8, 'user', $1, '\x00', $2, $3, $4, $5, coalesce((SELECT username FROM users WHERE id = $5), ''), $6, $7)`,
		plan, status, level, approval, by, approved, created, requester)
}

// The report of a period: totals, per tool, server, user and day (every day, empty
// ones too), the slowest and most failing, approval waits, what waits longest, and
// each recommendation with its numbers.
func TestReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	long := now.Add(-90 * 24 * time.Hour)
	srvA, srvB := w.server("alpha"), w.server("beta")
	echo := w.tool(srvA, "echo", long)
	flaky := w.tool(srvA, "flaky", long)
	slow := w.tool(srvB, "slow", long)
	idle := w.tool(srvB, "idle", long)
	fresh := w.tool(srvB, "fresh", now.Add(-24*time.Hour)) // unused, but enabled only yesterday
	deploy := w.tool(srvB, "deploy", long)
	alice, bob := w.user("alice"), w.user("bob")
	w.level(deploy, "medium")
	w.level(flaky, "low")

	day1, day3 := now.Add(-3*24*time.Hour), now.Add(-1*24*time.Hour)
	w.calls(echo, "alice", day1, 30, 0, 2)
	w.calls(echo, "bob", day3, 10, 1, 4)
	w.calls(flaky, "bob", day3, 10, 5, 3)
	w.calls(slow, "alice", day1, 12, 0, 900)
	w.calls(echo, "alice", now.Add(-40*24*time.Hour), 5, 0, 1) // before the period
	// Calls the router refused (they never ran: no duration) are neither calls nor failures.
	if err := usage.Insert(ctx, w.pool, []usage.Entry{{ToolID: flaky, Actor: "bob", Source: "api", UsedAt: day3, ErrorCode: "forbidden"},
		{ToolID: echo, Actor: "alice", Source: "api", UsedAt: day1, ErrorCode: "invalid_arguments"},
		// Nor do they make a tool used: idle, refused to bob, is still unused.
		{ToolID: idle, Actor: "bob", Source: "api", UsedAt: day3, ErrorCode: "forbidden"}}); err != nil {
		t.Fatal(err)
	}

	for i := range 5 { // deploy: MEDIUM, always alice within seconds
		w.execution(deploy, "beta__deploy", "medium", "success", alice, day1.Add(time.Duration(i)*time.Hour), 3*time.Second)
	}
	w.plan("alice", [][2]string{{echo, "alpha__echo"}}, "medium", "success", bob, day1, 40*time.Second)
	w.plan("bob", [][2]string{{echo, "alpha__echo"}}, "medium", "success", alice, day3, 20*time.Second)
	// Two steps on one server: the plan counts once for alpha, bob and its day.
	w.plan("bob", [][2]string{{echo, "alpha__echo"}, {flaky, "alpha__flaky"}}, "high", "success", alice, day3.Add(time.Hour), 100*time.Second)
	w.execution(flaky, "alpha__flaky", "low", "rolled_back", "", day3, 0)
	w.execution(slow, "beta__slow", "high", "awaiting_approval", "", day3, 0)

	svc := analytics.New(w.pool)
	fromCalls, err := svc.Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	// Rolled up, the finished days are read from their rollups; the report is the same.
	if n, err := svc.RollUp(ctx, now); err != nil || n != 40 {
		t.Fatalf("rolled up %d days (%v), want 40: from the first call's day to yesterday", n, err)
	}
	if n, err := svc.RollUp(ctx, now); err != nil || n != 0 {
		t.Fatalf("a second roll-up rolled %d days (%v)", n, err)
	}
	r, err := svc.Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(fromCalls)
	b, _ := json.Marshal(r)
	if string(a) != string(b) {
		t.Fatalf("from the calls:\n%s\nfrom the rollups:\n%s", a, b)
	}
	var rolled int
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM usage_daily_tools`).Scan(&rolled); err != nil || rolled != 5 {
		t.Fatalf("tool rollups: %d %v", rolled, err)
	}
	// A call recorded after its day was rolled (it waited hours for a person) rolls
	// that day again, and counts.
	late := now.Add(-rollupLate)
	w.calls(echo, "ann", late, 1, 0, 3)
	if n, err := svc.RollUp(ctx, now); err != nil || n != 1 {
		t.Fatalf("a late record rolled %d days again (%v), want 1", n, err)
	}
	after, err := svc.Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil || after.Total.Calls != r.Total.Calls+1 {
		t.Fatalf("after a late record: %+v (%v), want %d calls", after.Total, err, r.Total.Calls+1)
	}
	if r.Total.Calls != 62 || r.Total.Errors != 6 {
		t.Errorf("total: %+v", r.Total)
	}
	if len(r.Tools) != 3 || r.Tools[0].Name != "alpha__echo" || r.Tools[0].Calls != 40 || r.Tools[0].Errors != 1 {
		t.Fatalf("tools: %+v", r.Tools)
	}
	if p := r.Tools[0].P50MS; p == nil || math.Abs(*p-2)/2 > 0.1 { // within its histogram bucket
		t.Errorf("echo's p50: %v", *p)
	}
	if p := r.Slowest[0].P95MS; p == nil || math.Abs(*p-900)/900 > 0.1 {
		t.Errorf("slow's p95: %v", *p)
	}
	// Latency percentiles come from histograms: each is within its bucket (about 9%
	// wide) of the exact one, or between the two durations the rank falls between.
	if len(r.Servers) != 2 || r.Servers[0].Name != "alpha" || r.Servers[0].Calls != 50 || r.Servers[1].Name != "beta" || r.Servers[1].Calls != 12 {
		t.Fatalf("servers: %+v", r.Servers)
	}
	near(t, "alpha's p50", r.Servers[0].P50MS, 2) // 30 calls of 2 ms, 10 of 3, 10 of 4
	near(t, "alpha's p95", r.Servers[0].P95MS, 4)
	near(t, "beta's p50", r.Servers[1].P50MS, 900)
	near(t, "beta's p95", r.Servers[1].P95MS, 900)
	if len(r.Users) != 3 || r.Users[0].Name != "alice" || r.Users[0].Calls != 42 || r.Users[1].Name != "bob" || r.Users[1].Errors != 6 ||
		r.Users[2].Name != "ann" || r.Users[2].Calls != 0 {
		t.Fatalf("users: %+v", r.Users)
	}
	near(t, "alice's p50", r.Users[0].P50MS, 2) // 30 calls of 2 ms, 12 of 900
	near(t, "alice's p95", r.Users[0].P95MS, 900)
	between(t, "bob's p50", r.Users[1].P50MS, 3, 4) // 10 calls of 3 ms, 10 of 4
	near(t, "bob's p95", r.Users[1].P95MS, 4)
	if r.Users[2].P50MS != nil || r.Users[2].P95MS != nil {
		t.Errorf("ann made no call but has latencies: %+v", r.Users[2])
	}
	if len(r.Days) != 7 || r.Days[3].Calls != 42 || r.Days[5].Calls != 20 || r.Days[0].Calls != 0 {
		t.Fatalf("days: %+v", r.Days)
	}
	near(t, "day 4's p50", r.Days[3].P50MS, 2)
	near(t, "day 4's p95", r.Days[3].P95MS, 900)
	between(t, "day 6's p50", r.Days[5].P50MS, 3, 4)
	near(t, "day 6's p95", r.Days[5].P95MS, 4)
	if r.Days[0].P50MS != nil || r.Days[0].P95MS != nil {
		t.Errorf("a day without calls has latencies: %+v", r.Days[0])
	}
	if len(r.Slowest) != 3 || r.Slowest[0].Name != "beta__slow" {
		t.Errorf("slowest: %+v", r.Slowest)
	}
	if len(r.MostFailing) != 2 || r.MostFailing[0].Name != "alpha__flaky" || math.Abs(r.MostFailing[0].ErrorRate-0.5) > 1e-9 {
		t.Errorf("most failing: %+v", r.MostFailing)
	}
	if len(r.ApprovalWait) != 3 || r.ApprovalWait[0].Tool != "beta__deploy" || r.ApprovalWait[0].Approvals != 5 ||
		r.ApprovalWait[1].Tool != "alpha__echo" || r.ApprovalWait[1].Approvals != 3 || *r.ApprovalWait[1].P50S != 40 ||
		r.ApprovalWait[2].Tool != "alpha__flaky" || *r.ApprovalWait[2].P95S != 100 {
		t.Errorf("approval waits: %+v", r.ApprovalWait)
	}
	// Approval waits by server, by the person who asked and by the day asked, exact
	// (percentile_cont over the waits): deploy's five of 3 s (asked by ann on day 4);
	// echo's 40 s (alice, day 4) and 20 s (bob, day 6); the echo-and-flaky plan's
	// 100 s (bob, day 6), once for alpha though both its steps are there.
	waits := func(what string, r analytics.Row, n int64, p50, p95 float64) {
		t.Helper()
		switch {
		case r.Waits == nil:
			t.Errorf("%s: no approval waits", what)
		case r.Approvals != n || n == 0 && (r.P50S != nil || r.P95S != nil):
			t.Errorf("%s: %d approvals %s %s, want %d", what, r.Approvals, fmtp(r.P50S), fmtp(r.P95S), n)
		case n > 0 && (r.P50S == nil || r.P95S == nil || math.Abs(*r.P50S-p50) > 1e-9 || math.Abs(*r.P95S-p95) > 1e-9):
			t.Errorf("%s: approval wait p50 %s p95 %s, want %v and %v", what, fmtp(r.P50S), fmtp(r.P95S), p50, p95)
		}
	}
	waits("alpha", r.Servers[0], 3, 40, 94) // 20, 40, 100: p95 at rank 1.9
	waits("beta", r.Servers[1], 5, 3, 3)
	waits("alice", r.Users[0], 1, 40, 40)
	waits("bob", r.Users[1], 2, 60, 96)    // 20, 100
	waits("ann", r.Users[2], 5, 3, 3)      // asked, never called: a row of her own
	waits("day 4", r.Days[3], 6, 3, 30.75) // 3, 3, 3, 3, 3, 40: p95 at rank 4.75
	waits("day 6", r.Days[5], 2, 60, 96)
	for _, d := range []int{0, 1, 2, 4, 6} {
		waits("day "+strconv.Itoa(d+1), r.Days[d], 0, 0, 0)
	}
	for _, tr := range r.Tools {
		if tr.Waits != nil {
			t.Errorf("tool %s has group waits (its own are in approval_wait): %+v", tr.Name, tr.Waits)
		}
	}
	if len(r.PendingLongest) != 1 || r.PendingLongest[0].Tool != "beta__slow" || r.PendingLongest[0].Risk != "high" {
		t.Errorf("pending: %+v", r.PendingLongest)
	}

	got := map[string]analytics.Recommendation{}
	for _, rec := range r.Recommendations {
		got[rec.Kind+" "+rec.Tool] = rec
	}
	want := []string{"unused beta__idle", "unused beta__deploy", "failing alpha__flaky", "raise_risk alpha__flaky", "lower_risk beta__deploy"}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("no recommendation %q in %v", k, keys(got))
		}
	}
	if len(got) != len(want) {
		t.Errorf("recommendations %v, want %v", keys(got), want)
	}
	if rec := got["failing alpha__flaky"]; rec.Numbers["errors"] != int64(5) || rec.Because != "5 of its 10 calls failed (50%) in this period." {
		t.Errorf("failing: %+v", rec)
	}
	if rec := got["failing alpha__flaky"]; rec.ToolID != flaky || rec.Numbers["calls"] != int64(10) || rec.Numbers["error_rate"] != 0.5 {
		t.Errorf("failing: %+v", rec)
	}
	if rec := got["lower_risk beta__deploy"]; rec.ToolID != deploy || rec.Numbers["approver"] != "alice" || rec.Numbers["approvals"] != int64(5) ||
		rec.Numbers["slowest_seconds"] != 3.0 || rec.Numbers["risk"] != "medium" ||
		rec.Because != "All 5 approvals of plans with it as a MEDIUM step were given by alice, the slowest after 3.0 s." {
		t.Errorf("lower risk: %+v", rec)
	}
	// Unused: no call in 30 days, enabled since the tool was made (90 days ago); fresh
	// was enabled yesterday, so it is not.
	for _, c := range []struct{ key, id string }{{"unused beta__idle", idle}, {"unused beta__deploy", deploy}} {
		rec := got[c.key]
		if since, _ := rec.Numbers["enabled_since"].(time.Time); rec.ToolID != c.id || rec.Numbers["calls"] != 0 || rec.Numbers["days"] != 30 ||
			!since.Equal(long) || rec.Because != "No call in the last 30 days; enabled since 2026-08-30." {
			t.Errorf("%s: %+v", c.key, rec)
		}
	}
	if _, ok := got["unused beta__fresh"]; ok || fresh == "" {
		t.Error("fresh, enabled yesterday, was called unused")
	}
	// Raise risk: flaky's one LOW step was rolled back once.
	if rec := got["raise_risk alpha__flaky"]; rec.ToolID != flaky || rec.Numbers["rolled_back_executions"] != int64(1) || rec.Numbers["risk"] != "low" ||
		rec.Because != "Plans with it as a LOW step were rolled back once in this period; LOW runs without anyone's approval." {
		t.Errorf("raise risk: %+v", rec)
	}

	// A period that cannot be is refused, naming the field.
	if _, err := analytics.New(w.pool).Report(ctx, analytics.Period{From: now, To: now.Add(-time.Hour)}, now); err == nil {
		t.Error("a reversed period was accepted")
	}
}

// near checks a latency percentile within 10% of want.
func near(t *testing.T, what string, p *float64, want float64) {
	t.Helper()
	if p == nil || math.Abs(*p-want)/want > 0.1 {
		t.Errorf("%s: %v, want about %v", what, fmtp(p), want)
	}
}

// between checks a latency percentile within [lo, hi].
func between(t *testing.T, what string, p *float64, lo, hi float64) {
	t.Helper()
	if p == nil || *p < lo || *p > hi {
		t.Errorf("%s: %v, want between %v and %v", what, fmtp(p), lo, hi)
	}
}

func fmtp(p *float64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func keys(m map[string]analytics.Recommendation) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A step that was LOW by the operation it named (a built-in file read), not by its
// tool's level, does not make its tool a candidate for a higher risk when its plan is
// rolled back: raising the tool's level would not have asked for that step anyway.
// rollupLate is how long before now a late record's call started: in yesterday,
// already rolled up.
const rollupLate = 20 * time.Hour

func TestRolledBackReadIsNoReasonToRaise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	files, flaky := w.tool(w.builtin(), "file_operations", now.Add(-48*time.Hour)), w.tool(w.server("alpha"), "flaky", now.Add(-48*time.Hour))
	for _, st := range []struct{ id, tool, source string }{{files, "builtin__file_operations", "operation"}, {flaky, "alpha__flaky", "annotations"}} {
		w.level(st.id, "low")
		plan, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"tool_id": st.id, "tool": st.tool,
			"risk": map[string]any{"level": "low", "source": st.source}}}})
		w.exec(`INSERT INTO executions (requester_name, requester_kind, plan, plan_hash, status, risk, approval, created_at)
			VALUES ('ann', 'user', $1, '\x00', 'rolled_back', 'low', 'policy', $2)`, plan, now.Add(-time.Hour))
	}
	r, err := analytics.New(w.pool).Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	var raise []string
	for _, rec := range r.Recommendations {
		if rec.Kind == "raise_risk" {
			raise = append(raise, rec.Tool)
		}
	}
	if len(raise) != 1 || raise[0] != "alpha__flaky" {
		t.Fatalf("raise the risk of: %v, want alpha__flaky only", raise)
	}
}

// The lists of a report hold the busiest MaxRows and say how many there are; the
// recommendations still weigh every tool.
func TestReportListsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	srv := w.server("many")
	var last string
	for i := range analytics.MaxRows + 7 {
		last = w.tool(srv, fmt.Sprintf("t%03d", i), now.Add(-48*time.Hour))
		// The least called tool fails most: its recommendation must not be lost.
		calls, fail := 20+i, 0
		if i == analytics.MaxRows+6 {
			calls, fail = analytics.FailingMinCalls, analytics.FailingMinCalls
		}
		w.calls(last, "ann", now.Add(-time.Hour), calls, fail, 5)
	}
	r, err := analytics.New(w.pool).Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tools) != analytics.MaxRows || r.ToolCount != analytics.MaxRows+7 || r.Tools[0].Name != fmt.Sprintf("many__t%03d", analytics.MaxRows+5) {
		t.Fatalf("tools: %d rows of %d, first %+v", len(r.Tools), r.ToolCount, r.Tools[0])
	}
	found := false
	for _, rec := range r.Recommendations {
		found = found || rec.ToolID == last
	}
	if !found {
		t.Fatalf("the failing tool past the list has no recommendation: %+v", r.Recommendations)
	}
}

// A plan counts once in a tool's approval waits however many of its steps use the
// tool, as it does for its server: three steps of echo are one approval of echo.
func TestApprovalWaitOncePerPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	echo := w.tool(w.server("alpha"), "echo", now.Add(-48*time.Hour))
	bob := w.user("bob")
	step := [2]string{echo, "alpha__echo"}
	w.plan("ann", [][2]string{step, step, step}, "medium", "success", bob, now.Add(-2*time.Hour), 10*time.Second)
	w.plan("ann", [][2]string{step}, "medium", "success", bob, now.Add(-time.Hour), 100*time.Second)
	r, err := analytics.New(w.pool).Report(ctx, analytics.LastDays(now, 7), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ApprovalWait) != 1 || r.ApprovalWait[0].Approvals != 2 || fmtp(r.ApprovalWait[0].P50S) != "55" ||
		fmtp(r.ApprovalWait[0].P95S) != "95.5" { // 10 and 100 s: p95 at rank 0.95
		t.Fatalf("approval waits: %+v, want alpha__echo's 2 approvals, p50 55 s, p95 95.5 s", r.ApprovalWait)
	}
	if len(r.Servers) != 1 || r.Servers[0].Approvals != 2 || r.Users[0].Approvals != 2 {
		t.Fatalf("group waits: %+v %+v", r.Servers, r.Users)
	}
}

// Latency percentiles, from the calls and from the rollups alike, are within 5% of
// percentile_cont's: between buckets too (1 ms and 100 ms have a p50 of 50.5 ms), and
// for a call that waited two hours (not capped at a last bucket of 4.4 minutes).
func TestLatencyPercentiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	srv := w.server("alpha")
	yesterday := now.Add(-24 * time.Hour)
	two, waited, spread := w.tool(srv, "two", yesterday), w.tool(srv, "waited", yesterday), w.tool(srv, "spread", yesterday)
	w.calls(two, "ann", yesterday, 1, 0, 1)
	w.calls(two, "ann", yesterday, 1, 0, 100)
	w.calls(waited, "ann", yesterday, 1, 0, 2*3600*1000)
	w.calls(waited, "ann", yesterday, 1, 0, 3*3600*1000)
	for i := range 200 { // 0.3 ms to 3 hours, evenly on a log scale
		w.calls(spread, "bob", yesterday, 1, 0, 0.3*math.Pow(3.6e7, float64(i)/199))
	}
	exact := map[string][2]float64{}
	rows, err := w.pool.Query(ctx, `SELECT tool_id::text, percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms),
		percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FROM tool_usage_logs GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var p [2]float64
		if err := rows.Scan(&id, &p[0], &p[1]); err != nil {
			t.Fatal(err)
		}
		exact[id] = p
	}
	if rows.Err() != nil || len(exact) != 3 {
		t.Fatalf("exact percentiles: %v %v", exact, rows.Err())
	}
	svc := analytics.New(w.pool)
	for _, how := range []string{"from the calls", "from the rollups"} {
		if how == "from the rollups" {
			if n, err := svc.RollUp(ctx, now); err != nil || n != 1 {
				t.Fatalf("rolled up %d days (%v)", n, err)
			}
		}
		r, err := svc.Report(ctx, analytics.LastDays(now, 7), now)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Tools) != 3 {
			t.Fatalf("%s: tools %+v", how, r.Tools)
		}
		for _, tr := range r.Tools {
			for i, p := range []*float64{tr.P50MS, tr.P95MS} {
				if want := exact[tr.Key][i]; p == nil || math.Abs(*p-want)/want > 0.05 {
					t.Errorf("%s: %s's p%d: %s, want %v within 5%%", how, tr.Name, []int{50, 95}[i], fmtp(p), want)
				}
			}
		}
	}
}

// Deleting a server takes its tools' calls out of every part of a report: the people's
// rollups, which name no tool, are stale from then on, and the next report rolls their
// days again before reading them.
func TestDeletedServerLeavesNoCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := world{t: t, ctx: ctx, pool: dbtest.New(t)}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	gone, kept := w.server("gone"), w.server("kept")
	old, keep := w.tool(gone, "old", now.Add(-90*24*time.Hour)), w.tool(kept, "keep", now.Add(-90*24*time.Hour))
	long := now.Add(-10 * 24 * time.Hour) // past the days rolled again for late records
	w.calls(old, "carl", long, 3, 1, 5)
	w.calls(old, "alice", long, 1, 0, 5)
	w.calls(keep, "alice", long, 2, 0, 5)
	svc := analytics.New(w.pool)
	if _, err := svc.RollUp(ctx, now); err != nil {
		t.Fatal(err)
	}
	w.exec(`DELETE FROM mcp_servers WHERE id = $1`, gone)
	check := func(when string) {
		t.Helper()
		r, err := svc.Report(ctx, analytics.LastDays(now, 30), now)
		if err != nil {
			t.Fatal(err)
		}
		if r.Total.Calls != 2 || r.Total.Errors != 0 || len(r.Servers) != 1 || r.Servers[0].Calls != 2 {
			t.Fatalf("%s: total %+v, servers %+v", when, r.Total, r.Servers)
		}
		if len(r.Users) != 1 || r.Users[0].Name != "alice" || r.Users[0].Calls != 2 || r.Users[0].Errors != 0 {
			t.Fatalf("%s: users %+v, want alice's 2 calls of keep only", when, r.Users)
		}
	}
	check("deleted")
	check("rolled again")
	var actors int
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM usage_daily_actors WHERE actor = 'carl'`).Scan(&actors); err != nil || actors != 0 {
		t.Fatalf("carl's rollups: %d %v", actors, err)
	}
	if n, err := svc.RollUp(ctx, now); err != nil || n != 0 {
		t.Fatalf("a second roll-up rolled %d days (%v)", n, err)
	}
}
