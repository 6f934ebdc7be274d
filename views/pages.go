package views

import "time"

// LoginPage is the sign-in form.
type LoginPage struct {
	Username string
	Next     string
	Error    string
	Notice   string
}

// ErrorPage describes a failed request.
type ErrorPage struct {
	Layout
	Status    int
	Title     string
	Message   string
	RequestID string
}

// DashboardPage is the home page.
type DashboardPage struct {
	Layout
	Status       SystemStatus
	SignedIn     []SignedInUser
	ShowActivity bool
	Activity     []ActivityRow
}

// SystemStatus is the dashboard's health and size summary.
type SystemStatus struct {
	DatabaseOK       bool
	DatabaseDetail   string
	MigrationOK      bool
	Migration        string
	Version          string
	GoVersion        string
	StartedAt        time.Time
	Uptime           string
	Users            int
	ActiveUsers      int
	Tokens           int
	AuditEntries     int64
	LiveClients      int
	Servers          int // registered MCP servers
	ServersConnected int
	// The counts that could not be read: shown as "—", not as a 0 that looks real.
	UsersUnknown, TokensUnknown, AuditUnknown, ServersUnknown bool
	// Replica is this process's name; Replicas every live serve process on the database.
	Replica  string
	Replicas []ReplicaRow
	// Internals shows the versions of Go and PostgreSQL and the replicas' names and
	// hosts (those who run Toolwarden or audit it); ShowServers the servers' counts.
	Internals, ShowServers bool
}

// ReplicaRow is one serve process sharing the database.
type ReplicaRow struct {
	Name, Version, Host string
	StartedAt, SeenAt   time.Time
	Self                bool // the replica that served this page
	Leaving             bool // shutting down: finishing what it runs, reached no more
}

// SignedInUser is one row of "Signed in now".
type SignedInUser struct {
	Username  string
	Name      string
	RoleLabel string
	Sessions  int
	LastSeen  time.Time
}

// ActivityRow is one audit entry in "Recent activity".
// ActivityKeep is how many rows "Recent activity" shows: the page's first rows, and
// the most the list keeps as live ones arrive (app.js trims it to its data-keep).
const ActivityKeep = 15

type ActivityRow struct {
	ID     int64
	At     time.Time
	Actor  string
	Action string
	Target string
	Failed bool
}

// UsersPage is the administrator's user management page.
type UsersPage struct {
	Layout
	Users    []UserRow
	Roles    []RoleOption
	Form     NewUserForm
	Revealed *Secret
	SelfID   string
}

// UserRow is one user in the table.
type UserRow struct {
	ID        string
	Username  string
	Name      string
	Role      string
	RoleLabel string
	Disabled  bool
	LastLogin *time.Time
	CreatedAt time.Time
}

// RoleOption is a role in a select.
type RoleOption struct {
	Value string
	Label string
}

// NewUserForm is the create-user form's values and errors.
type NewUserForm struct {
	Username    string
	DisplayName string
	Role        string
	Errors      FormErrors
}

// TokensPage lists the user's API tokens.
type TokensPage struct {
	Layout
	Tokens   []TokenRow
	Form     NewTokenForm
	Revealed *Secret
	Connect  ConnectPanel
	// DefaultTTL says how long a token lives when no expiry is given ("90 days", "no expiry").
	DefaultTTL string
}

// TokenRow is one token in the table.
type TokenRow struct {
	ID         string
	Name       string
	Prefix     string
	Status     string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	// ExpiresSoon: active, and its owner is warned of its end (the last week, or the
	// last quarter of a shorter life).
	ExpiresSoon bool
}

// NewTokenForm is the create-token form's values and errors.
type NewTokenForm struct {
	Name          string
	ExpiresInDays string
	Errors        FormErrors
}
