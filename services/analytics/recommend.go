package analytics

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/toolwarden/toolwarden/services/risk"
)

// The recommendations (Report runs their queries side by side):
//   - an enabled tool nobody called for UnusedFor (and enabled at least that long):
//     disable it?
//   - a tool failing more than FailingRate of at least FailingMinCalls calls:
//     investigate;
//   - a tool whose step was LOW by the tool's level (not by the operation it named)
//     and whose execution was rolled back: raise its risk?
//   - a tool whose step was MEDIUM by the tool's own level (its annotations or an
//     override: not the operation or the arguments of one call, which a LOW for the
//     tool would lower for every operation), approved QuickApprovals times or more,
//     every time by the same person within QuickWithin: lower its risk?
//
// The last two hold while the tool exists and its level is still the steps': once it
// was changed the advice was followed (or overruled).

// levelNow is a plan step's tool's level now (risk.SQL over t, a mcp_tools row, and
// sv, its server).
var levelNow = risk.SQL("t.risk_override", "t.annotations", "sv.trusted")

// MaxRecommendations bounds the recommendations of each kind a report makes (the
// queries' LIMIT): a report over thousands of tools listed every one failing.
const MaxRecommendations = 100

// failing recommends a look at the tools of r that fail often, the highest error rates
// first (as MostFailing), at most MaxRecommendations of them; n is how many fail often.
func failing(r *Report) (out []Recommendation, n int) {
	var bad []Row
	for _, t := range r.Tools {
		if t.Calls >= FailingMinCalls && t.ErrorRate > FailingRate {
			bad = append(bad, t)
		}
	}
	slices.SortStableFunc(bad, byErrorRate)
	for _, t := range bad[:min(len(bad), MaxRecommendations)] {
		out = append(out, Recommendation{Kind: "failing", ToolID: t.Key, Tool: t.Name,
			Advice:  "Investigate: it fails often.",
			Because: fmt.Sprintf("%d of its %d calls failed (%.0f%%) in this period.", t.Errors, t.Calls, math.Round(t.ErrorRate*100)),
			Numbers: map[string]any{"calls": t.Calls, "errors": t.Errors, "error_rate": t.ErrorRate}})
	}
	return out, len(bad)
}

func (s *Service) unused(ctx context.Context, now time.Time, r *Report) error {
	rows, err := s.pool.Query(ctx, `/* analytics.unused */
		SELECT t.id::text, sv.name || '__' || t.name, e.since
		FROM mcp_tools t JOIN mcp_servers sv ON sv.id = t.server_id,
			LATERAL (SELECT coalesce((SELECT max(h.created_at) FROM tool_state_history h
				WHERE h.tool_id = t.id AND h.to_status = 'enabled'), t.created_at) AS since) e
		WHERE t.status = 'enabled' AND e.since < $1
		  AND NOT EXISTS (SELECT 1 FROM tool_usage_logs u WHERE u.tool_id = t.id AND u.used_at >= $1
			AND u.duration_ms IS NOT NULL) -- a call the router refused never ran: not a use
		ORDER BY e.since, 2 LIMIT `+strconv.Itoa(MaxRecommendations), now.Add(-UnusedFor))
	if err != nil {
		return fmt.Errorf("analytics: unused tools: %w", err)
	}
	defer rows.Close()
	days := int(UnusedFor.Hours() / 24)
	for rows.Next() {
		var id, name string
		var since time.Time
		if err := rows.Scan(&id, &name, &since); err != nil {
			return fmt.Errorf("analytics: unused tools: %w", err)
		}
		r.Recommendations = append(r.Recommendations, Recommendation{Kind: "unused", ToolID: id, Tool: name,
			Advice:  "Disable it? Nobody uses it.",
			Because: fmt.Sprintf("No call in the last %d days; enabled since %s.", days, since.UTC().Format(time.DateOnly)),
			Numbers: map[string]any{"calls": 0, "days": days, "enabled_since": since.UTC()}})
	}
	return rows.Err()
}

func (s *Service) rolledBackLow(ctx context.Context, p Period, r *Report) error {
	rows, err := s.pool.Query(ctx, `/* analytics.rolled_back_low */
		SELECT st->>'tool_id', st->>'tool', count(DISTINCT e.id)
		FROM executions e, jsonb_array_elements(e.plan->'steps') st
			JOIN mcp_tools t ON t.id::text = st->>'tool_id' JOIN mcp_servers sv ON sv.id = t.server_id
		WHERE e.status IN ('rolled_back', 'rollback_failed') AND st->'risk'->>'level' = 'low'
		  AND st->'risk'->>'source' IS DISTINCT FROM 'operation' AND `+levelNow+` = 'low'
		  AND e.created_at >= $1 AND e.created_at < $2
		GROUP BY 1, 2 ORDER BY 3 DESC, 2 LIMIT `+strconv.Itoa(MaxRecommendations), p.From, p.To)
	if err != nil {
		return fmt.Errorf("analytics: rolled back low-risk tools: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		var n int64
		if err := rows.Scan(&id, &name, &n); err != nil {
			return fmt.Errorf("analytics: rolled back low-risk tools: %w", err)
		}
		times := "once"
		if n > 1 {
			times = fmt.Sprintf("%d times", n)
		}
		r.Recommendations = append(r.Recommendations, Recommendation{Kind: "raise_risk", ToolID: id, Tool: name,
			Advice:  "Raise its risk? A low-risk step of it had to be undone.",
			Because: fmt.Sprintf("Plans with it as a LOW step were rolled back %s in this period; LOW runs without anyone's approval.", times),
			Numbers: map[string]any{"rolled_back_executions": n, "risk": "low"}})
	}
	return rows.Err()
}

// quickMedium finds the tools of the last rule. An approver is told by their user id
// and, once their user is deleted (approved_by set NULL), by the name kept on the
// execution: count(DISTINCT approved_by) skipped the NULLs, and a deleted alice's
// approvals beside bob's read as all given by one person, named alice.
func (s *Service) quickMedium(ctx context.Context, p Period, r *Report) error {
	rows, err := s.pool.Query(ctx, `/* analytics.quick_medium */
		SELECT st->>'tool_id', st->>'tool', count(DISTINCT e.id), min(e.approver_name),
			max(extract(epoch FROM e.approved_at - e.created_at))
		FROM executions e, jsonb_array_elements(e.plan->'steps') st
			JOIN mcp_tools t ON t.id::text = st->>'tool_id' JOIN mcp_servers sv ON sv.id = t.server_id
		WHERE e.approval = 'confirm' AND e.approved_at IS NOT NULL AND st->'risk'->>'level' = 'medium'
		  AND st->'risk'->>'source' IN ('`+risk.SourceAnnotations+`', '`+risk.SourceOverride+`') AND `+levelNow+` = 'medium'
		  AND e.created_at >= $1 AND e.created_at < $2
		GROUP BY 1, 2
		HAVING count(DISTINCT e.id) >= $3
		   AND count(DISTINCT coalesce(e.approved_by::text, 'name:' || e.approver_name)) = 1
		   AND bool_and(e.approved_by IS NOT NULL OR e.approver_name <> '')
		   AND max(extract(epoch FROM e.approved_at - e.created_at)) <= $4
		ORDER BY 3 DESC, 2 LIMIT `+strconv.Itoa(MaxRecommendations), p.From, p.To, QuickApprovals, QuickWithin.Seconds())
	if err != nil {
		return fmt.Errorf("analytics: quickly approved medium tools: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name, approver string
		var n int64
		var slowest float64
		if err := rows.Scan(&id, &name, &n, &approver, &slowest); err != nil {
			return fmt.Errorf("analytics: quickly approved medium tools: %w", err)
		}
		r.Recommendations = append(r.Recommendations, Recommendation{Kind: "lower_risk", ToolID: id, Tool: name,
			Advice: "Lower its risk? Its approvals look like a formality.",
			Because: fmt.Sprintf("All %d approvals of plans with it as a MEDIUM step were given by %s, the slowest after %.1f s.",
				n, approver, slowest),
			Numbers: map[string]any{"approvals": n, "approver": approver, "slowest_seconds": slowest, "risk": "medium"}})
	}
	return rows.Err()
}
