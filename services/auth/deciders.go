package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
)

// approverRoles are the roles that may approve executions, for the count of people who
// could decide instead of a requester (see OtherApprovers).
func approverRoles() []string {
	var out []string
	for _, r := range Roles {
		if r.Can(PermExecutionApprove) {
			out = append(out, string(r))
		}
	}
	return out
}

// OtherApprovers counts the people other than userID who could approve executions:
// active users whose role may, and who have signed in at least once. Decisions need a
// browser session, so an account only ever used through API tokens (an agent's), or
// one nobody has used yet, is not someone who could decide instead of a requester.
func (s *Service) OtherApprovers(ctx context.Context, userID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `/* auth.OtherApprovers */
		SELECT count(*) FROM users WHERE disabled_at IS NULL AND last_login_at IS NOT NULL AND role = ANY($1) AND id::text <> $2`,
		approverRoles(), userID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("auth: other approvers: %w", err)
	}
	return n, nil
}

// ErrRequesterGone is a requester who can no longer act: the user was disabled or
// deleted, or the API token they asked with was revoked or expired.
var ErrRequesterGone = errors.New("auth: the requester can no longer act")

// RequesterRole is the role userID acts with now, or an error wrapping
// ErrRequesterGone saying why they cannot act any more. tokenID, when not empty, is
// the API token they asked with, which must still be valid too: a plan outlives the
// request that made it, and must not outlive its requester's access.
func (s *Service) RequesterRole(ctx context.Context, userID, tokenID string) (Role, error) {
	if !uuidtext.Canonical(userID) || tokenID != "" && !uuidtext.Canonical(tokenID) {
		return "", fmt.Errorf("%w: no user or token has that id", ErrRequesterGone)
	}
	var role Role
	var disabled bool
	err := s.pool.QueryRow(ctx, `/* auth.RequesterRole */
		SELECT role, disabled_at IS NOT NULL FROM users WHERE id = $1::uuid`, userID).Scan(&role, &disabled)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("%w: the user no longer exists", ErrRequesterGone)
	case err != nil:
		return "", fmt.Errorf("auth: requester: %w", err)
	case disabled:
		return "", fmt.Errorf("%w: the user is disabled", ErrRequesterGone)
	}
	if tokenID == "" {
		return role, nil
	}
	var valid bool
	err = s.pool.QueryRow(ctx, `/* auth.RequesterRole.token */
		SELECT revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) FROM api_tokens WHERE id = $1::uuid AND user_id = $2::uuid`,
		tokenID, userID).Scan(&valid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("%w: the API token it was asked with no longer exists", ErrRequesterGone)
	case err != nil:
		return "", fmt.Errorf("auth: requester token: %w", err)
	case !valid:
		return "", fmt.Errorf("%w: the API token it was asked with was revoked or expired", ErrRequesterGone)
	}
	return role, nil
}
