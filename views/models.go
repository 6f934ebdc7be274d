// Package views holds the templ components and the view models they render. Views do
// no I/O: handlers fill a view model and pass it in.
package views

import (
	"fmt"
	"time"
)

// Layout is what every signed-in page shares.
type Layout struct {
	Title string
	User  *CurrentUser // nil on pages outside the shell
	Nav   []NavItem
	Flash *Flash
	Live  Live
	// Perms are the signed-in user's permissions. Live fragments are rendered once for
	// every viewer, so role-specific controls carry data-perm and CSS shows them only
	// when the page's user has that permission (the routes still enforce it).
	Perms []string
	// Collaborations are the questions waiting for the viewer (user_collaboration),
	// shown on every page; more arrive live on the viewer's topic.
	Collaborations []CollaborationPrompt
	// ExpiringTokens are the viewer's API tokens that end within a week: a banner on
	// every page says so.
	ExpiringTokens []ExpiringToken
}

// ExpiringToken is one of the viewer's API tokens about to expire.
type ExpiringToken struct {
	Name      string
	ExpiresAt time.Time
}

// CurrentUser is the signed-in user as the header shows them.
type CurrentUser struct {
	Username  string
	Name      string
	RoleLabel string
}

// NavItem is one entry of the navigation; only areas the user may open are listed.
type NavItem struct {
	Label  string
	Href   string
	Active bool
	// Badge counts what waits in the area (approvals to decide); nil shows none.
	Badge *NavBadge
	// Mine counts what waits for the viewer alone there (the questions agents ask
	// them); nil shows none.
	Mine *NavBadge
}

// NavBadge is a count next to a navigation entry. The element keeps its id while the
// count is zero (hidden), so a live update can swap a new count into it.
type NavBadge struct {
	ID    string // element id, the target of live updates
	Count int
	Label string // what the count means, for screen readers ("3 plans await approval")
}

// Flash is a one-off message shown at the top of a page.
type Flash struct {
	Kind    string // "success", "error", "info"
	Message string
}

// Live says what the page subscribes to over the websocket.
type Live struct {
	Topics []string
	// LastEventID is the newest event the page was rendered with; the socket replays
	// anything after it.
	LastEventID int64
}

// FormErrors maps a field name to its message.
type FormErrors map[string]string

// Secret is a value shown exactly once (a new token, a generated password).
type Secret struct {
	Title string
	Value string
	Note  string
}

// ago formats a time relative to now, for tables.
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 0:
		return "in " + short(-d)
	case d < 10*time.Second:
		return "just now"
	}
	return short(d) + " ago"
}

func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	// To the nearest day: a token made to last 7 days reads "in 7d", not "in 6d".
	return fmt.Sprintf("%dd", int((d+12*time.Hour)/(24*time.Hour)))
}

func agoPtr(t *time.Time, never string) string {
	if t == nil {
		return never
	}
	return ago(*t)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func i64(n int64) string { return fmt.Sprint(n) }
