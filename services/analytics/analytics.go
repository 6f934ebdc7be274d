// Package analytics is what the calls and approvals add up to (seed 004, scenario 5):
// calls, errors, latency and approval wait per tool, server, user and day over a
// period; the slowest and most failing tools; the approvals waiting longest; and
// recommendations drawn from the numbers, each with the numbers behind it. It only
// reads: tool_usage_logs (one row per call, services/usage), executions, mcp_tools and
// their state history.
package analytics

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	// MaxPeriod bounds a report's period.
	MaxPeriod = 366 * 24 * time.Hour
)

// Service reads the analytics.
type Service struct{ pool *pgxpool.Pool }

// New returns the service.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// Period is [From, To).
type Period struct{ From, To time.Time }

// LastDays is the period of the n days up to now.
func LastDays(now time.Time, n int) Period {
	return Period{From: now.Add(-time.Duration(n) * 24 * time.Hour), To: now}
}

// Check reports a period that is empty, reversed or too long, naming the field.
func (p Period) Check() error {
	var e verr.Error
	switch {
	case p.From.IsZero() || p.To.IsZero():
		e.Add("from", "a period needs from and to")
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
	From            time.Time        `json:"from"`
	To              time.Time        `json:"to"`
	Total           Stats            `json:"total"`
	Tools           []Row            `json:"top_tools"` // most calls first
	Servers         []Row            `json:"servers"`   // most calls first
	Users           []Row            `json:"users"`     // most calls first
	Days            []Row            `json:"days"`      // oldest first, every day of the period
	Slowest         []Row            `json:"slowest"`   // by p95, tools with at least FailingMinCalls calls
	MostFailing     []Row            `json:"most_failing"`
	ApprovalWait    []Wait           `json:"approval_wait"` // most approvals first
	PendingLongest  []Pending        `json:"pending_longest"`
	Recommendations []Recommendation `json:"recommendations"`
}

// Report computes the analytics of p (now: the clock of the unused-tool rule).
func (s *Service) Report(ctx context.Context, p Period, now time.Time) (*Report, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	r := &Report{From: p.From.UTC(), To: p.To.UTC()}
	if err := s.calls(ctx, p, r); err != nil {
		return nil, err
	}
	if err := s.approvals(ctx, p, r); err != nil {
		return nil, err
	}
	if err := s.recommend(ctx, p, now, r); err != nil {
		return nil, err
	}
	return r, nil
}

// calls fills the call statistics in one pass over the period's calls: grouping sets
// by tool, server, user and day, and the total.
func (s *Service) calls(ctx context.Context, p Period, r *Report) error {
	rows, err := s.pool.Query(ctx, `/* analytics.calls */
		SELECT GROUPING(u.tool_id, t.server_id, u.actor, x.day), u.tool_id::text, t.server_id::text, u.actor, x.day,
			count(*), count(*) FILTER (WHERE NOT u.success),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY u.duration_ms),
			percentile_cont(0.95) WITHIN GROUP (ORDER BY u.duration_ms)
		FROM tool_usage_logs u JOIN mcp_tools t ON t.id = u.tool_id,
			LATERAL (SELECT (u.used_at AT TIME ZONE 'UTC')::date AS day) x
		WHERE u.used_at >= $1 AND u.used_at < $2
		GROUP BY GROUPING SETS ((u.tool_id), (t.server_id), (u.actor), (x.day), ())`, p.From, p.To)
	if err != nil {
		return fmt.Errorf("analytics: calls: %w", err)
	}
	days := map[string]Stats{}
	for rows.Next() {
		var g int
		var tool, server, actor *string
		var day *time.Time
		var st Stats
		if err := rows.Scan(&g, &tool, &server, &actor, &day, &st.Calls, &st.Errors, &st.P50MS, &st.P95MS); err != nil {
			rows.Close()
			return fmt.Errorf("analytics: calls: %w", err)
		}
		// GROUPING's bits, first argument highest: 0b0111 is by tool, and so on.
		switch g {
		case 0b0111:
			r.Tools = append(r.Tools, row(*tool, "", st))
		case 0b1011:
			r.Servers = append(r.Servers, row(*server, "", st))
		case 0b1101:
			name := *actor
			if name == "" {
				name = "system"
			}
			r.Users = append(r.Users, row(name, name, st))
		case 0b1110:
			days[day.Format(time.DateOnly)] = st
		case 0b1111:
			r.Total = st
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("analytics: calls: %w", err)
	}
	for d := p.From.UTC().Truncate(24 * time.Hour); d.Before(p.To); d = d.Add(24 * time.Hour) {
		k := d.Format(time.DateOnly)
		r.Days = append(r.Days, row(k, k, days[k]))
	}
	if err := s.names(ctx, r); err != nil {
		return err
	}
	byCalls := func(a, b Row) int {
		if a.Calls != b.Calls {
			return int(b.Calls - a.Calls)
		}
		return cmpString(a.Name, b.Name)
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
	r.MostFailing = top(slices.DeleteFunc(slices.Clone(busy), func(t Row) bool { return t.Errors == 0 }),
		func(a, b Row) int {
			if a.ErrorRate != b.ErrorRate {
				if a.ErrorRate > b.ErrorRate {
					return -1
				}
				return 1
			}
			return int(b.Errors - a.Errors)
		})
	return nil
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

// names puts the tools' qualified names and the servers' names on their rows.
func (s *Service) names(ctx context.Context, r *Report) error {
	var tools, servers []string
	for _, t := range r.Tools {
		tools = append(tools, t.Key)
	}
	for _, sv := range r.Servers {
		servers = append(servers, sv.Key)
	}
	if len(tools) == 0 && len(servers) == 0 {
		return nil
	}
	rows, err := s.pool.Query(ctx, `/* analytics.names */
		SELECT 'tool', t.id::text, sv.name || '__' || t.name FROM mcp_tools t JOIN mcp_servers sv ON sv.id = t.server_id
		WHERE t.id = ANY($1::uuid[])
		UNION ALL SELECT 'server', id::text, name FROM mcp_servers WHERE id = ANY($2::uuid[])`, tools, servers)
	if err != nil {
		return fmt.Errorf("analytics: names: %w", err)
	}
	names := map[[2]string]string{}
	for rows.Next() {
		var kind, id, name string
		if err := rows.Scan(&kind, &id, &name); err != nil {
			rows.Close()
			return fmt.Errorf("analytics: names: %w", err)
		}
		names[[2]string{kind, id}] = name
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("analytics: names: %w", err)
	}
	for i := range r.Tools {
		r.Tools[i].Name = names[[2]string{"tool", r.Tools[i].Key}]
	}
	for i := range r.Servers {
		r.Servers[i].Name = names[[2]string{"server", r.Servers[i].Key}]
	}
	return nil
}

// approvals fills the approval waits of the period's plans (approved by a person) by
// tool, and the executions waiting longest now.
func (s *Service) approvals(ctx context.Context, p Period, r *Report) error {
	rows, err := s.pool.Query(ctx, `/* analytics.approvals */
		SELECT st->>'tool', count(*),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM e.approved_at - e.created_at)),
			percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM e.approved_at - e.created_at))
		FROM executions e, jsonb_array_elements(e.plan->'steps') st
		WHERE e.approved_at IS NOT NULL AND e.approval IN ('confirm', 'phrase') AND e.created_at >= $1 AND e.created_at < $2
		GROUP BY 1 ORDER BY 2 DESC, 1`, p.From, p.To)
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
