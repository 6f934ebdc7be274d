// Package executions owns plans and their execution (docs/architecture.md, State machines; the Safe Action
// flow): a plan is prepared step by step through the router, stored immutably with the
// hash of its canonical form, approved by policy (LOW), a confirm (MEDIUM) or the typed
// phrase (HIGH) bound to that hash, run step by step through the router by a durable
// River job, and on failure rolled back with the plan's own undo steps or the
// compensations administrators configured.
//
// Every transition is a conditional update (of concurrent decisions exactly one wins)
// with its events and audit row in the same transaction.
package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/jobs"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
)

// Topic receives every execution's events (lists, the approvals inbox).
const Topic = "executions"

// TopicOf is the topic of one execution's events (its page).
func TopicOf(id string) string { return "execution:" + id }

// ErrNotFound is an execution that does not exist or that the caller may not see.
var ErrNotFound = fault.NotFound("execution")

// Options tune a Service; zero fields take the defaults shown.
type Options struct {
	Logger *slog.Logger
	// Planner turns prompts into plans. Default: planner.NewRules().
	Planner planner.Planner
	// Now is the clock (tests move it). Default time.Now.
	Now func() time.Time
	// Workers bounds how many executions run at once in this process. Default 8.
	Workers int
	// Auth re-checks requesters before approval and before every step. Default: one
	// over the pool.
	Auth *auth.Service
	// Decide says who may approve, reject and roll back. Default: one over the pool
	// and Auth.
	Decide *decide.Service
	// Keys seal every plan and approval (see sealOf). Required.
	Keys *secrets.Keyring
	// Jobs is the process's job queue; the service registers its workers on it (before
	// it opens). Nil: a queue of its own, worked by Run.
	Jobs *jobs.Queue
	// Local is this process's buses reading pool: the service begins its transactions
	// on it, so its events are delivered to them before its methods return (see
	// events.Local). nil: they arrive with the NOTIFY.
	Local *events.Local
	// Previewer previews file changes before approval and finds them stale at run
	// time (the built-in tools); nil: none.
	Previewer Previewer
	// Display is the short line that says what a step does (router.Options.Display);
	// nil: none.
	Display func(qualifiedName string, args json.RawMessage) string
	// Runner and RunnerID name this process among replicas (services/replicas); they
	// are recorded on each execution a phase of which runs here. Default: none.
	Runner, RunnerID string
	// RunnerAlive reports whether the replica with that id is alive: a sweep leaves
	// the executions of a live replica to it. Nil: only the lock decides.
	RunnerAlive func(ctx context.Context, runnerID string) bool
	// Steady reports whether this replica may take others for stopped now
	// (replicas.Service.Steady): not while it is just back from a database outage,
	// when every replica looks stopped. nil: always.
	Steady func() bool
	// SweepEvery is how often Watch looks for executions whose runner died (another
	// replica killed mid-step). Default 3 s.
	SweepEvery time.Duration
}

// reservedConns are the pool's connections kept for everything but runners (the
// bus's listener, requests, the router's records).
const reservedConns = 8

// Service manages executions.
type Service struct {
	pool   *pgxpool.Pool
	begin  db.TxBeginner // pool, or its Local
	router *router.Router
	tools  *tools.Service
	opts   Options
	log    *slog.Logger
	jobs   *jobs.Queue
	// ownJobs is set when jobs is the service's own queue (Options.Jobs nil).
	ownJobs bool
	auth    *auth.Service
	dec     *decide.Service
	// stopping is set when Run's context ends: running jobs start no further step.
	stopping atomic.Bool
	// held are the executions whose lock this process holds (their ids).
	held sync.Map
	// blocking counts the steps of this process that wait for a person's answer
	// (blockingRoom).
	blocking atomic.Int32
}

// New returns the execution service. Call Run to start its runner.
func New(pool *pgxpool.Pool, r *router.Router, ts *tools.Service, opts *Options) (*Service, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Planner == nil {
		o.Planner = planner.NewRules()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = 3 * time.Second
	}
	// Each running execution holds a connection for its lock and uses another for its
	// steps: more runners than the pool can serve would wait for connections forever.
	if room := max(1, (int(pool.Config().MaxConns)-reservedConns)/2); o.Workers > room {
		o.Workers = room
	}
	if o.Keys == nil {
		return nil, errors.New("executions: a keyring is required to seal approvals")
	}
	if o.Auth == nil {
		o.Auth = auth.New(pool, &auth.Options{Logger: o.Logger, Local: o.Local})
	}
	if o.Decide == nil {
		o.Decide = decide.New(pool, o.Auth)
	}
	s := &Service{pool: pool, begin: o.Local.Beginner(pool), router: r, tools: ts, opts: o, log: o.Logger, auth: o.Auth, dec: o.Decide}
	s.jobs, s.ownJobs = o.Jobs, o.Jobs == nil
	if s.ownJobs {
		s.jobs = jobs.New(pool, o.Logger)
	}
	if err := s.register(s.jobs); err != nil {
		return nil, fmt.Errorf("executions: %w", err)
	}
	if s.ownJobs {
		if err := s.jobs.Open(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Execution is one plan and where its run stands.
type Execution struct {
	ID                 string     `db:"id" json:"id"`
	RequestedBy        *string    `db:"requested_by" json:"requested_by"`
	RequesterName      string     `db:"requester_name" json:"requester"`
	RequesterKind      string     `db:"requester_kind" json:"requester_kind"`
	RequesterRole      string     `db:"requester_role" json:"-"`
	Prompt             string     `db:"prompt" json:"prompt"`
	Planner            string     `db:"planner" json:"planner,omitempty"`
	Plan               Plan       `db:"plan" json:"plan"`
	PlanHash           []byte     `db:"plan_hash" json:"-"`
	Status             Status     `db:"status" json:"status"`
	Risk               string     `db:"risk" json:"risk"`
	RiskWhy            string     `db:"risk_why" json:"risk_why"`
	ConfirmationPhrase string     `db:"confirmation_phrase" json:"confirmation_phrase,omitempty"`
	Approval           string     `db:"approval" json:"approval,omitempty"`
	ApprovedBy         *string    `db:"approved_by" json:"approved_by,omitempty"`
	ApproverName       string     `db:"approver_name" json:"approver,omitempty"`
	ApprovedAt         *time.Time `db:"approved_at" json:"approved_at,omitempty"`
	ApprovedHash       []byte     `db:"approved_hash" json:"-"`
	// SelfApproved: the requester approved their own high-risk plan (nobody else could,
	// or separation of duties is off).
	SelfApproved bool `db:"self_approved" json:"self_approved,omitempty"`
	// RequestedToken is the API token the plan was asked with (nil: a session).
	RequestedToken *string `db:"requested_token" json:"-"`
	// RollbackPlan and RollbackHash are the rollback as it was asked for and approved.
	RollbackPlan *Plan  `db:"rollback_plan" json:"-"`
	RollbackHash []byte `db:"rollback_hash" json:"-"`
	// Seal is the MAC of the id, the three hashes, the requester and the steps' secret
	// argument names (see sealOf).
	Seal      []byte     `db:"seal" json:"-"`
	ExpiresAt *time.Time `db:"expires_at" json:"expires_at,omitempty"`
	Reason    string     `db:"reason" json:"reason,omitempty"`
	// Decision is how a cancelled execution ended ("rejected" by an approver, or
	// "cancelled"), and DecidedBy who did it.
	Decision  string `db:"decision" json:"decision,omitempty"`
	DecidedBy string `db:"decided_by" json:"decided_by,omitempty"`
	// Source is where it was asked from (SourceMCP, or empty: the API or a page);
	// Client the MCP client's name and version.
	Source string `db:"source" json:"source,omitempty"`
	Client string `db:"client" json:"client,omitempty"`
	// ConversationID is the conversation its steps run in ("" the requester's own).
	ConversationID string     `db:"conversation_id" json:"conversation_id,omitempty"`
	Error          string     `db:"error" json:"error,omitempty"`
	CreatedAt      time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt      time.Time  `db:"updated_at" json:"updated_at"`
	StartedAt      *time.Time `db:"started_at" json:"started_at,omitempty"`
	FinishedAt     *time.Time `db:"finished_at" json:"finished_at,omitempty"`
	// Runner is the replica that runs, or last ran, a phase of it ("" before any).
	Runner string `db:"runner" json:"runner,omitempty"`
}

const columns = `id, requested_by, requester_name, requester_kind, requester_role, prompt, planner, plan, plan_hash, status, risk,
	risk_why, confirmation_phrase, approval, approved_by, approver_name, approved_at, approved_hash, self_approved,
	requested_token, rollback_plan, rollback_hash, seal, expires_at, reason, decision, decided_by, source, client, error, created_at,
	updated_at, started_at, finished_at, conversation_id, runner`

// personal reports whether a person asked for e (themselves or through their token),
// as opposed to the system: then its steps run as that person, who must still exist.
func (e *Execution) personal() bool {
	return e.RequesterKind == "" || e.RequesterKind == audit.ActorUser || e.RequesterKind == audit.ActorToken
}

// Requester is who asked for the execution, as recorded, with the role they had when
// they asked; its steps run as them with the role they have when each step starts
// (see Service.checkBinding).
func (e *Execution) Requester() Caller {
	a := audit.Actor{Kind: e.RequesterKind, Name: e.RequesterName}
	if e.RequestedBy != nil {
		a.ID = *e.RequestedBy
	}
	if e.RequestedToken != nil {
		a.TokenID = *e.RequestedToken
	}
	if a.Kind == "" {
		a.Kind = audit.ActorUser
	}
	return Caller{Actor: a, Role: auth.Role(e.RequesterRole)}
}

// Hash is the plan hash as the API shows it (hex).
func (e *Execution) Hash() string { return fmt.Sprintf("%x", e.PlanHash) }

// Title is a short description for lists and the audit log: its tools in order.
func (e *Execution) Title() string {
	t := ""
	for i, st := range e.Plan.Steps {
		if i == 3 {
			return t + fmt.Sprintf(" … (%d steps)", len(e.Plan.Steps))
		}
		if i > 0 {
			t += " → "
		}
		t += st.Tool
	}
	return t
}

// ShownPrompt is e's prompt as every viewer reads it: what looks like a credential in
// it masked, as in the plan's arguments (storedPrompt masks it too, but not in the rows
// stored before it did).
func (e *Execution) ShownPrompt() string { return usage.RedactText(e.Prompt) }

// storedPrompt is a prompt as kept: every viewer searches the history by it (a word of
// a credential found would tell its next character), so what looks like one is masked.
func storedPrompt(p string) string { return usage.RedactText(p) }

// summary is what every event of the execution carries.
func (e *Execution) summary(from []Status) events.Execution {
	froms := make([]string, len(from))
	for i, f := range from {
		froms[i] = string(f)
	}
	if from == nil {
		froms = nil
	}
	return events.Execution{ExecutionID: e.ID, Status: string(e.Status), Risk: e.Risk, Title: e.Title(),
		Requester: e.RequesterName, PlanHash: e.Hash(), From: froms}
}

func (s *Service) get(ctx context.Context, q db.Querier, id string) (*Execution, error) {
	// Only the canonical form names one (PostgreSQL refuses the others: a 500, not a 404).
	if !uuidtext.Canonical(id) {
		return nil, ErrNotFound
	}
	rows, err := q.Query(ctx, `/* executions.get */ SELECT `+columns+` FROM executions WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("executions: get: %w", err)
	}
	ex, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Execution])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("executions: get: %w", err)
	}
	ex.phraseAsAsked()
	return ex, nil
}

// phraseAsAsked shows a plan awaiting approval with the phrase Confirm asks for, from
// its sealed plan: the column keeps the phrase of the version that stored it, which a
// newer one may word differently.
func (ex *Execution) phraseAsAsked() {
	if ex.Status == AwaitingApproval {
		ex.ConfirmationPhrase = ex.Plan.Phrase()
	}
}

// Step is one tool call of an execution as stored: a step of the plan or of its rollback.
type Step struct {
	ID         string          `db:"id" json:"id"`
	Phase      string          `db:"phase" json:"phase"`
	Position   int             `db:"position" json:"position"`
	ToolID     *string         `db:"tool_id" json:"tool_id"`
	Tool       string          `db:"tool_name" json:"tool"`
	Arguments  json.RawMessage `db:"arguments" json:"arguments"`
	Risk       string          `db:"risk" json:"risk"`
	Undoes     *int            `db:"undoes" json:"undoes,omitempty"`
	Status     string          `db:"status" json:"status"`
	CallID     *string         `db:"call_id" json:"call_id,omitempty"`
	Result     json.RawMessage `db:"result" json:"result"`
	Error      string          `db:"error" json:"error,omitempty"`
	StartedAt  *time.Time      `db:"started_at" json:"started_at,omitempty"`
	FinishedAt *time.Time      `db:"finished_at" json:"finished_at,omitempty"`
	DurationMS *float32        `db:"duration_ms" json:"duration_ms,omitempty"`
	// HasResult says whether a result is stored, also when StepsBrief left it unread.
	HasResult bool `db:"has_result" json:"-"`
	// ResultBytes is the size of the stored result as JSON text, read by StepsSized
	// (whether or not it read the result too); 0 from the other reads.
	ResultBytes int `db:"result_bytes" json:"-"`
	// SnapshotID is the snapshot a built-in file step's result names (builtinUndo), read
	// also when its result is not.
	SnapshotID string `db:"snapshot_id" json:"-"`
	// Changed: a built-in file step's error result says it changed something (with a
	// snapshot, or one it could not keep).
	Changed bool `db:"changed" json:"-"`
	// ResultWithheld: the result is not shown to whoever reads the step (PrivateResult).
	ResultWithheld bool `db:"-" json:"result_withheld,omitempty"`
}

// The step states.
const (
	StepPending     = "pending"
	StepRunning     = "running"
	StepSucceeded   = "succeeded"
	StepFailed      = "failed"
	StepInterrupted = "interrupted"
	StepCompensated = "compensated"
	StepSkipped     = "skipped"
)

// Steps lists an execution's steps: the run's in order, then the rollback's.
func (s *Service) Steps(ctx context.Context, id string) ([]Step, error) {
	return s.steps(ctx, id, "result", "0", "")
}

// StepsBrief is Steps without their results (Result nil, HasResult set): for what runs
// the steps or follows their states, which a result of megabytes would only slow.
func (s *Service) StepsBrief(ctx context.Context, id string) ([]Step, error) {
	return s.steps(ctx, id, "NULL::jsonb AS result", "0", "")
}

// StepsSized is Steps with each result's size (ResultBytes), and only the results of up
// to smallResult bytes read: for what reads the larger ones one at a time (StepResult),
// so that fifty results near a message's cap are never held at once.
func (s *Service) StepsSized(ctx context.Context, id string) ([]Step, error) {
	return s.steps(ctx, id, "CASE WHEN z.n <= "+strconv.Itoa(smallResult)+" THEN result END AS result", "coalesce(z.n, 0)",
		"CROSS JOIN LATERAL (SELECT octet_length(result::text) AS n) z")
}

// smallResult is the size of the results StepsSized reads with their steps: a page
// shows no more of one (64 KiB), and fifty of them are a few megabytes.
const smallResult = 64 << 10

// StepResult is the stored result of step stepID of execution id (nil when it has none).
func (s *Service) StepResult(ctx context.Context, id, stepID string) (json.RawMessage, error) {
	var res json.RawMessage
	err := s.pool.QueryRow(ctx, `/* executions.StepResult */
		SELECT result FROM tool_calls WHERE execution_id = $1 AND id = $2`, id, stepID).Scan(&res)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("executions: read a step's result: %w", err)
	}
	return res, nil
}

func (s *Service) steps(ctx context.Context, id, result, size, join string) ([]Step, error) {
	// The snapshot id is read only from a built-in file step's result (small): reading
	// it from any other would fetch the whole value.
	return db.All[Step](ctx, s.pool, "executions: steps", `/* executions.Steps */
		SELECT id, phase, position, tool_id, tool_name, arguments, risk, undoes, status, call_id, `+result+`, error,
		       started_at, finished_at, duration_ms, coalesce(result <> 'null'::jsonb, false) AS has_result,
		       `+size+` AS result_bytes,
		       CASE WHEN tool_name = $2 OR starts_with(tool_name, $2 || '.')
		            THEN coalesce(result #>> '{structured_content,snapshotId}', '') ELSE '' END AS snapshot_id,
		       CASE WHEN tool_name = $2 OR starts_with(tool_name, $2 || '.')
		            THEN coalesce(result #> '{structured_content,changed}' = 'true'::jsonb, false) ELSE false END AS changed
		FROM tool_calls `+join+` WHERE execution_id = $1 ORDER BY phase DESC, position`, id, builtinFiles)
}
