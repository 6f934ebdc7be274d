package executions

import (
	"context"
	"fmt"
)

// WaitingByServer counts, for each of serverIDs, the executions that wait for approval,
// execute or roll back with a step still to run on one of its tools: deleting the
// server fails them ("no longer exists"). Servers with none are left out.
func (s *Service) WaitingByServer(ctx context.Context, serverIDs []string) (map[string]int, error) {
	out := map[string]int{}
	if len(serverIDs) == 0 {
		return out, nil
	}
	// The phase that still runs: a failed execution's run steps left are skipped, so only
	// a rolling back one's rollback steps wait.
	rows, err := s.pool.Query(ctx, `/* executions.WaitingByServer */
		SELECT t.server_id::text, count(DISTINCT e.id)::int
		FROM executions e
		JOIN tool_calls c ON c.execution_id = e.id AND c.status IN ('pending', 'running')
			AND c.phase = CASE WHEN e.status = 'rolling_back' THEN 'rollback' ELSE 'run' END
		JOIN mcp_tools t ON t.id = c.tool_id
		WHERE e.status IN ('awaiting_approval', 'executing', 'rolling_back')
			AND t.server_id = ANY($1::uuid[])
		GROUP BY t.server_id`, serverIDs)
	if err != nil {
		return nil, fmt.Errorf("executions: waiting by server: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("executions: waiting by server: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("executions: waiting by server: %w", err)
	}
	return out, nil
}
