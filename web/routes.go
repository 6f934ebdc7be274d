package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Route is one entry of the route table: every route names the permission it needs.
type Route struct {
	Method  string
	Path    string
	Perm    auth.Permission
	Handler echo.HandlerFunc
}

// routes is the one route table (docs/architecture.md; docs/security.md).
func (s *Server) routes() []Route {
	d := s.deps
	shell := s.shell
	session := handlers.SessionHandler{Shell: shell, Auth: d.Auth}
	dash := handlers.DashboardHandler{Shell: shell, Auth: d.Auth, AuditLog: d.AuditLog, Registry: d.Registry, System: d.System, Replicas: d.Replicas,
		StartedAt: d.StartedAt, LiveClients: d.LiveClients}
	users := handlers.UsersHandler{Shell: shell, Auth: d.Auth}
	tokens := handlers.TokensHandler{Shell: shell, Auth: d.Auth, Proxies: d.TrustedProxies}
	health := handlers.HealthHandler{Logger: d.Logger, System: d.System, Components: d.Health}
	servers := handlers.ServersHandler{Shell: shell, Registry: d.Registry, MCP: d.MCP, Router: d.Router}
	importExport := handlers.ImportExportHandler{Shell: shell, Registry: d.Registry, ConfigCode: d.ConfigCode}
	tools := handlers.ToolsHandler{Shell: shell, Tools: d.Tools, Router: d.Router}
	tool := handlers.ToolPageHandler{Shell: shell, Auth: d.Auth, Tools: d.Tools, Registry: d.Registry, Usage: d.Usage, MCP: d.MCP}
	stats := handlers.AnalyticsHandler{Shell: shell, Analytics: d.Analytics}
	chat := handlers.AssistantHandler{Shell: shell, Assistant: d.Assistant}
	panel := handlers.NewTestPanel(tool, d.Router, d.Runs, d.Decide)
	categories := handlers.CategoriesHandler{Shell: shell, Tools: d.Tools}
	execs := handlers.ExecutionsHandler{Shell: shell, Tools: d.Tools, Decide: d.Decide}
	settings := handlers.SettingsHandler{Shell: shell}
	terminals := handlers.TerminalsHandler{Shell: shell, Terminals: d.Terminals, Router: d.Router}
	collab := handlers.CollaborationsHandler{Shell: shell, Grants: d.Grants}
	auditLog := handlers.AuditHandler{Shell: shell, Log: d.AuditLog}
	account := handlers.AccountHandler{Shell: shell, Auth: d.Auth}
	return []Route{
		// Probes and metrics.
		{http.MethodGet, "/healthz", auth.PermPublic, health.Healthz},
		{http.MethodGet, "/readyz", auth.PermPublic, health.Readyz},
		{http.MethodGet, "/favicon.ico", auth.PermPublic, handlers.Favicon},
		{http.MethodGet, "/metrics", auth.PermMetricsView, s.metrics.handler}, // a scraper's API token (or a session)

		// Sign-in.
		{http.MethodGet, "/login", auth.PermPublic, session.LoginForm},
		{http.MethodPost, "/login", auth.PermPublic, session.Login},
		{http.MethodPost, "/logout", auth.PermSignedIn, session.Logout},

		// One's own account: a person's session only (the service refuses API tokens).
		{http.MethodGet, "/account/password", auth.PermSignedIn, account.PasswordForm},
		{http.MethodPost, "/account/password", auth.PermSignedIn, account.ChangePassword},
		{http.MethodPost, "/api/v1/me/password", auth.PermSignedIn, account.APIChangePassword},

		// Pages.
		{http.MethodGet, "/", auth.PermDashboard, dash.Show},
		{http.MethodGet, "/users", auth.PermUsers, users.List},
		{http.MethodPost, "/users", auth.PermUsers, users.Create},
		{http.MethodPost, "/users/:id/role", auth.PermUsers, users.SetRole},
		{http.MethodPost, "/users/:id/disable", auth.PermUsers, users.Disable},
		{http.MethodPost, "/users/:id/enable", auth.PermUsers, users.Enable},
		{http.MethodPost, "/users/:id/password", auth.PermUsers, users.ResetPassword},
		{http.MethodGet, "/tokens", auth.PermOwnTokens, tokens.List},
		{http.MethodPost, "/tokens", auth.PermOwnTokens, tokens.Create},
		{http.MethodPost, "/tokens/:id/revoke", auth.PermOwnTokens, tokens.Revoke},
		{http.MethodGet, "/servers", auth.PermServerView, servers.List},
		{http.MethodPost, "/servers", auth.PermServerCreate, servers.Create},
		{http.MethodGet, "/servers/new", auth.PermServerCreate, servers.New},
		{http.MethodGet, "/servers/export", auth.PermServerView, importExport.Export},
		{http.MethodGet, "/servers/import", auth.PermServerCreate, importExport.ImportForm},
		{http.MethodPost, "/servers/import", auth.PermServerCreate, importExport.ImportPreview},
		{http.MethodPost, "/servers/import/apply", auth.PermServerCreate, importExport.ImportApply},
		{http.MethodPost, "/servers/test", auth.PermServerCreate, servers.Test},
		{http.MethodGet, "/servers/test/runs/:run", auth.PermServerCreate, s.forwardRun(servers.TestProgress)},
		{http.MethodPost, "/servers/test/runs/:run/cancel", auth.PermServerCreate, s.forwardRun(servers.TestCancel)},
		{http.MethodGet, "/servers/:id", auth.PermServerView, servers.Show},
		{http.MethodPost, "/servers/:id", auth.PermServerEdit, servers.Update},
		{http.MethodGet, "/servers/:id/edit", auth.PermServerEdit, servers.Edit},
		{http.MethodPost, "/servers/:id/test", auth.PermServerEdit, servers.Test},
		{http.MethodPost, "/servers/:id/enable", auth.PermServerEdit, servers.SetEnabled(true)},
		{http.MethodPost, "/servers/:id/disable", auth.PermServerEdit, servers.SetEnabled(false)},
		{http.MethodPost, "/servers/:id/reconnect", auth.PermServerEdit, servers.Reconnect},
		{http.MethodPost, "/servers/:id/discover", auth.PermServerEdit, servers.Discover},
		{http.MethodPost, "/servers/:id/delete", auth.PermServerDelete, servers.Delete},

		{http.MethodGet, "/tools", auth.PermToolView, tools.List},
		{http.MethodGet, "/tools/categories", auth.PermToolView, categories.List},
		{http.MethodPost, "/tools/categories", auth.PermToolConfigure, categories.Save},
		{http.MethodPost, "/tools/categories/:id", auth.PermToolConfigure, categories.Save},
		{http.MethodPost, "/tools/categories/:id/delete", auth.PermToolConfigure, categories.Delete},
		{http.MethodPost, "/tools/bulk", auth.PermToolView, tools.Bulk}, // each action checks its own permission
		{http.MethodPost, "/tools/:id/enable", auth.PermToolEnable, tools.SetEnabled(true)},
		{http.MethodPost, "/tools/:id/disable", auth.PermToolEnable, tools.SetEnabled(false)},
		// Tool detail pages.
		{http.MethodGet, "/tools/:id", auth.PermToolView, tool.Show},
		{http.MethodPost, "/tools/:id/configure", auth.PermToolConfigure, tool.Configure},
		{http.MethodPost, "/tools/:id/reset", auth.PermToolConfigure, tool.Reset},
		{http.MethodPost, "/tools/:id/validate", auth.PermToolConfigure, tool.Validate},
		// Who may call the tool: reading the per-user rules is tool.inspect; changing one
		// changes what that user may do, as a role change does: users.manage.
		{http.MethodGet, "/tools/:id/access", auth.PermToolInspect, tool.Access},
		{http.MethodPost, "/tools/:id/access", auth.PermUsers, tool.SetAccess},
		// How a completed step of the tool is undone when an execution fails.
		{http.MethodGet, "/tools/:id/compensation", auth.PermToolInspect, tool.Compensation},
		{http.MethodPost, "/tools/:id/compensation", auth.PermToolConfigure, tool.SetCompensation},
		// The test panel; the router decides who may run what.
		{http.MethodGet, "/tools/:id/test", auth.PermToolView, panel.TestPage},
		{http.MethodPost, "/tools/:id/test", auth.PermToolView, panel.TestPost},
		{http.MethodPost, "/tools/:id/test/risk", auth.PermToolView, panel.TestRisk},
		{http.MethodGet, "/tools/:id/test/runs/:call", auth.PermToolView, s.forwardRun(panel.TestRun)},
		{http.MethodPost, "/tools/:id/test/runs/:call/cancel", auth.PermToolView, s.forwardRun(panel.TestCancel)},
		{http.MethodPost, "/tools/:id/test/cases/run", auth.PermToolView, panel.TestCasesRun},
		{http.MethodPost, "/tools/:id/test/cases/:case/run", auth.PermToolView, panel.TestCaseRun},
		{http.MethodPost, "/tools/:id/test/cases/:case/delete", auth.PermToolConfigure, panel.TestCaseDelete},

		// Execution pages (handlers/executions.go).
		{http.MethodGet, "/executions", auth.PermExecutionView, execs.History},
		// What calls and approvals add up to, and what the numbers suggest.
		{http.MethodGet, "/analytics", auth.PermLogView, stats.Page},
		// The assistant: every act it takes checks its own permission (services/assistant).
		{http.MethodGet, "/assistant", auth.PermSignedIn, chat.Page},
		{http.MethodGet, "/assistant/panel", auth.PermSignedIn, chat.Panel},
		{http.MethodPost, "/assistant/messages", auth.PermSignedIn, chat.Send},
		{http.MethodGet, "/approvals", auth.PermExecutionApprove, execs.ApprovalsInbox},
		{http.MethodGet, "/settings/executions", auth.PermSettings, settings.ExecutionSettings},
		{http.MethodPost, "/settings/executions", auth.PermSettings, settings.SaveExecutionSettings},
		{http.MethodGet, "/executions/new", auth.PermExecutionCreate, execs.New},
		{http.MethodPost, "/executions/new", auth.PermExecutionCreate, execs.Create},
		{http.MethodGet, "/executions/:id", auth.PermExecutionView, execs.Show},
		{http.MethodGet, "/executions/:id/results", auth.PermExecutionView, execs.Results},
		{http.MethodPost, "/executions/:id/confirm", auth.PermExecutionApprove, execs.ConfirmForm},
		{http.MethodPost, "/executions/:id/reject", auth.PermExecutionApprove, execs.RejectForm},
		// Deciding (execution.approve) is for a person's session only (auth.PersonOnly);
		// the service checks requester-or-approver for cancel, and rolling back is a
		// decision (package decide).
		{http.MethodPost, "/executions/:id/cancel", auth.PermExecutionView, execs.CancelForm},
		{http.MethodPost, "/executions/:id/rollback", auth.PermExecutionApprove, execs.RollbackForm},

		// user_collaboration's questions and the grants their answers gave: answering
		// and revoking are a person's (auth.PersonOnly); the service checks the
		// question is one's own, and a grant one's own unless one is an administrator.
		{http.MethodPost, "/collaborations/:id/respond", auth.PermCollaborate, collab.RespondForm},
		{http.MethodGet, "/grants", auth.PermCollaborate, collab.GrantsPage},
		{http.MethodPost, "/grants/:id/revoke", auth.PermCollaborate, collab.Revoke},

		// The audit browser (handlers/audit.go): auditors and administrators. Checking
		// the chain and saving views change nothing of the log.
		{http.MethodGet, "/audit", auth.PermAuditView, auditLog.List},
		{http.MethodGet, "/audit/new", auth.PermAuditView, auditLog.New},
		{http.MethodGet, "/audit/verify", auth.PermAuditView, auditLog.VerifyStatus},
		{http.MethodPost, "/audit/verify", auth.PermAuditView, auditLog.Verify},
		{http.MethodPost, "/audit/views", auth.PermAuditView, auditLog.SaveView},
		{http.MethodPost, "/audit/views/:id/delete", auth.PermAuditView, auditLog.DeleteView},
		{http.MethodGet, "/audit/:id", auth.PermAuditView, auditLog.Show},

		// Live updates.
		{http.MethodGet, "/ws", auth.PermSignedIn, s.hub.serve},

		// The built-in terminals (handlers/terminals.go, web/terminal_ws.go).
		{http.MethodGet, "/terminals", auth.PermTerminalView, terminals.List},
		// A terminal another replica runs is served there (web/terminal_forward.go).
		{http.MethodGet, "/terminals/:id", auth.PermTerminalView, s.forwardTerminal(terminals.Show)},
		{http.MethodGet, "/terminals/:id/ws", auth.PermTerminalView, s.forwardTerminal(s.hub.terminalSocket(d.Terminals))},
		// An administrator ends someone's terminal (cutting off what they left running
		// without disabling the account), on the replica that runs it.
		{http.MethodPost, "/terminals/:id/end", auth.PermUsers, s.forwardTerminal(terminals.End)},
		// Replicas only: a terminal_operations operation on a session this replica runs,
		// let through by another replica's router (a signed hop, internal/replicahop).
		{http.MethodPost, "/internal/v1/terminals/:id/op", auth.PermReplica, s.terminalOp},
		// Replicas only: a test run held here, followed by a page's socket on another
		// replica (web/run_forward.go).
		{http.MethodGet, "/internal/v1/testruns/:call", auth.PermReplica, s.runOwner},
		{http.MethodGet, "/internal/v1/testruns/:call/watch", auth.PermReplica, s.runWatch},
		{http.MethodGet, "/internal/v1/testruns/:call/parts", auth.PermReplica, s.runParts},

		// Toolwarden as an MCP server (services/gateway), for API tokens only
		// (BearerOnly); the router decides who may call which tool, as for
		// /api/v1/tools/call. POST carries requests; GET is a session's stream of
		// server messages; DELETE ends a session.
		{http.MethodPost, MCPPath, auth.PermSignedIn, s.mcp},
		{http.MethodGet, MCPPath, auth.PermSignedIn, s.mcp},
		{http.MethodDelete, MCPPath, auth.PermSignedIn, s.mcp},
		// The legacy SSE transport, for clients that predate /mcp: GET opens a session
		// and its stream, whose first event names the session's endpoint under
		// /messages/; POSTs there carry the client's messages (with the token that
		// opened the session).
		{http.MethodGet, SSEPath, auth.PermSignedIn, s.sse},
		{http.MethodPost, MessagesPath, auth.PermSignedIn, s.sse},

		// JSON API.
		{http.MethodGet, "/api/v1/users", auth.PermUsers, users.APIList},
		{http.MethodPost, "/api/v1/users", auth.PermUsers, users.APICreate},
		{http.MethodGet, "/api/v1/users/:id", auth.PermUsers, users.APIGet},
		{http.MethodPatch, "/api/v1/users/:id", auth.PermUsers, users.APIUpdate},
		{http.MethodPost, "/api/v1/users/:id/password", auth.PermUsers, users.APIResetPassword},
		{http.MethodGet, "/api/v1/tokens", auth.PermOwnTokens, tokens.APIList},
		{http.MethodPost, "/api/v1/tokens", auth.PermOwnTokens, tokens.APICreate},
		{http.MethodDelete, "/api/v1/tokens/:id", auth.PermOwnTokens, tokens.APIRevoke},
		{http.MethodGet, "/api/v1/servers", auth.PermServerView, servers.APIList},
		{http.MethodPost, "/api/v1/servers", auth.PermServerCreate, servers.APICreate},
		{http.MethodPost, "/api/v1/servers/test", auth.PermServerCreate, servers.APITest},
		{http.MethodGet, "/api/v1/servers/export", auth.PermServerView, importExport.APIExport},
		{http.MethodPost, "/api/v1/servers/import", auth.PermServerCreate, importExport.APIImport},
		// The whole configuration as code (services/configcode): reading it is reading
		// configurations; importing it sets users' permissions and run-time settings.
		{http.MethodGet, "/api/v1/export", auth.PermToolInspect, importExport.APIExportAll},
		{http.MethodPost, "/api/v1/import", auth.PermSettings, importExport.APIImportAll},
		{http.MethodGet, "/api/v1/servers/:id", auth.PermServerView, servers.APIGet},
		{http.MethodPatch, "/api/v1/servers/:id", auth.PermServerEdit, servers.APIUpdate},
		{http.MethodDelete, "/api/v1/servers/:id", auth.PermServerDelete, servers.APIDelete},
		{http.MethodPost, "/api/v1/servers/:id/test", auth.PermServerEdit, servers.APITest},
		{http.MethodPost, "/api/v1/servers/:id/enable", auth.PermServerEdit, servers.APISetEnabled(true)},
		{http.MethodPost, "/api/v1/servers/:id/disable", auth.PermServerEdit, servers.APISetEnabled(false)},
		{http.MethodPost, "/api/v1/servers/:id/reconnect", auth.PermServerEdit, servers.APIReconnect},
		{http.MethodPost, "/api/v1/servers/:id/discover", auth.PermServerEdit, servers.APIDiscover},
		{http.MethodGet, "/api/v1/servers/:id/tools", auth.PermServerView, servers.APITools},
		{http.MethodGet, "/api/v1/servers/:id/health", auth.PermServerView, servers.APIHealth},
		{http.MethodGet, "/api/v1/tools", auth.PermToolView, tools.APIList},
		{http.MethodGet, "/api/v1/categories", auth.PermToolView, categories.APIList},
		{http.MethodPost, "/api/v1/categories", auth.PermToolConfigure, categories.APISave},
		{http.MethodPatch, "/api/v1/categories/:id", auth.PermToolConfigure, categories.APISave},
		{http.MethodDelete, "/api/v1/categories/:id", auth.PermToolConfigure, categories.APIDelete},
		{http.MethodPost, "/api/v1/tools/bulk", auth.PermToolView, tools.APIBulk}, // each action checks its own permission
		// The router decides who may call which tool (role or a per-user permission).
		{http.MethodPost, "/api/v1/tools/call", auth.PermSignedIn, tools.APICall},
		{http.MethodGet, "/api/v1/tools/:id", auth.PermToolView, tools.APIGet},
		{http.MethodPatch, "/api/v1/tools/:id", auth.PermToolConfigure, tools.APIUpdate},
		{http.MethodPost, "/api/v1/tools/:id/enable", auth.PermToolEnable, tools.APISetEnabled(true)},
		{http.MethodPost, "/api/v1/tools/:id/disable", auth.PermToolEnable, tools.APISetEnabled(false)},
		{http.MethodGet, "/api/v1/tools/:id/permissions", auth.PermToolInspect, tool.APIPermissions},
		{http.MethodPut, "/api/v1/tools/:id/permissions", auth.PermUsers, tool.APISetPermission},
		{http.MethodGet, "/api/v1/tools/:id/compensation", auth.PermToolInspect, execs.APICompensation},
		{http.MethodPut, "/api/v1/tools/:id/compensation", auth.PermToolConfigure, execs.APISetCompensation},

		// Executions (seed 003's Safe Action flow). Who may decide what is the service's
		// to say (package decide: a person, never a token; separation of duties), so
		// cancel needs only a view of executions here; a rollback is a decision.
		{http.MethodGet, "/api/v1/analytics", auth.PermLogView, stats.API},
		{http.MethodPost, "/api/v1/assistant/messages", auth.PermSignedIn, chat.APIMessage},
		{http.MethodGet, "/api/v1/executions", auth.PermExecutionView, execs.APIList},
		{http.MethodPost, "/api/v1/executions", auth.PermExecutionCreate, execs.APICreate},
		{http.MethodGet, "/api/v1/executions/settings", auth.PermExecutionView, execs.APISettings},
		{http.MethodPut, "/api/v1/executions/settings", auth.PermSettings, execs.APISetSettings},
		{http.MethodGet, "/api/v1/executions/:id", auth.PermExecutionView, execs.APIGet},
		{http.MethodPost, "/api/v1/executions/:id/confirm", auth.PermExecutionApprove, execs.APIConfirm},
		{http.MethodPost, "/api/v1/executions/:id/reject", auth.PermExecutionApprove, execs.APIReject},
		{http.MethodPost, "/api/v1/executions/:id/cancel", auth.PermExecutionView, execs.APICancel},
		{http.MethodGet, "/api/v1/executions/:id/rollback", auth.PermExecutionView, execs.APIRollbackPlan},
		{http.MethodPost, "/api/v1/executions/:id/rollback", auth.PermExecutionApprove, execs.APIRollback},
		{http.MethodGet, "/api/v1/approvals", auth.PermExecutionView, execs.APIApprovals},
		// The questions user_collaboration asks the caller; answering is a person's.
		{http.MethodGet, "/api/v1/collaborations", auth.PermToolUse, collab.APIList},
		{http.MethodPost, "/api/v1/collaborations/:id/respond", auth.PermCollaborate, collab.APIRespond},
		// The audit log: the same filters as /audit; exports are audited.
		{http.MethodGet, "/api/v1/audit", auth.PermAuditView, auditLog.APIList},
		{http.MethodGet, "/api/v1/audit/export", auth.PermAuditExport, auditLog.APIExport},
		{http.MethodGet, "/api/v1/audit/verify", auth.PermAuditView, auditLog.APIVerify},
		{http.MethodPost, "/api/v1/audit/verify", auth.PermAuditView, auditLog.APIVerify},
		{http.MethodGet, "/api/v1/audit/:id", auth.PermAuditView, auditLog.APIGet},
	}
}

// Routes returns the route table (for tests that walk it).
func (s *Server) Routes() []Route { return s.table }
