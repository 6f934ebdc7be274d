package views

import (
	"net/url"
	"time"
)

// AuditPage is the audit browser (/audit): filters in the URL, one keyset page of
// entries newest first, the person's saved views, the chain's status and exports.
type AuditPage struct {
	Layout
	Filter  AuditFilter
	Groups  []Option // the action filter's groups
	Results []Option
	// ActorKinds are the actor kind filter's choices (a person, Toolwarden, a name typed
	// at a failed sign-in…).
	ActorKinds []Option
	// Errors are bad filters by field; with any, nothing is listed.
	Errors FormErrors
	// Notice explains a fallback (an outdated page link: the first page is shown).
	Notice string
	List   AuditResults
	Views  []AuditSavedView
	// Query is the filter as a query string (for saving it as a view).
	Query       string
	CanExport   bool
	ExportCSV   string
	ExportJSONL string
	Chain       AuditChain
}

// AuditFilter is what the filter form shows, as it was given.
type AuditFilter struct {
	Actor, ActorKind, Action, TargetType, TargetID, Result, RequestID, Q, From, To string
}

// AuditResults is the part of the page that lists entries; the "N new entries"
// banner reloads it.
type AuditResults struct {
	Rows      []AuditRow
	HasFilter bool
	// TopID is the largest id listed on the first page; NewURL (first page only)
	// counts what is newer, ReloadURL loads the first page again.
	TopID     int64
	NewURL    string
	ReloadURL string
	NextURL   string
	FirstURL  string
}

// AuditRow is one entry in the list, and the head of its detail page.
type AuditRow struct {
	ID  int64
	URL string
	At  time.Time
	// Actor is who acted, as shown: the name recorded, "Toolwarden" for the system, the
	// kind when there is no name; ActorName is the name the actor filter matches ("":
	// none, no link to filter by).
	Actor     string
	ActorName string
	ActorKind string
	// ActorURL lists every entry under this actor's name and kind ("" for none): a user
	// named "system" and Toolwarden are not mixed.
	ActorURL   string
	Action     string
	Group      string
	TargetType string
	TargetID   string
	TargetName string
	// TargetURL is the target's own page, where there is one.
	TargetURL string
	Result    string
	RequestID string
}

// AuditSavedView is one of the person's saved views.
type AuditSavedView struct {
	ID, Name, URL string
	Current       bool
}

// AuditChain is the chain's status: the last check (or the one running), and whether
// the viewer may start one.
type AuditChain struct {
	Never     bool // never checked from the page or the API
	Running   bool
	Checked   int64
	Total     int64
	OK        bool
	Through   int64
	At        time.Time
	By        string
	BadID     int64
	Reason    string
	Err       string
	CanVerify bool
	// Checkpoint says which signed checkpoint the chain had to reach, or that there was
	// none (empty: not known, the check ran in another process).
	Checkpoint   string
	CheckpointID int64 // the entry it signed; 0: there was none
}

// AuditNew is the "N new entries" banner.
type AuditNew struct {
	Count     int64
	More      bool // at least Count
	NewURL    string
	ReloadURL string
}

// AuditEntryPage is one entry (/audit/:id): who, what, the target, the changes its
// payload records, the request it belongs to and its place in the chain.
type AuditEntryPage struct {
	Layout
	Row        AuditRow
	ActorID    string
	IP         string
	TokenName  string
	UserAgent  string
	Client     string
	RequestURL string
	// Display is what a tool call did in a short line, as its tool says it ("Creating
	// file notes.txt", seed 000 §6); "" for other entries.
	Display string
	// Payload is the entry's payload, indented.
	Payload string
	// Changes are field changes the payload records (from/to), Diff the line diff of its
	// before and after values.
	Changes  []AuditChange
	Diff     []ToolDiffLine
	PrevHash string
	Hash     string
	PrevURL  string
	NextURL  string
}

// AuditChange is one field's change.
type AuditChange struct {
	Field, Before, After string
}

func queryEscape(s string) string { return url.QueryEscape(s) }
