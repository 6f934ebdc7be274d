package views

import "time"

// CollaborationPrompt is a user_collaboration question waiting for the person viewing
// the page: shown on every page they have open, and in the approvals inbox.
type CollaborationPrompt struct {
	ID                 string
	Prompt             string
	ConversationID     string
	AuthorizeOperation string
	Target             string
	// OneTime and TTL are what approving grants: one use within TTL, or any number of
	// uses for TTL (0: unknown, said as "for a few minutes").
	OneTime   bool
	TTL       time.Duration
	CreatedAt time.Time
}

// GrantsPage lists active grants.
type GrantsPage struct {
	Layout Layout
	Grants []GrantRow
	// Ended are the grants that ended in the last day, the latest first.
	Ended []GrantRow
	// All: everyone's grants (an administrator), else the viewer's own.
	All bool
}

// GrantRow is one grant, active or ended.
type GrantRow struct {
	ID, ConversationID, Operation, Target, By string
	OneTime                                   bool
	Uses                                      int
	CreatedAt, ExpiresAt                      time.Time
	// Ended says how an ended grant ended ("used", "revoked", "expired"), at EndedAt.
	Ended   string
	EndedAt time.Time
}
