package analytics_test

import (
	"context"
	"encoding/json"
	"math"
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

// tool adds an enabled tool, enabled since.
func (w world) tool(server, name string, since time.Time) string {
	id := uuid.NewString()
	w.exec(`INSERT INTO mcp_tools (id, server_id, name, definition, definition_hash, status, created_at)
		VALUES ($1, $2, $3, '{}', 'h', 'enabled', $4)`, id, server, name, since)
	return id
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

// execution records an execution of one step of tool at risk, approved by approver
// (its id; "" for policy) after wait.
func (w world) execution(toolID, tool, level, status, approver string, created time.Time, wait time.Duration) {
	w.t.Helper()
	plan, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"tool_id": toolID, "tool": tool,
		"risk": map[string]any{"level": level}}}})
	approval, approved := "policy", (*time.Time)(nil)
	var by *string
	if approver != "" {
		approval = map[string]string{"medium": "confirm", "high": "phrase"}[level]
		at := created.Add(wait)
		approved, by = &at, &approver
	}
	w.exec(`INSERT INTO executions (requester_name, requester_kind, plan, plan_hash, status, risk, approval, approved_by,
			approver_name, approved_at, created_at)
		VALUES ('ann', 'user', $1, '\x00', $2, $3, $4, $5, coalesce((SELECT username FROM users WHERE id = $5), ''), $6, $7)`,
		plan, status, level, approval, by, approved, created)
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

	day1, day3 := now.Add(-3*24*time.Hour), now.Add(-1*24*time.Hour)
	w.calls(echo, "alice", day1, 30, 0, 2)
	w.calls(echo, "bob", day3, 10, 1, 4)
	w.calls(flaky, "bob", day3, 10, 5, 3)
	w.calls(slow, "alice", day1, 12, 0, 900)
	w.calls(echo, "alice", now.Add(-40*24*time.Hour), 5, 0, 1) // before the period

	for i := range 5 { // deploy: MEDIUM, always alice within seconds
		w.execution(deploy, "beta__deploy", "medium", "success", alice, day1.Add(time.Duration(i)*time.Hour), 3*time.Second)
	}
	w.execution(echo, "alpha__echo", "medium", "success", bob, day1, 40*time.Second)
	w.execution(echo, "alpha__echo", "medium", "success", alice, day3, 20*time.Second)
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
	if len(r.Servers) != 2 || r.Servers[0].Name != "alpha" || r.Servers[0].Calls != 50 || r.Servers[1].Name != "beta" {
		t.Errorf("servers: %+v", r.Servers)
	}
	if len(r.Users) != 2 || r.Users[0].Name != "alice" || r.Users[0].Calls != 42 || r.Users[1].Errors != 6 {
		t.Errorf("users: %+v", r.Users)
	}
	if len(r.Days) != 7 || r.Days[3].Calls != 42 || r.Days[5].Calls != 20 || r.Days[0].Calls != 0 {
		t.Errorf("days: %+v", r.Days)
	}
	if len(r.Slowest) != 3 || r.Slowest[0].Name != "beta__slow" {
		t.Errorf("slowest: %+v", r.Slowest)
	}
	if len(r.MostFailing) != 2 || r.MostFailing[0].Name != "alpha__flaky" || math.Abs(r.MostFailing[0].ErrorRate-0.5) > 1e-9 {
		t.Errorf("most failing: %+v", r.MostFailing)
	}
	if len(r.ApprovalWait) != 2 || r.ApprovalWait[0].Tool != "beta__deploy" || r.ApprovalWait[0].Approvals != 5 ||
		r.ApprovalWait[1].Tool != "alpha__echo" || *r.ApprovalWait[1].P50S != 30 {
		t.Errorf("approval waits: %+v", r.ApprovalWait)
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
	if rec := got["lower_risk beta__deploy"]; rec.Numbers["approver"] != "alice" || rec.Numbers["approvals"] != int64(5) {
		t.Errorf("lower risk: %+v", rec)
	}
	_ = fresh
	_ = idle

	// A period that cannot be is refused, naming the field.
	if _, err := analytics.New(w.pool).Report(ctx, analytics.Period{From: now, To: now.Add(-time.Hour)}, now); err == nil {
		t.Error("a reversed period was accepted")
	}
}

func keys(m map[string]analytics.Recommendation) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
