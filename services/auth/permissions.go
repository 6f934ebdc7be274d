package auth

import "slices"

// Role is one of the five roles of docs/security.md (seed 004 §9).
type Role string

// The roles.
const (
	RoleAdmin       Role = "admin"
	RoleToolManager Role = "tool_manager"
	RoleToolUser    Role = "tool_user"
	RoleAuditor     Role = "auditor"
	RoleGuest       Role = "guest"
)

// Roles lists every role, most powerful first.
var Roles = []Role{RoleAdmin, RoleToolManager, RoleToolUser, RoleAuditor, RoleGuest}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Label is the role's human name.
func (r Role) Label() string {
	switch r {
	case RoleAdmin:
		return "Administrator"
	case RoleToolManager:
		return "Tool manager"
	case RoleToolUser:
		return "Tool user"
	case RoleAuditor:
		return "Auditor"
	case RoleGuest:
		return "Guest"
	}
	return string(r)
}

// Permission is something a route or action requires.
type Permission string

// The permissions. Routes name one each; PermPublic needs no sign-in at all.
const (
	PermPublic    Permission = "public"
	PermSignedIn  Permission = "signed_in"       // any signed-in user, whatever the role
	PermDashboard Permission = "dashboard.view"  // the dashboard and system status
	PermOwnTokens Permission = "tokens.own"      // create, list and revoke one's own API tokens
	PermUsers     Permission = "users.manage"    // create users, change roles, disable, reset passwords
	PermSettings  Permission = "settings.manage" // run-time settings (approval expiry, separation of duties)

	PermServerView   Permission = "server.view"
	PermServerCreate Permission = "server.create"
	PermServerEdit   Permission = "server.edit"
	PermServerDelete Permission = "server.delete"
	// PermServerCommand: set what a stdio server runs on the Toolwarden host (its
	// command, args, env and working directory), also in "Test connection" (testing a
	// stored stdio server unchanged needs only server.edit). Whoever
	// holds it can run any program as Toolwarden, so only administrators do.
	PermServerCommand Permission = "server.command"
	// PermServerTrust: mark a server trusted, or not. Trust decides risk (docs/architecture.md, The path of a tool call: a
	// trusted server's annotations are believed), so only administrators hold it.
	PermServerTrust Permission = "server.trust"

	PermToolView      Permission = "tool.view"
	PermToolUse       Permission = "tool.use"
	PermToolConfigure Permission = "tool.configure"
	PermToolEnable    Permission = "tool.enable"
	// PermToolOverride: enable a tool despite critical or error findings or a failed
	// test, with a reason (docs/architecture.md, State machines). Administrators only.
	PermToolOverride Permission = "tool.override"
	// PermToolInspect: read a tool's configuration, its versions and its state history
	// (who changed what, and why). Every role but guest (seed 004 §9: guests view
	// available tools only).
	PermToolInspect Permission = "tool.inspect"

	PermExecutionCreate  Permission = "execution.create"
	PermExecutionApprove Permission = "execution.approve"
	// PermCollaborate: answer the questions user_collaboration asks oneself, and see
	// and revoke the grants one gave (/grants). A person's session only (PersonOnly).
	PermCollaborate Permission = "collaboration.respond"
	// PermExecutionView: see every execution, its plan, steps and live progress (the
	// history, an approver's inbox, an auditor's reading). Every role but guest.
	PermExecutionView Permission = "execution.view"

	// PermTerminalView: the built-in terminals' pages (/terminals): one's own
	// terminals, typing into them; administrators and auditors see every terminal,
	// and only administrators and a terminal's owner type (handlers/terminals.go).
	PermTerminalView Permission = "terminal.view"

	PermLogView     Permission = "log.view" // tool usage logs
	PermAuditView   Permission = "audit.view"
	PermAuditExport Permission = "audit.export"
	// PermMetricsView: read /metrics (a Prometheus scraper's API token, or a session).
	// Administrators and auditors.
	PermMetricsView Permission = "metrics.view"
	// PermReplica: the internal routes one replica calls on another (a terminal's
	// operation run where the terminal is). No role has it: only a request signed as a
	// replica hop passes (internal/replicahop, web's requirePermission).
	PermReplica Permission = "replica"
)

// AllPermissions lists every permission except PermPublic and PermSignedIn.
var AllPermissions = []Permission{
	PermDashboard, PermOwnTokens, PermUsers, PermSettings,
	PermServerView, PermServerCreate, PermServerEdit, PermServerDelete, PermServerCommand, PermServerTrust,
	PermToolView, PermToolInspect, PermToolUse, PermToolConfigure, PermToolEnable, PermToolOverride,
	PermExecutionView, PermExecutionCreate, PermExecutionApprove, PermTerminalView, PermCollaborate,
	PermLogView, PermAuditView, PermAuditExport, PermMetricsView,
}

// rolePermissions is the one permission table (docs/security.md). Seed 004 §9: administrators
// can do everything; tool managers manage servers and tools (but only administrators
// decide which programs stdio servers start); tool users use tools and
// view configurations; auditors view logs and configurations without changing
// anything; guests see which tools exist.
var rolePermissions = map[Role][]Permission{
	RoleAdmin: AllPermissions,
	RoleToolManager: {
		PermDashboard, PermOwnTokens,
		PermServerView, PermServerCreate, PermServerEdit, PermServerDelete,
		PermToolView, PermToolInspect, PermToolUse, PermToolConfigure, PermToolEnable,
		PermExecutionView, PermExecutionCreate, PermExecutionApprove, PermTerminalView, PermCollaborate, PermLogView,
	},
	RoleToolUser: {
		PermDashboard, PermOwnTokens, PermServerView, PermToolView, PermToolInspect, PermToolUse,
		PermExecutionView, PermExecutionCreate, PermExecutionApprove, PermTerminalView, PermCollaborate,
	},
	RoleAuditor: {
		PermDashboard, PermOwnTokens, PermServerView, PermToolView, PermToolInspect, PermLogView,
		PermExecutionView, PermTerminalView, PermAuditView, PermAuditExport, PermMetricsView,
	},
	RoleGuest: {PermDashboard, PermToolView},
}

// Can reports whether the role grants p.
func (r Role) Can(p Permission) bool {
	switch p {
	case PermPublic:
		return true
	case PermSignedIn:
		return r.Valid()
	}
	return slices.Contains(rolePermissions[r], p)
}

// PersonOnly reports whether p is a decision that only a person's browser session
// makes, never an API token, whatever its user's role (docs/security.md: decisions belong to
// people): approving, rejecting and rolling back executions, answering
// user_collaboration.
func PersonOnly(p Permission) bool { return p == PermExecutionApprove || p == PermCollaborate }

// Permissions lists what the role grants.
func (r Role) Permissions() []Permission { return slices.Clone(rolePermissions[r]) }
