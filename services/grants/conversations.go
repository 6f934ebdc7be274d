package grants

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Conversations: the first person to call a built-in tool in a conversation owns it
// (builtin.Conversations). A conversation id is the client's choice, so without an
// owner anyone could name another person's conversation and reach its workspace,
// grants and questions.

// Claim makes userID the owner of conversation (workspace directory dir) when nobody
// owns it yet, and returns its owner: "" when the owner was removed, so that nobody
// inherits what they left. A conversation claimed with another directory (ids with
// capitals once kept them in their directory's name) moves to dir when no other
// conversation has it, so that dir's owner is the conversation's.
func (s *Service) Claim(ctx context.Context, conversation, dir, userID, userName string) (string, error) {
	for range 2 {
		var owner *string
		err := s.pool.QueryRow(ctx, `/* grants.Claim */ WITH ins AS (
				INSERT INTO conversations (id, dir, user_id, user_name, created_at) VALUES ($1, $2, $3, $4, `+dbNow(5)+`)
				ON CONFLICT DO NOTHING RETURNING user_id),
			moved AS (
				UPDATE conversations SET dir = $2 WHERE id = $1 AND dir <> $2
					AND NOT EXISTS (SELECT 1 FROM conversations WHERE dir = $2)
				RETURNING user_id)
			SELECT user_id::text FROM ins UNION ALL SELECT user_id::text FROM moved
			UNION ALL SELECT user_id::text FROM conversations WHERE id = $1 AND dir = $2 LIMIT 1`,
			conversation, dir, userID, userName, s.at()).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			// Claimed by a concurrent call, or dir taken by another id: look again.
			continue
		}
		if err != nil {
			return "", fmt.Errorf("grants: claim conversation %q: %w", conversation, err)
		}
		if owner == nil {
			return "", nil
		}
		return *owner, nil
	}
	return "", fmt.Errorf("grants: conversation %q: its workspace directory %s belongs to another conversation", conversation, dir)
}

// OwnerOf is the owner of conversation: claimed is false when nobody has called in it
// yet, and the owner is "" when they were removed. It claims nothing.
func (s *Service) OwnerOf(ctx context.Context, conversation string) (owner string, claimed bool, err error) {
	var o *string
	err = s.pool.QueryRow(ctx, `/* grants.OwnerOf */ SELECT user_id::text FROM conversations WHERE id = $1`, conversation).Scan(&o)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("grants: owner of conversation %q: %w", conversation, err)
	}
	if o == nil {
		return "", true, nil
	}
	return *o, true, nil
}

// OwnerOfDir is the owner of the conversation whose workspace is dir; known is false
// for a directory no conversation claimed, and the owner "" when they were removed.
func (s *Service) OwnerOfDir(ctx context.Context, dir string) (owner string, known bool, err error) {
	var o *string
	err = s.pool.QueryRow(ctx, `/* grants.OwnerOfDir */ SELECT user_id::text FROM conversations WHERE dir = $1`, dir).Scan(&o)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("grants: owner of workspace %s: %w", dir, err)
	}
	if o == nil {
		return "", true, nil
	}
	return *o, true, nil
}

// DirsOf is the workspace directories of userID's conversations.
func (s *Service) DirsOf(ctx context.Context, userID string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `/* grants.DirsOf */ SELECT dir FROM conversations WHERE user_id = $1`, userID)
	if err != nil {
		return nil, fmt.Errorf("grants: workspaces of %s: %w", userID, err)
	}
	dirs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("grants: workspaces of %s: %w", userID, err)
	}
	m := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		m[d] = true
	}
	return m, nil
}
