// Package analytics is what the calls and approvals add up to (seed 004, scenario 5):
// calls, errors, latency and approval wait per tool, server, user and day over a
// period; the slowest and most failing tools; the approvals waiting longest; and
// recommendations drawn from the numbers, each with the numbers behind it. It only
// reads: tool_usage_logs (one row per call, services/usage), executions, mcp_tools and
// their state history.
package analytics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Thresholds of the recommendations.
const (
	// UnusedFor: an enabled tool with no call for this long (and enabled at least as
	// long) may be disabled.
	UnusedFor = 30 * 24 * time.Hour
	// FailingRate and FailingMinCalls: a tool failing more than this share of at
	// least this many calls in the period is worth a look.
	FailingRate     = 0.20
	FailingMinCalls = 10
	// QuickApprovals, QuickWithin: a MEDIUM tool whose last QuickApprovals or more
	// approvals in the period were all given by one person within QuickWithin.
	QuickApprovals = 5
	QuickWithin    = 10 * time.Second
	// TopN is how many rows the "slowest", "most failing" and "pending longest" lists
	// hold.
	TopN = 5
	// MaxRows bounds the lists of tools, servers, users and approvers of a report.
	MaxRows = 50
	// MaxPeriod bounds a report's period.
	MaxPeriod = 366 * 24 * time.Hour
)

// Limits on reports running at once (ReportBy). A year's report over thousands of
// tools reads and adds up hundreds of thousands of rollup rows on up to six of the
// shared pool's connections (reportConns): one person gains nothing from a second at
// once, and a few people's reports must not take the pool from every tool call.
const (
	maxReportsPerPerson = 1
	maxReports          = 2
	// reportSlotWait is how long a report waits for a slot before it is refused.
	reportSlotWait = 5 * time.Second
	// reportBusyRetry is the Retry-After of a refused report.
	reportBusyRetry = 30 * time.Second
)

// reportConns is how many of pool's connections the reports running at once use
// between them: a quarter (as the assistant's turns), at least one. A fixed six a
// report took twelve of a pool of eight (pool_max_conns) with two reports, and every
// tool call waited for them; the rest of the pool is the calls'.
func reportConns(pool *pgxpool.Pool) int {
	return max(1, int(pool.Config().MaxConns)/4)
}

// Service reads the analytics.
type Service struct {
	pool *pgxpool.Pool
	// conns holds a token for each part of a report reading now (each reads on one
	// connection at a time), at most reportConns.
	conns chan struct{}

	mu      sync.Mutex
	running int            // reports running (ReportBy)
	people  map[string]int // of them, by person (reportPerson)
	// admitted, when set (tests), runs once a report has its slot and before it reads;
	// waiting, when a report found no slot free; reading, when a part of a report has
	// its connection's token (conns) and before it reads.
	admitted, waiting, reading func()
}

// New returns the service.
func New(pool *pgxpool.Pool) *Service {
	return &Service{pool: pool, conns: make(chan struct{}, reportConns(pool)), people: map[string]int{}}
}

// Period is [From, To).
type Period struct{ From, To time.Time }

// LastDays is the period of the last n days (UTC) up to now: today and the n-1
// whole days before it, so only today's calls are read one by one.
func LastDays(now time.Time, n int) Period {
	return Period{From: now.UTC().Truncate(day).Add(-time.Duration(n-1) * day), To: now}
}

// Check reports a period that is empty, reversed or too long, or has an end outside
// the years 1970 to 9999 in UTC (a report's JSON holds no other), naming the field.
func (p Period) Check() error {
	var e verr.Error
	outside := func(t time.Time) bool { return t.UTC().Year() < 1970 || t.UTC().Year() > 9999 }
	switch {
	case p.From.IsZero() || p.To.IsZero():
		e.Add("from", "a period needs from and to")
	case outside(p.From) || outside(p.To):
		if outside(p.From) {
			e.Add("from", "must be in the years 1970 to 9999 (UTC)")
		}
		if outside(p.To) {
			e.Add("to", "must be in the years 1970 to 9999 (UTC)")
		}
	case !p.To.After(p.From):
		e.Add("to", "must be after from")
	case p.To.Sub(p.From) > MaxPeriod:
		e.Add("from", fmt.Sprintf("the period is longer than %d days", int(MaxPeriod.Hours()/24)))
	}
	return e.Err()
}

// Stats are the calls of one group.
type Stats struct {
	Calls  int64    `json:"calls"`
	Errors int64    `json:"errors"`
	P50MS  *float64 `json:"p50_ms"` // nil when no call has a duration
	P95MS  *float64 `json:"p95_ms"`
}

// ErrorRate is Errors over Calls (0 without calls).
func (s Stats) ErrorRate() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Errors) / float64(s.Calls)
}

// Row is a group's stats: a tool, a server, a user or a day.
type Row struct {
	Key  string `json:"key"`  // the tool's or server's id, the user's name, the day (2006-01-02)
	Name string `json:"name"` // what people call it (a tool's qualified name)
	Stats
	ErrorRate float64 `json:"error_rate"`
	// Waits is set on the rows of servers, users and days (a tool's are in
	// Report.ApprovalWait); nil, and left out of the JSON, on the rows of tools.
	*Waits
}

// Waits is how long a group's plans waited for a person's approval: the plans
// created in the period and approved by a person (confirm or phrase), each counted
// once per group it belongs to. A plan belongs to the day (UTC) it was created, to
// the person who asked for it (its requester, the same name the calls are counted
// under; "system" for none) and to every server one of its steps' tools is on.
type Waits struct {
	Approvals int64    `json:"approvals"`
	P50S      *float64 `json:"approval_p50_seconds"` // nil without approvals
	P95S      *float64 `json:"approval_p95_seconds"`
}

// Wait is how long approvals of a tool's plans took.
type Wait struct {
	Tool      string   `json:"tool"`
	Approvals int64    `json:"approvals"`
	P50S      *float64 `json:"p50_seconds"`
	P95S      *float64 `json:"p95_seconds"`
}

// Pending is an execution waiting for approval.
type Pending struct {
	ID        string    `json:"id"`
	Requester string    `json:"requester"`
	Risk      string    `json:"risk"`
	Tool      string    `json:"tool"` // its first step's
	Since     time.Time `json:"since"`
}

// Recommendation is something the numbers suggest, with the numbers.
type Recommendation struct {
	Kind    string         `json:"kind"` // unused, failing, raise_risk, lower_risk
	ToolID  string         `json:"tool_id"`
	Tool    string         `json:"tool"`
	Advice  string         `json:"advice"`  // what to consider
	Because string         `json:"because"` // the numbers, in words
	Numbers map[string]any `json:"numbers"`
}

// Report is the analytics of a period.
type Report struct {
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	Total        Stats     `json:"total"`
	Tools        []Row     `json:"top_tools"` // most calls first
	Servers      []Row     `json:"servers"`   // most calls first
	Users        []Row     `json:"users"`     // most calls first
	Days         []Row     `json:"days"`      // oldest first, every day of the period
	Slowest      []Row     `json:"slowest"`   // by p95, tools with at least FailingMinCalls calls
	MostFailing  []Row     `json:"most_failing"`
	ApprovalWait []Wait    `json:"approval_wait"` // most approvals first
	// How many tools, servers, users and approvers had calls (or approvals) in the
	// period; the lists above hold at most MaxRows of them.
	ToolCount         int              `json:"tool_count"`
	ServerCount       int              `json:"server_count"`
	UserCount         int              `json:"user_count"`
	ApprovalWaitCount int              `json:"approval_wait_count"`
	PendingLongest    []Pending        `json:"pending_longest"`
	Recommendations   []Recommendation `json:"recommendations"` // at most MaxRecommendations of each kind
	// FailingCount is how many tools failed often (the rule of FailingRate); the
	// recommendations name the MaxRecommendations of them failing most.
	FailingCount int `json:"failing_count"`
}

// reportPerson is who a report counts against: a person, whether signed in or by one
// of their tokens; otherwise the actor as named (as audit exports count).
func reportPerson(a audit.Actor) string {
	if (a.Kind == audit.ActorUser || a.Kind == audit.ActorToken) && a.ID != "" {
		return "user:" + a.ID
	}
	return a.Kind + ":" + a.Name
}

// admit takes a slot for a report by actor, or refuses at once (rate limited, with a
// wait) past the limits; release gives the slot back.
func (s *Service) admit(actor audit.Actor) (release func(), err error) {
	who := reportPerson(actor)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.people[who] >= maxReportsPerPerson:
		return nil, fault.RateLimited("a report of yours is already running: wait for it to finish", reportBusyRetry)
	case s.running >= maxReports:
		return nil, fault.RateLimited(fmt.Sprintf("%d reports are running: try again in half a minute", maxReports), reportBusyRetry)
	}
	s.running++
	s.people[who]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.people[who]--; s.people[who] == 0 {
			delete(s.people, who)
		}
		s.running--
	}, nil
}

// ReportBy is Report for actor, within the limits on reports running at once: past
// them it is refused at once as rate limited.
func (s *Service) ReportBy(ctx context.Context, actor audit.Actor, p Period, now time.Time) (*Report, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	// A person's earlier report may be one they just left (another period clicked): its
	// request ends and gives its slot back within moments, so wait a little for it.
	release, err := s.admit(actor)
	if err != nil && s.waiting != nil {
		s.waiting()
	}
	for wait := time.NewTimer(reportSlotWait); err != nil && fault.Is(err, fault.KindRateLimited); {
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		case <-wait.C:
			return nil, err
		case <-time.After(50 * time.Millisecond):
			release, err = s.admit(actor)
		}
	}
	if err != nil {
		return nil, err
	}
	defer release()
	if s.admitted != nil {
		s.admitted()
	}
	return s.Report(ctx, p, now)
}

// Report computes the analytics of p (now: the clock of the unused-tool rule), outside
// the limits of ReportBy.
func (s *Service) Report(ctx context.Context, p Period, now time.Time) (*Report, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	r := &Report{From: p.From.UTC(), To: p.To.UTC()}
	// The parts read different tables (or write different fields of r), so they run
	// side by side on the pool's connections, as many as reportConns leaves free: alone
	// on a pool of the default size a report takes as long as its slowest part.
	var unused, raise, lower Report
	var waits []groupWait
	parts := []func(context.Context) error{
		func(ctx context.Context) error { return s.calls(ctx, p, r) },
		func(ctx context.Context) error { return s.approvals(ctx, p, r) },
		func(ctx context.Context) error { var err error; waits, err = s.groupWaits(ctx, p); return err },
		func(ctx context.Context) error { return s.unused(ctx, now, &unused) },
		func(ctx context.Context) error { return s.rolledBackLow(ctx, p, &raise) },
		func(ctx context.Context) error { return s.quickMedium(ctx, p, &lower) },
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Go(func() {
			select {
			case s.conns <- struct{}{}:
				defer func() { <-s.conns }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			if s.reading != nil {
				s.reading()
			}
			if errs[i] = part(ctx); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	addWaits(r, waits)
	fails, failCount := failing(r)
	r.Recommendations = slices.Concat(unused.Recommendations, fails, raise.Recommendations, lower.Recommendations)
	r.FailingCount = failCount
	// Every group counts in the recommendations above; the lists carry the busiest
	// MaxRows, and say how many there are (10,000 tools made 10,000 rows a view).
	r.ToolCount, r.ServerCount, r.UserCount, r.ApprovalWaitCount = len(r.Tools), len(r.Servers), len(r.Users), len(r.ApprovalWait)
	r.Tools, r.Servers, r.Users = r.Tools[:min(len(r.Tools), MaxRows)], r.Servers[:min(len(r.Servers), MaxRows)], r.Users[:min(len(r.Users), MaxRows)]
	r.ApprovalWait = r.ApprovalWait[:min(len(r.ApprovalWait), MaxRows)]
	nonNil(&r.Tools, &r.Servers, &r.Users, &r.Days, &r.Slowest, &r.MostFailing)
	nonNil(&r.ApprovalWait)
	nonNil(&r.PendingLongest)
	nonNil(&r.Recommendations)
	return r, nil
}

// nonNil makes each nil list empty: the API answers [] for a list with nothing in it
// (DESIGN §1's {"top_tools":[...]}), never null.
func nonNil[T any](lists ...*[]T) {
	for _, l := range lists {
		if *l == nil {
			*l = []T{}
		}
	}
}

// calls fills the call statistics: the rollups of the period's whole days that are
// rolled up (rollup.go), and the calls themselves for the rest of the period.
func (s *Service) calls(ctx context.Context, p Period, r *Report) error {
	from, to := p.From.UTC(), p.To.UTC()
	rolled, stale, err := rolledDays(ctx, s.pool, from, to)
	if err != nil {
		return err
	}
	// A stale day (a server deleted) is rolled again now rather than read from its calls
	// until the hourly job: a year's report would group a year of calls.
	if len(stale) > 0 {
		fresh, _, err := s.rollAgain(ctx, stale)
		if err != nil {
			return err
		}
		rolled = append(rolled, fresh...)
		slices.SortFunc(rolled, time.Time.Compare)
	}
	gaps := gapsAround(rolled, from, to)
	// days are keyed by their midnight's Unix time.
	tools, actors, days := map[string]*group{}, map[string]*group{}, map[int64]*group{}
	dayOf := func(d time.Time) *group {
		k := d.Unix()
		if days[k] == nil {
			days[k] = &group{}
		}
		return days[k]
	}
	var total group
	for _, gp := range gaps {
		// Added up as they arrive, as the rollups below are: what a report holds is its
		// groups, however many calls the days without rollups have.
		if err := raw(ctx, s.pool, gp[0], gp[1], func(x *rawRow) error {
			groupOf(tools, x.tool).addRaw(x)
			groupOf(actors, x.actor).addRaw(x)
			dayOf(x.day).addRaw(x)
			total.addRaw(x)
			return nil
		}); err != nil {
			return err
		}
	}
	if len(rolled) > 0 {
		for _, t := range []struct {
			table, col string
			tools      bool
		}{{"usage_daily_tools", "tool_id::text", true}, {"usage_daily_actors", "actor", false}} {
			rows, err := s.pool.Query(ctx, `/* analytics.rollups */ SELECT day, `+t.col+`, calls, errors, hist FROM `+t.table+`
				WHERE day = ANY($1)`, rolled)
			if err != nil {
				return fmt.Errorf("analytics: calls: %w", err)
			}
			// A year of thousands of tools is hundreds of thousands of rows: each is added
			// to its groups in place, read from the driver's bytes, allocating nothing of
			// its own but a group new to the report.
			var into []*group
			var d time.Time
			var key, raw pgtype.DriverBytes
			var calls, errs int64
			dest := []any{&d, &key, &calls, &errs, &raw} // one for every row: Scan's variadic arguments were an allocation a row
			for rows.Next() {
				if err := rows.Scan(dest...); err != nil {
					rows.Close()
					return fmt.Errorf("analytics: calls: %w", err)
				}
				if t.tools {
					into = append(into[:0], groupOf(tools, []byte(key)), dayOf(d), &total)
				} else {
					into = append(into[:0], groupOf(actors, []byte(key)))
				}
				for _, g := range into {
					g.calls += calls
					g.errors += errs
					if err := g.h.addEncoded(raw); err != nil {
						rows.Close()
						return err
					}
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("analytics: calls: %w", err)
			}
		}
	}
	r.Total = stats(&total)
	for k, g := range tools {
		r.Tools = append(r.Tools, row(k, "", stats(g)))
	}
	for k, g := range actors {
		name := k
		if name == "" {
			name = "system"
		}
		r.Users = append(r.Users, row(name, name, stats(g)))
	}
	for d := from.Truncate(day); d.Before(to); d = d.Add(day) {
		k := d.Format(time.DateOnly)
		var g group
		if days[d.Unix()] != nil {
			g = *days[d.Unix()]
		}
		r.Days = append(r.Days, row(k, k, stats(&g)))
	}
	servers, err := s.names(ctx, r)
	if err != nil {
		return err
	}
	bySrv := map[string]*group{}
	for id, sv := range servers {
		groupOf(bySrv, sv).add(tools[id])
	}
	for k, g := range bySrv {
		r.Servers = append(r.Servers, row(k, "", stats(g)))
	}
	if err := s.serverNames(ctx, r); err != nil {
		return err
	}
	slices.SortFunc(r.Tools, byCalls)
	slices.SortFunc(r.Servers, byCalls)
	slices.SortFunc(r.Users, byCalls)
	var busy []Row
	for _, t := range r.Tools {
		if t.Calls >= FailingMinCalls {
			busy = append(busy, t)
		}
	}
	r.Slowest = top(busy, func(a, b Row) int { return cmpFloat(b.P95MS, a.P95MS) })
	r.MostFailing = top(slices.DeleteFunc(slices.Clone(busy), func(t Row) bool { return t.Errors == 0 }), byErrorRate)
	return nil
}

// byErrorRate orders rows the highest error rate first, then the most errors.
func byErrorRate(a, b Row) int {
	if a.ErrorRate != b.ErrorRate {
		if a.ErrorRate > b.ErrorRate {
			return -1
		}
		return 1
	}
	return int(b.Errors - a.Errors)
}

// byCalls orders rows most calls first, then by name.
func byCalls(a, b Row) int {
	if a.Calls != b.Calls {
		return int(b.Calls - a.Calls)
	}
	return cmpString(a.Name, b.Name)
}

func stats(g *group) Stats {
	return Stats{Calls: g.calls, Errors: g.errors, P50MS: g.h.quantile(0.5), P95MS: g.h.quantile(0.95)}
}

func row(key, name string, st Stats) Row {
	return Row{Key: key, Name: name, Stats: st, ErrorRate: st.ErrorRate()}
}

func top(rows []Row, cmp func(a, b Row) int) []Row {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, cmp)
	return rows[:min(len(rows), TopN)]
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat orders nil last.
func cmpFloat(a, b *float64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	case *a < *b:
		return -1
	case *a > *b:
		return 1
	}
	return 0
}

// names puts the tools' qualified names on their rows and returns each tool's server.
func (s *Service) names(ctx context.Context, r *Report) (map[string]string, error) {
	ids := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		ids[i] = t.Key
	}
	servers := map[string]string{}
	if len(ids) == 0 {
		return servers, nil
	}
	rows, err := s.pool.Query(ctx, `/* analytics.names */
		SELECT t.id::text, t.server_id::text, sv.name || '__' || t.name FROM mcp_tools t JOIN mcp_servers sv ON sv.id = t.server_id
		WHERE t.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("analytics: names: %w", err)
	}
	names := map[string]string{}
	for rows.Next() {
		var id, server, name string
		if err := rows.Scan(&id, &server, &name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("analytics: names: %w", err)
		}
		names[id], servers[id] = name, server
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: names: %w", err)
	}
	for i := range r.Tools {
		r.Tools[i].Name = names[r.Tools[i].Key]
	}
	return servers, nil
}

// serverNames puts the servers' names on their rows.
func (s *Service) serverNames(ctx context.Context, r *Report) error {
	ids := make([]string, len(r.Servers))
	for i, sv := range r.Servers {
		ids[i] = sv.Key
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := s.pool.Query(ctx, `/* analytics.server_names */ SELECT id::text, name FROM mcp_servers WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return fmt.Errorf("analytics: names: %w", err)
	}
	names := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			rows.Close()
			return fmt.Errorf("analytics: names: %w", err)
		}
		names[id] = name
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("analytics: names: %w", err)
	}
	for i := range r.Servers {
		r.Servers[i].Name = names[r.Servers[i].Key]
	}
	return nil
}

// approvals fills the approval waits of the period's plans (approved by a person) by
// tool, and the executions waiting longest now. A plan counts once per tool however
// many of its steps use it (as in groupWaits): counted per step, a plan calling a
// tool three times was three approvals and weighed its wait three times.
func (s *Service) approvals(ctx context.Context, p Period, r *Report) error {
	rows, err := s.pool.Query(ctx, `/* analytics.approvals */
		WITH w AS (
			SELECT DISTINCT e.id, st->>'tool' AS tool, extract(epoch FROM e.approved_at - e.created_at) AS wait
			FROM executions e, jsonb_array_elements(e.plan->'steps') st
			WHERE e.approved_at IS NOT NULL AND e.approval IN ('confirm', 'phrase') AND e.created_at >= $1 AND e.created_at < $2
		)
		SELECT tool, count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY wait), percentile_cont(0.95) WITHIN GROUP (ORDER BY wait)
		FROM w GROUP BY 1 ORDER BY 2 DESC, 1`, p.From, p.To)
	if err != nil {
		return fmt.Errorf("analytics: approval waits: %w", err)
	}
	r.ApprovalWait, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Wait, error) {
		var w Wait
		err := row.Scan(&w.Tool, &w.Approvals, &w.P50S, &w.P95S)
		return w, err
	})
	if err != nil {
		return fmt.Errorf("analytics: approval waits: %w", err)
	}
	rows, err = s.pool.Query(ctx, `/* analytics.pending */
		SELECT id::text, requester_name, risk, coalesce(plan->'steps'->0->>'tool', ''), created_at
		FROM executions WHERE status = 'awaiting_approval' ORDER BY created_at, id LIMIT $1`, TopN)
	if err != nil {
		return fmt.Errorf("analytics: pending: %w", err)
	}
	r.PendingLongest, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Pending, error) {
		var pe Pending
		err := row.Scan(&pe.ID, &pe.Requester, &pe.Risk, &pe.Tool, &pe.Since)
		return pe, err
	})
	if err != nil {
		return fmt.Errorf("analytics: pending: %w", err)
	}
	return nil
}

// groupWait is the approval waits of one server, user or day.
type groupWait struct {
	kind, key, name string // kind: server, user or day
	Waits
}

// groupWaits reads the approval waits of the period's plans by server, requester and
// day (see Waits). The percentiles are exact: they come from the executions, which
// are few beside the calls.
func (s *Service) groupWaits(ctx context.Context, p Period) ([]groupWait, error) {
	rows, err := s.pool.Query(ctx, `/* analytics.group_waits */
		WITH w AS (
			SELECT e.id, e.plan, coalesce(nullif(e.requester_name, ''), 'system') AS who,
				to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
				extract(epoch FROM e.approved_at - e.created_at)::float8 AS wait
			FROM executions e
			WHERE e.approved_at IS NOT NULL AND e.approval IN ('confirm', 'phrase') AND e.created_at >= $1 AND e.created_at < $2
		), srv AS (
			SELECT DISTINCT w.id, w.wait, sv.id::text AS key, sv.name
			FROM w, jsonb_array_elements(w.plan->'steps') st
				JOIN mcp_tools t ON t.id::text = st->>'tool_id' JOIN mcp_servers sv ON sv.id = t.server_id
		)
		SELECT 'server', key, name, count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
			percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) FROM srv GROUP BY key, name
		UNION ALL
		SELECT 'user', who, who, count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
			percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) FROM w GROUP BY who
		UNION ALL
		SELECT 'day', day, day, count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
			percentile_cont(0.95) WITHIN GROUP (ORDER BY wait) FROM w GROUP BY day`, p.From, p.To)
	if err != nil {
		return nil, fmt.Errorf("analytics: approval waits by group: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (groupWait, error) {
		var g groupWait
		err := row.Scan(&g.kind, &g.key, &g.name, &g.Approvals, &g.P50S, &g.P95S)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("analytics: approval waits by group: %w", err)
	}
	return out, nil
}

// addWaits puts the approval waits on the rows of servers, users and days. A server or
// person with approvals but no call in the period gets a row of its own (no calls);
// every other row gets no approvals.
func addWaits(r *Report, waits []groupWait) {
	lists := map[string]*[]Row{"server": &r.Servers, "user": &r.Users, "day": &r.Days}
	for _, rows := range lists {
		for i := range *rows {
			(*rows)[i].Waits = &Waits{}
		}
	}
	for _, g := range waits {
		rows := lists[g.kind]
		i := slices.IndexFunc(*rows, func(x Row) bool { return x.Key == g.key })
		if i < 0 {
			if g.kind == "day" { // every day of the period has its row already
				continue
			}
			*rows = append(*rows, row(g.key, g.name, Stats{}))
			i = len(*rows) - 1
		}
		w := g.Waits
		(*rows)[i].Waits = &w
	}
	slices.SortStableFunc(r.Servers, byCalls)
	slices.SortStableFunc(r.Users, byCalls)
}
