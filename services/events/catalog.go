package events

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kind names an event kind and, through P, the payload it carries: producers publish a
// P (Publish, Draft) and readers decode one (Decode), so the two cannot drift apart.
// Kinds are constants; the catalogue below lists every one.
type Kind[P any] string

// String is the kind as stored in the events table.
func (k Kind[P]) String() string { return string(k) }

// Is reports whether ev is of this kind.
func (k Kind[P]) Is(ev Event) bool { return ev.Kind == string(k) }

// Draft is an event of this kind on topic, for PublishBatch.
func (k Kind[P]) Draft(topic string, p P) Draft {
	return Draft{Topic: topic, Kind: string(k), Payload: p}
}

// Publish records an event of this kind in tx (see Publish).
func (k Kind[P]) Publish(ctx context.Context, tx pgx.Tx, topic string, p P) (int64, error) {
	return Publish(ctx, tx, topic, string(k), p)
}

// Decode reads ev's payload, which must be of this kind.
func (k Kind[P]) Decode(ev Event) (P, error) {
	var p P
	if ev.Kind != string(k) {
		return p, fmt.Errorf("events: decode a %s event as %s", ev.Kind, k)
	}
	err := ev.Decode(&p)
	return p, err
}

// The catalogue: every event kind, grouped by the topic it is published on. Payloads
// are stored in the events table as JSON and read back by renderers, so their JSON keys
// are a stored format: add fields, never rename or remove one.
const (
	// On auth.SessionsTopic. Every kind but session.started makes the websocket of
	// the user concerned re-check its session and role.
	SessionStarted Kind[Session] = "session.started"
	SessionEnded   Kind[Session] = "session.ended"
	UserChanged    Kind[Session] = "user.changed"
	TokenRevoked   Kind[Session] = "token.revoked"

	// On audit.Topic, for each appended entry (or the last of a big batch).
	AuditAppended Kind[AuditSummary] = "audit.appended"

	// On registry.ServersTopic (server.deleted on the tools topic too: its tools went).
	ServerStatusChanged Kind[ServerStatus]     = "server.status"  // connection status
	ServerChanged       Kind[ServerStatus]     = "server.changed" // settings
	ServerDeleted       Kind[ServerRef]        = "server.deleted"
	DiscoveryCompleted  Kind[DiscoveryResult]  = "discovery.completed"
	DiscoveryFailed     Kind[DiscoveryFailure] = "discovery.failed"
	DiscoveryProgress   Kind[DiscoverySoFar]   = "discovery.progress"

	// On registry.ServersTopic too: a person asked for a new session (Reconnect), and
	// every replica opens one for its own copy of the server.
	ServerReconnect Kind[ServerReconnecting] = "server.reconnect"

	// On the tools topic (registry.ToolsTopic, tools.Topic, toolstate.Topic).
	ToolsChanged     Kind[DiscoveryResult] = "tools.changed" // a discovery added, updated or removed tools
	ToolChanged      Kind[ToolVersion]     = "tool.changed"  // settings saved
	ToolPermission   Kind[ToolGrant]       = "tool.permission"
	ToolStateChanged Kind[ToolStates]      = "tool.state"
	CategoryChanged  Kind[CategoryRef]     = "category.changed" // a category created, renamed or deleted

	// On router.Topic and on the call's own Topic (a test run's, an execution's).
	ToolStarted   Kind[CallStarted]   = "tool.started"
	ToolOutput    Kind[CallOutput]    = "tool.output"
	ToolFailed    Kind[CallFailed]    = "tool.failed"
	ToolCompleted Kind[CallCompleted] = "tool.completed"
	// Only on a background run's topic, after the call's own events (router.Runs).
	RunEnded Kind[RunRef] = "run.ended"

	// On executions.Topic and on the execution's own topic (executions.TopicOf).
	PlanCreated        Kind[ExecutionPlanned]  = "plan.created"
	ApprovalRequested  Kind[ExecutionPlanned]  = "approval.requested"
	ApprovalGranted    Kind[ExecutionApproved] = "approval.granted"
	ApprovalRejected   Kind[ExecutionDecided]  = "approval.rejected"
	ExecutionCancelled Kind[ExecutionDecided]  = "execution.cancelled"
	ExecutionExpired   Kind[Execution]         = "execution.expired"
	ExecutionSucceeded Kind[ExecutionEnded]    = "execution.success"
	ExecutionFailed    Kind[ExecutionEnded]    = "execution.failed"
	RollbackStarted    Kind[RollbackPlanned]   = "rollback.started"
	RollbackCompleted  Kind[ExecutionEnded]    = "rollback.completed"
	RollbackFailed     Kind[ExecutionEnded]    = "rollback.failed"

	// On grants.Topic and the giver's grants.GiverTopic: grants people gave through
	// user_collaboration, and each use of one (a one-time grant is used up by it).
	GrantCreated Kind[GrantRef] = "grant.created"
	GrantRevoked Kind[GrantRef] = "grant.revoked"
	GrantUsed    Kind[GrantRef] = "grant.used"

	// On the terminals topics (everyone's, and the owner's): a built-in terminal
	// opened, its process ended, and it left the list.
	TerminalOpened Kind[Terminal] = "terminal.opened"
	TerminalExited Kind[Terminal] = "terminal.exited"
	TerminalClosed Kind[Terminal] = "terminal.closed"

	// On the asked person's topic (grants.UserTopic): a user_collaboration question
	// waiting for them, and its end (answered, declined, cancelled or expired).
	CollaborationRequested Kind[Collaboration] = "collaboration.requested"
	CollaborationEnded     Kind[Collaboration] = "collaboration.ended"
)

// KindInfo is one entry of the catalogue: a kind and the type of its payload.
type KindInfo struct {
	Kind    string
	Payload reflect.Type
}

func info[P any](k Kind[P]) KindInfo { return KindInfo{Kind: string(k), Payload: reflect.TypeFor[P]()} }

// catalog lists every kind above; TestCatalog checks none is missing.
var catalog = []KindInfo{
	info(SessionStarted), info(SessionEnded), info(UserChanged), info(TokenRevoked),
	info(AuditAppended),
	info(ServerStatusChanged), info(ServerChanged), info(ServerDeleted), info(ServerReconnect),
	info(DiscoveryCompleted), info(DiscoveryFailed), info(DiscoveryProgress),
	info(ToolsChanged), info(ToolChanged), info(ToolPermission), info(ToolStateChanged),
	info(CategoryChanged),
	info(ToolStarted), info(ToolOutput), info(ToolFailed), info(ToolCompleted), info(RunEnded),
	info(PlanCreated), info(ApprovalRequested), info(ApprovalGranted), info(ApprovalRejected),
	info(ExecutionCancelled), info(ExecutionExpired), info(ExecutionSucceeded), info(ExecutionFailed),
	info(RollbackStarted), info(RollbackCompleted), info(RollbackFailed),
	info(GrantCreated), info(GrantRevoked), info(GrantUsed), info(CollaborationRequested), info(CollaborationEnded),
	info(TerminalOpened), info(TerminalExited), info(TerminalClosed),
}

// Catalog returns every event kind with its payload type.
func Catalog() []KindInfo { return append([]KindInfo(nil), catalog...) }

// Session is the payload of the sessions topic: whose session or account it is about.
type Session struct {
	UserID   string `json:"user_id"`
	Username string `json:"username"`
	Reason   string `json:"reason,omitempty"`
}

// AuditSummary is an appended audit entry without its payload.
type AuditSummary struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	ActorKind  string    `json:"actor_kind"`
	ActorName  string    `json:"actor_name"`
	Action     string    `json:"action"`
	TargetType string    `json:"target_type"`
	TargetID   string    `json:"target_id"`
	TargetName string    `json:"target_name,omitempty"`
	Result     string    `json:"result"`
}

// ServerStatus is a server as server.status and server.changed announce it; Previous
// is the status it left (server.status only).
type ServerStatus struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Previous  string `json:"previous,omitempty"`
	Enabled   bool   `json:"enabled"`
	ToolCount int    `json:"tool_count"`
	LastError string `json:"last_error,omitempty"`
	// Created: the server was just added (lists opened before have no card of it).
	Created bool `json:"created,omitempty"`
}

// ServerRef names a deleted server.
type ServerRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ServerReconnecting is a server whose session a person asked to reconnect; Replica is
// the replica that answered the request, which has reconnected its own already.
type ServerReconnecting struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Replica string `json:"replica,omitempty"`
}

// DiscoveryResult is a discovery run that completed: what it changed.
type DiscoveryResult struct {
	ServerID  string `json:"server_id"`
	Server    string `json:"server"`
	Trigger   string `json:"trigger"`
	RunID     int64  `json:"run_id"`
	Added     int    `json:"added"`
	Updated   int    `json:"updated"`
	Unchanged int    `json:"unchanged"`
	Removed   int    `json:"removed"`
	Total     int    `json:"total"`
}

// DiscoveryFailure is a discovery run that could not complete, and why.
type DiscoveryFailure struct {
	ServerID string `json:"server_id"`
	Server   string `json:"server"`
	Trigger  string `json:"trigger"`
	RunID    int64  `json:"run_id"`
	Error    string `json:"error"`
}

// DiscoverySoFar is how far a running discovery has got.
type DiscoverySoFar struct {
	ServerID string `json:"server_id"`
	Trigger  string `json:"trigger"`
	Pages    int    `json:"pages"`
	Tools    int    `json:"tools"`
}

// ToolVersion is a tool whose settings were saved, and their new version.
type ToolVersion struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
}

// CategoryRef names a tool category that was created, changed or deleted.
type CategoryRef struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Deleted bool   `json:"deleted,omitempty"`
}

// ToolGrant is a change of one user's permission on a tool.
type ToolGrant struct {
	ToolID string `json:"tool_id"`
	UserID string `json:"user_id"`
}

// ToolStates are tools that changed state together. Changes lists them unless there
// are more than 100 (Count says how many).
type ToolStates struct {
	Count   int         `json:"count"`
	Changes []ToolState `json:"changes,omitempty"`
}

// ToolState is one tool's change of state.
type ToolState struct {
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Call is what every event of a tool call says about it.
type Call struct {
	CallID         string `json:"call_id"`
	ToolID         string `json:"tool_id"`
	Tool           string `json:"tool"` // qualified name
	Source         string `json:"source"`
	Actor          string `json:"actor"`
	Risk           string `json:"risk"`
	ConversationID string `json:"conversation_id,omitempty"`
	// Display says what the call does in a short line ("Creating file notes.txt").
	Display string `json:"display,omitempty"`
}

// Runtime is a tool's live state in this replica, as of a call event.
type Runtime struct {
	State      string    `json:"state"` // connecting, executing, completed, error
	Active     int       `json:"active"`
	Since      time.Time `json:"since"`
	LastError  string    `json:"last_error,omitempty"`
	DurationMS float64   `json:"duration_ms,omitempty"`
}

// Progress is a progress notification of a running call.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// CallStarted is a call that is about to run.
type CallStarted struct {
	Call
	Runtime Runtime `json:"runtime"`
}

// CallOutput is a call's progress.
type CallOutput struct {
	Call
	Progress Progress `json:"progress"`
}

// CallFailed is a call that ran, or tried to, and did not complete.
type CallFailed struct {
	Call
	Code       string  `json:"code"`
	Message    string  `json:"message"`
	DurationMS float64 `json:"duration_ms"`
	Runtime    Runtime `json:"runtime"`
}

// CallCompleted is a call that returned a result, an error result too. Summary is the
// start of its text (at most 200 characters), when it has any.
type CallCompleted struct {
	Call
	IsError    bool    `json:"is_error"`
	DurationMS float64 `json:"duration_ms"`
	Runtime    Runtime `json:"runtime"`
	Attempts   int     `json:"attempts"`
	Summary    string  `json:"summary,omitempty"`
}

// RunRef is a background run whose outcome is known.
type RunRef struct {
	CallID string `json:"call_id"`
	ToolID string `json:"tool_id"`
}

// Execution is what every event of an execution says about it, as it is after the
// change; From are the statuses the change was allowed from.
type Execution struct {
	ExecutionID string   `json:"execution_id"`
	Status      string   `json:"status"`
	Risk        string   `json:"risk"`
	Title       string   `json:"title"`
	Requester   string   `json:"requester"`
	PlanHash    string   `json:"plan_hash"`
	From        []string `json:"from"`
}

// ExecutionPlanned is a new plan: how many steps and undo steps, and why its risk.
type ExecutionPlanned struct {
	Execution
	Steps    int    `json:"steps"`
	Rollback int    `json:"rollback"`
	RiskWhy  string `json:"risk_why"`
}

// ExecutionApproved is an approval: how ("policy", "phrase", "confirmed") and by whom.
type ExecutionApproved struct {
	Execution
	Approval     string `json:"approval"`
	Approver     string `json:"approver"`
	SelfApproved bool   `json:"self_approved,omitempty"`
}

// ExecutionDecided is a rejection or cancellation: why, and by whom (empty when
// Toolwarden cancelled it because the plan can no longer run as approved).
type ExecutionDecided struct {
	Execution
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}

// ExecutionEnded is the end of a run or rollback: its steps' results and, when it
// failed, the error. A run interrupted by a restart has Step (the position of the step
// that was running) instead of Results.
type ExecutionEnded struct {
	Execution
	Results []StepResult `json:"results,omitempty"`
	Error   string       `json:"error,omitempty"`
	Step    *int         `json:"step,omitempty"`
}

// StepResult is how one step of an execution ended.
type StepResult struct {
	Position   int      `json:"position"`
	Tool       string   `json:"tool"`
	Status     string   `json:"status"`
	DurationMS *float32 `json:"duration_ms"`
	Error      string   `json:"error"`
}

// RollbackPlanned is a rollback that starts: its undo steps, the completed steps
// nothing undoes, and the risk of the undo steps, which replaces the execution's.
type RollbackPlanned struct {
	Execution
	Steps        int      `json:"steps"`
	NotUndone    []string `json:"not_undone"`
	Risk         string   `json:"risk"` // shadows Execution.Risk in the JSON
	SelfApproved bool     `json:"self_approved,omitempty"`
}

// GrantRef names a grant.
type GrantRef struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversation_id"`
	Operation      string `json:"operation"`
	Target         string `json:"target,omitempty"`
}

// Terminal is a built-in terminal (a PTY session or a background command) as its
// events carry it: what its row in /terminals shows.
type Terminal struct {
	ID             string    `json:"id"`
	Kind           string    `json:"kind"`
	ConversationID string    `json:"conversation_id"`
	OwnerID        string    `json:"owner_id,omitempty"`
	OwnerName      string    `json:"owner_name,omitempty"`
	Dir            string    `json:"dir"`
	Command        string    `json:"command,omitempty"`
	Started        time.Time `json:"started"`
	Exited         bool      `json:"exited,omitempty"`
	Cols           int       `json:"cols,omitempty"`
	Rows           int       `json:"rows,omitempty"`
	// Replica is the serve process that runs it; ReplicaStopped: that replica died.
	Replica        string `json:"replica,omitempty"`
	ReplicaStopped bool   `json:"replica_stopped,omitempty"`
}

// Collaboration is a user_collaboration question as its events carry it.
type Collaboration struct {
	ID                 string `json:"id"`
	UserID             string `json:"user_id"`
	ConversationID     string `json:"conversation_id"`
	Prompt             string `json:"prompt"`
	AuthorizeOperation string `json:"authorize_operation,omitempty"`
	Target             string `json:"target,omitempty"`
	// GrantOneTime and GrantTTLSeconds say what approving grants: one use, or any number
	// for the time, so that the question's card says it.
	GrantOneTime    bool   `json:"grant_one_time,omitempty"`
	GrantTTLSeconds int    `json:"grant_ttl_seconds,omitempty"`
	Status          string `json:"status"`
	Response        string `json:"response,omitempty"`
}
