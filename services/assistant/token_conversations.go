package assistant

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// The readers below take the caller, not a user id: an API token's conversations are
// stored under ids of its own (storedID), and a page asked for by a token must read
// those, never the person's.

// LatestConversationOf is the id of the caller's most recent conversation ("" if none):
// the person's own, or for an API token the token's, as the token names it.
func (s *Service) LatestConversationOf(ctx context.Context, p *auth.Principal) (string, error) {
	if p.Kind != audit.ActorToken {
		return s.LatestConversation(ctx, p.User.ID)
	}
	prefix := storedID(p, "")
	var id string
	err := s.pool.QueryRow(ctx, `/* assistant.LatestConversationOf */
		SELECT id FROM assistant_conversations WHERE user_id = $1 AND left(id, length($2)) = $2
		ORDER BY updated_at DESC LIMIT 1`, p.User.ID, prefix).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return strings.TrimPrefix(id, prefix), err
}

// HistoryOf is History of the caller's conversation convID.
func (s *Service) HistoryOf(ctx context.Context, p *auth.Principal, convID string, limit int) ([]Message, error) {
	return s.History(ctx, p.User.ID, storedID(p, convID), limit)
}

// TurnOf is Turn of the caller's conversation convID.
func (s *Service) TurnOf(ctx context.Context, p *auth.Principal, convID string) (int64, error) {
	return s.Turn(ctx, p.User.ID, storedID(p, convID))
}

// ShownOf is what a window showing the caller's conversation convID shows: its last
// limit messages, and the turn the window sends back as seen. The turn is read first: a
// turn another window commits in between is then among the messages but not the turn,
// and a yes typed here is refused as answering what this window may not show (safe);
// read the other way round, the turn would be newer than the messages shown, and a yes
// would answer a question this window never showed.
func (s *Service) ShownOf(ctx context.Context, p *auth.Principal, convID string, limit int) ([]Message, int64, error) {
	turn, err := s.TurnOf(ctx, p, convID)
	if err != nil {
		return nil, 0, err
	}
	if s.shownRead != nil {
		s.shownRead()
	}
	ms, err := s.HistoryOf(ctx, p, convID, limit)
	if err != nil {
		return nil, 0, err
	}
	return ms, turn, nil
}
