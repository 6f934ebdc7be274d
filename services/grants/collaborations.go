package grants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/services/verr"
)

// The statuses of a collaboration.
const (
	StatusPending   = "pending"
	StatusAnswered  = "answered"  // the person answered (approving, or just answering)
	StatusDeclined  = "declined"  // the person said no (a rejection word, or Reject)
	StatusCancelled = "cancelled" // the caller gave up waiting
	StatusExpired   = "expired"   // nobody answered for a day
)

// Unanswered is how long a question waits before Prune marks it expired.
const Unanswered = 24 * time.Hour

// Abandoned is how long a pending question may go without its waiting call's sign of
// life (every pollEvery) before Prune cancels it: the process that waited ended.
const Abandoned = time.Minute

// MaxPending is how many questions may wait for one person's answer at once: each
// waiting call holds a connection's worth of heartbeats for up to a day, so an agent
// asking in a loop is told to wait for the answers first.
const MaxPending = 20

// UserTopic is the topic of what concerns one person: the questions waiting for them.
func UserTopic(userID string) string { return "user:" + userID }

// UserOfTopic is the person a UserTopic is about.
func UserOfTopic(topic string) (string, bool) {
	id, ok := strings.CutPrefix(topic, "user:")
	return id, ok && id != ""
}

// Collaboration is one question to a person and its answer.
type Collaboration struct {
	ID                 string `json:"id"`
	UserID             string `json:"user_id"`
	UserName           string `json:"user_name"`
	ConversationID     string `json:"conversation_id"`
	CallID             string `json:"call_id,omitempty"`
	ExecutionID        string `json:"execution_id,omitempty"`
	Source             string `json:"source,omitempty"`
	Prompt             string `json:"prompt"`
	AuthorizeOperation string `json:"authorize_operation"` // "" when none; always sent (DESIGN §1)
	Target             string `json:"target,omitempty"`
	GrantOneTime       bool   `json:"grant_one_time,omitempty"`
	GrantTTLSeconds    int    `json:"grant_ttl_seconds"`
	Status             string `json:"status"`
	Response           string `json:"response,omitempty"`
	// IsApproved: the answer approves (Approved is the same for an answered question).
	IsApproved bool       `json:"approved"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	GrantID    *string    `json:"grant_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
}

// Approved reports whether the answer approves (seed 000 §4's words).
func (c Collaboration) Approved() bool { return c.Status == StatusAnswered && c.IsApproved }

const collabColumns = `id::text, user_id::text, user_name, conversation_id, call_id, execution_id, source, prompt,
	authorize_operation, target, grant_one_time, grant_ttl_seconds, status, response, approved, answered_by, grant_id::text, created_at, answered_at`

func scanCollab(row pgx.Row) (Collaboration, error) {
	var c Collaboration
	var uid *string
	err := row.Scan(&c.ID, &uid, &c.UserName, &c.ConversationID, &c.CallID, &c.ExecutionID, &c.Source, &c.Prompt,
		&c.AuthorizeOperation, &c.Target, &c.GrantOneTime, &c.GrantTTLSeconds, &c.Status, &c.Response, &c.IsApproved, &c.AnsweredBy, &c.GrantID, &c.CreatedAt, &c.AnsweredAt)
	if uid != nil {
		c.UserID = *uid
	}
	return c, err
}

func (c Collaboration) event() events.Collaboration {
	return events.Collaboration{ID: c.ID, UserID: c.UserID, ConversationID: c.ConversationID, Prompt: c.Prompt,
		AuthorizeOperation: c.AuthorizeOperation, Target: c.Target, GrantOneTime: c.GrantOneTime, GrantTTLSeconds: c.GrantTTLSeconds,
		Status: c.Status, Response: c.Response}
}

// Verdict is what a free-text answer means.
type Verdict int

// The verdicts.
const (
	Neutral Verdict = iota // an answer that neither approves nor rejects
	Approve
	Reject
)

// Seed 000 §4's approval and rejection words (matched as whole words, any case), with
// the buttons' own words. A rejection word wins over an approval word ("no, don't
// proceed"), and so does a negation: "don't proceed" and "I do not approve" are
// refusals, never a grant.
var (
	approvalWords  = []string{"yes", "ok", "okay", "proceed", "approve", "approved", "confirm", "confirmed", "allow"}
	rejectionWords = []string{"no", "cancel", "stop", "deny", "denied", "reject", "rejected", "decline"}
	negationWords  = []string{"not", "never", "nope", "nah", "dont", "doesnt", "didnt", "wont", "shouldnt", "cant", "cannot", "mustnt", "without", "neither", "nor"}
)

// Classify says whether a free-text answer approves, rejects or neither. An answer that
// asks back ("is that ok?") approves nothing.
func Classify(response string) Verdict {
	lower := strings.ToLower(strings.NewReplacer("\u2019", "'", "\u2018", "'").Replace(response))
	// "don't" is one word, "dont"; other punctuation separates words.
	lower = strings.ReplaceAll(lower, "n't", "nt")
	words := strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) })
	approve, negated := false, false
	for _, w := range words {
		switch {
		case slices.Contains(rejectionWords, w):
			return Reject
		case slices.Contains(negationWords, w):
			negated = true
		case slices.Contains(approvalWords, w):
			approve = true
		}
	}
	switch {
	case approve && negated:
		return Reject
	case approve && !strings.Contains(response, "?"):
		return Approve
	}
	return Neutral
}

// Question is what user_collaboration asks.
type Question struct {
	UserID, UserName           string
	ActorKind, TokenID         string // "token" when the person's API token asks (callmeta)
	ConversationID, CallID     string
	ExecutionID, Source        string
	Prompt                     string
	AuthorizeOperation, Target string // the target is stored as given (see Ask)
	OneTime                    bool
	TTL                        time.Duration // of the grant; 0: DefaultTTL
}

// waiters wakes the calls waiting for an answer in this process.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func newWaiters() *waiters { return &waiters{m: map[string]chan struct{}{}} }

func (w *waiters) add(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.m[id] = ch
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.m, id)
		w.mu.Unlock()
	}
}

func (w *waiters) wake(id string) {
	w.mu.Lock()
	ch := w.m[id]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// pollEvery is how often a waiting call looks at its row (an answer given through
// another replica wakes nobody here).
const pollEvery = 2 * time.Second

// heartbeatTimeout bounds one heartbeat of a waiting question: a stuck connection must
// not pin the wait.
const heartbeatTimeout = 5 * time.Second

// Ask records the question, announces it on the person's topic and waits until they
// answer — without a time limit (seed 000 §4) — or ctx ends, which cancels the
// question. The returned collaboration says how it ended.
//
// Targets are stored, shown and granted as given: grants know neither the workspace
// nor the path guard's rule, so the asker puts a file operation's target in the form the
// guard matches (builtin's user_collaboration does); a relative one is stored as written.
func (s *Service) Ask(ctx context.Context, q Question) (Collaboration, error) {
	if q.UserID == "" {
		return Collaboration{}, fault.Invalid("no_person", "nobody to ask: the call was made by no person", nil)
	}
	if strings.TrimSpace(q.Prompt) == "" {
		return Collaboration{}, fault.Invalid("invalid_prompt", "prompt: say what to ask", nil)
	}
	ttl := q.TTL
	if ttl < time.Second {
		ttl = DefaultTTL
	}
	var c Collaboration
	asker := audit.Caller(q.ActorKind, q.UserID, q.UserName, q.TokenID)
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		// The lock first, then the count in a statement of its own: its snapshot then
		// sees what an Ask that held the lock before committed.
		if _, err := tx.Exec(ctx, `/* grants.Ask.lock */ SELECT pg_advisory_xact_lock(hashtextextended('collab:' || $1, 0))`,
			q.UserID); err != nil {
			return fmt.Errorf("grants: count the questions waiting: %w", err)
		}
		var n int
		if err := tx.QueryRow(ctx, `/* grants.Ask.pending */ SELECT count(*) FROM collaborations WHERE user_id = $1 AND status = 'pending'`,
			q.UserID).Scan(&n); err != nil {
			return fmt.Errorf("grants: count the questions waiting: %w", err)
		}
		if n >= MaxPending {
			return fault.Conflict("too_many_questions", fmt.Sprintf("not asked: %d of your questions already wait for an answer, "+
				"the most there may be; answer or cancel the waiting questions first, then ask again", n))
		}
		var err error
		c, err = scanCollab(tx.QueryRow(ctx, `/* grants.Ask */ INSERT INTO collaborations (user_id, user_name, conversation_id, call_id,
			execution_id, source, prompt, authorize_operation, target, grant_one_time, grant_ttl_seconds, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, `+dbNow(12)+`) RETURNING `+collabColumns,
			q.UserID, q.UserName, q.ConversationID, q.CallID, q.ExecutionID, q.Source, q.Prompt,
			normalize(q.AuthorizeOperation), q.Target, q.OneTime, int(ttl.Seconds()), s.at()))
		if err != nil {
			return fmt.Errorf("grants: ask: %w", err)
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: asker, Action: "collaboration.request", TargetType: "collaboration",
			TargetID: c.ID, TargetName: promptName(c.Prompt), Payload: map[string]any{"conversation_id": c.ConversationID,
				"authorize_operation": masked(c.AuthorizeOperation), "target": masked(c.Target), "call_id": c.CallID, "execution_id": c.ExecutionID}}); err != nil {
			return err
		}
		_, err = events.CollaborationRequested.Publish(ctx, tx, UserTopic(c.UserID), c.event())
		return err
	})
	if err != nil {
		return Collaboration{}, err
	}
	woken, done := s.wait.add(c.ID)
	defer done()
	beat := s.now() // the last heartbeat that got through (this host's clock, which tests move)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		// A heartbeat that fails (the database restarting, a connection reset) is tried
		// again at the next tick: a wait meant to last a day does not end on one error,
		// and a question left without heartbeats for Abandoned is cancelled by the prune,
		// which the next heartbeat that gets through finds.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatTimeout)
		cur, err := scanCollab(s.pool.QueryRow(hctx, `/* grants.Ask.wait */ UPDATE collaborations
			SET heartbeat_at = `+dbNow(2)+` WHERE id = $1 RETURNING `+collabColumns, c.ID, s.at()))
		cancel()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return Collaboration{}, fmt.Errorf("grants: wait for the answer: question %s is gone", c.ID)
		case err != nil && s.now().Sub(beat) > Abandoned:
			// Without a heartbeat for that long the question was taken for abandoned
			// (cancelled by the prune): waiting on would hold the caller for nothing.
			return Collaboration{}, fmt.Errorf("grants: wait for the answer: no heartbeat for %s: %w", Abandoned, err)
		case err != nil:
			s.log.Warn("grants: a waiting question's heartbeat failed; trying again", "collaboration", c.ID, "err", err)
		case cur.Status != StatusPending:
			return cur, nil
		default:
			beat = s.now()
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatTimeout)
			defer cancel()
			ended, err := s.cancel(cctx, asker, c.ID, context.Cause(ctx))
			if err != nil {
				// Nobody reads the call's result any more: this log is the only trace.
				s.log.Warn("grants: could not cancel a question its caller gave up on; the prune cancels it within "+Abandoned.String(),
					"collaboration", c.ID, "err", err)
			}
			return ended, err
		case <-woken:
		case <-tick.C:
		}
	}
}

// cancel marks a question the caller gave up on as cancelled, if nobody answered it.
func (s *Service) cancel(ctx context.Context, asker audit.Actor, id string, cause error) (Collaboration, error) {
	var c Collaboration
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		var err error
		c, err = scanCollab(tx.QueryRow(ctx, `/* grants.cancel */ UPDATE collaborations SET status = 'cancelled', answered_at = `+dbNow(2)+`
			WHERE id = $1 AND status = 'pending' RETURNING `+collabColumns, id, s.at()))
		if errors.Is(err, pgx.ErrNoRows) {
			c, err = scanCollab(tx.QueryRow(ctx, `/* grants.cancel.answered */ SELECT `+collabColumns+` FROM collaborations WHERE id = $1`, id))
			return err // answered just before: the answer stands
		}
		if err != nil {
			return fmt.Errorf("grants: cancel a question: %w", err)
		}
		reason := "the caller stopped waiting"
		if cause != nil {
			reason += ": " + masked(cause.Error())
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: asker, Action: "collaboration.cancel", TargetType: "collaboration",
			TargetID: c.ID, TargetName: promptName(c.Prompt), Payload: map[string]any{"reason": reason}}); err != nil {
			return err
		}
		_, err = events.CollaborationEnded.Publish(ctx, tx, UserTopic(c.UserID), c.event())
		return err
	})
	return c, err
}

// CancelForCallsTx cancels, in tx, the questions the calls callIDs of execution
// executionID still wait an answer to, because their step ended without one (its runner
// stopped or died): audited as cancelled by the system for reason, and announced. Nobody
// waits for the answer any more, and an approving one would grant something for a plan
// that went on without it.
func CancelForCallsTx(ctx context.Context, tx pgx.Tx, executionID string, callIDs []string, reason string) error {
	if len(callIDs) == 0 {
		return nil
	}
	_, err := cancelPendingTx(ctx, tx, `execution_id = $1 AND call_id = ANY($2::text[])`, []any{executionID, callIDs}, nil,
		func(Collaboration) map[string]any {
			return map[string]any{"reason": reason, "execution_id": executionID}
		})
	return err
}

// cancelPendingTx cancels, in tx, the pending questions where selects (its parameters
// args), at the clock's time at (nil: the database's), each audited as cancelled by the
// system with payload and announced; it returns them.
func cancelPendingTx(ctx context.Context, tx pgx.Tx, where string, args []any, at any, payload func(Collaboration) map[string]any) ([]Collaboration, error) {
	rows, err := tx.Query(ctx, `/* grants.cancelPending */ UPDATE collaborations SET status = 'cancelled', answered_at = `+dbNow(len(args)+1)+`
		WHERE status = 'pending' AND `+where+` RETURNING `+collabColumns, append(args, at)...)
	if err != nil {
		return nil, fmt.Errorf("grants: cancel questions: %w", err)
	}
	ended, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Collaboration, error) { return scanCollab(r) })
	if err != nil {
		return nil, fmt.Errorf("grants: cancel questions: %w", err)
	}
	for _, c := range ended {
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: "collaboration.cancel", TargetType: "collaboration",
			TargetID: c.ID, TargetName: promptName(c.Prompt), Payload: payload(c)}); err != nil {
			return nil, err
		}
		if _, err := events.CollaborationEnded.Publish(ctx, tx, UserTopic(c.UserID), c.event()); err != nil {
			return nil, err
		}
	}
	return ended, nil
}

// CancelAsked cancels every question still waiting for userID's answer, because their
// account was disabled: nobody may answer it now, nor when the account is enabled again,
// and the calls waiting for it return. Each is audited as cancelled by the system. Every
// replica that learns of the disable may call it: only the questions still pending
// change, so each is cancelled and audited once. It returns those it cancelled.
func (s *Service) CancelAsked(ctx context.Context, userID string) ([]Collaboration, error) {
	if !uuidtext.Canonical(userID) {
		return nil, nil // nobody's id: no question waits for them
	}
	var ended []Collaboration
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		var err error
		ended, err = cancelPendingTx(ctx, tx, `user_id = $1`, []any{userID}, s.at(), func(c Collaboration) map[string]any {
			return map[string]any{"reason": "the person asked was disabled", "user_id": c.UserID, "conversation_id": c.ConversationID}
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, c := range ended {
		s.wait.wake(c.ID) // a call waiting here returns now, elsewhere at its next look
	}
	return ended, nil
}

// ErrNotPending is an answer to a question that is no longer waiting.
var ErrNotPending = fault.Conflict("not_pending", "this question is no longer waiting for an answer")

// Respond records by's answer to question id: a rejection word declines it; anything
// else answers it, and an approving answer to a question with authorize_operation
// creates the grant it asked for, in the same transaction. Only the person asked may
// answer.
func (s *Service) Respond(ctx context.Context, by audit.Actor, id, response string) (Collaboration, error) {
	return s.RespondAs(ctx, by, id, response, Classify(response))
}

// MaxResponse is the most characters of an answer, as of a question (user_collaboration's
// prompt): the answer is stored, audited, published and handed back to the agent.
const MaxResponse = 10_000

// RespondAs is Respond with the verdict given (the Approve and Reject buttons, with the
// person's words beside them) instead of read from the words.
//
// The question is looked at before the words: another's says not found, an answered
// one ErrNotPending. Words refused (none, too long) are a verr error on field response,
// returned with the question, still waiting, so the caller can ask it again.
func (s *Service) RespondAs(ctx context.Context, by audit.Actor, id, response string, verdict Verdict) (Collaboration, error) {
	if by.Kind != audit.ActorUser {
		// Decisions belong to people (docs/security.md): never an API token.
		return Collaboration{}, fault.Forbidden("only a person signed in to Toolwarden in the browser may answer an agent's question, not an API token").About("collaboration")
	}
	if !uuidtext.Canonical(id) {
		return Collaboration{}, fault.NotFound("collaboration")
	}
	response = strings.TrimSpace(response)
	var c Collaboration
	var refused error // the words' problem
	stale := false    // the question was over by the rules; ended now
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		var err error
		c, err = scanCollab(tx.QueryRow(ctx, `/* grants.Respond */ SELECT `+collabColumns+` FROM collaborations WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fault.NotFound("collaboration")
		}
		if err != nil {
			return fmt.Errorf("grants: respond: %w", err)
		}
		if c.UserID != by.ID {
			return fault.NotFound("collaboration") // someone else's question
		}
		if c.Status != StatusPending {
			return ErrNotPending
		}
		// A question past its day, or whose waiting call is gone, is over even before a
		// prune marks it so: it is ended here and now (committed), and an approving answer
		// grants nothing for a call nobody waits on.
		ended, err := expireTx(ctx, tx, `id = $4`, s.at(), id)
		if err != nil {
			return err
		}
		if len(ended) > 0 {
			stale = true
			return nil
		}
		if response == "" {
			refused = verr.New("response", "say something (yes, no, or an answer)")
		} else if n := utf8.RuneCountInString(response); n > MaxResponse {
			refused = verr.New("response", fmt.Sprintf("at most %d characters (this answer has %d); shorten it", MaxResponse, n))
		}
		if refused != nil {
			return refused
		}
		status, action := StatusAnswered, "collaboration.respond"
		if verdict == Reject {
			status, action = StatusDeclined, "collaboration.decline"
		}
		var grantID any
		if verdict == Approve && c.AuthorizeOperation != "" {
			g, err := s.CreateTx(ctx, tx, Spec{ConversationID: c.ConversationID, Operation: c.AuthorizeOperation, Target: c.Target,
				OneTime: c.GrantOneTime, TTL: time.Duration(c.GrantTTLSeconds) * time.Second, By: by, CollaborationID: c.ID})
			if err != nil {
				return err
			}
			grantID = g.ID
		}
		c, err = scanCollab(tx.QueryRow(ctx, `/* grants.Respond.update */ UPDATE collaborations SET status = $2, response = $3, answered_by = $4,
			answered_at = `+dbNow(5)+`, grant_id = $6, approved = $7 WHERE id = $1 RETURNING `+collabColumns,
			id, status, response, by.Name, s.at(), grantID, verdict == Approve))
		if err != nil {
			return fmt.Errorf("grants: respond: %w", err)
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: by, Action: action, TargetType: "collaboration", TargetID: c.ID,
			TargetName: promptName(c.Prompt), Payload: map[string]any{"response": masked(response), "approved": verdict == Approve,
				"grant_id": grantID}}); err != nil {
			return err
		}
		_, err = events.CollaborationEnded.Publish(ctx, tx, UserTopic(c.UserID), c.event())
		return err
	})
	if refused != nil {
		return c, refused // the question as read, still waiting
	}
	if err != nil {
		return Collaboration{}, err
	}
	s.wait.wake(c.ID)
	if stale {
		return Collaboration{}, ErrNotPending
	}
	return c, nil
}

// GetCollaboration returns one question.
func (s *Service) GetCollaboration(ctx context.Context, id string) (Collaboration, error) {
	// Ids are compared as uuids, so the primary key finds them; another spelling names
	// nothing (and would be PostgreSQL's invalid-uuid error).
	if !uuidtext.Canonical(id) {
		return Collaboration{}, fault.NotFound("collaboration")
	}
	c, err := scanCollab(s.pool.QueryRow(ctx, `/* grants.GetCollaboration */ SELECT `+collabColumns+` FROM collaborations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Collaboration{}, fault.NotFound("collaboration")
	}
	return c, err
}

// Collaborations lists a person's questions with the given status ("" for any), newest
// first.
func (s *Service) Collaborations(ctx context.Context, userID, status string) ([]Collaboration, error) {
	if !uuidtext.Canonical(userID) {
		return nil, nil // nobody's id
	}
	where, args := `user_id = $1`, []any{userID}
	switch status {
	case "":
	case StatusPending:
		// Written out, so that even a generic plan may use the partial index
		// collaborations_pending (every page and live update asks for this list).
		where += ` AND status = 'pending'`
	default:
		where, args = where+` AND status = $2`, append(args, status)
	}
	rows, err := s.pool.Query(ctx, `/* grants.Collaborations */ SELECT `+collabColumns+` FROM collaborations
		WHERE `+where+` ORDER BY created_at DESC LIMIT 200`, args...)
	if err != nil {
		return nil, fmt.Errorf("grants: list questions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Collaboration, error) { return scanCollab(r) })
}

// expireUnanswered marks questions nobody answered within Unanswered as expired, and
// cancels those whose waiting call is gone (no sign of life for Abandoned).
func (s *Service) expireUnanswered(ctx context.Context) error {
	return db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		_, err := expireTx(ctx, tx, `true`, s.at())
		return err
	})
}

// expireTx ends, in tx, the pending questions where selects (parameters $4 on, args)
// that are over by the rules: expired when nobody answered within Unanswered, cancelled
// when their waiting call is gone (no sign of life for Abandoned); each is audited and
// announced. The times are at's (dbNow: nil for the database's), as the heartbeats are:
// the replica that waits and the one that checks may have clocks further apart than
// Abandoned. It returns those it ended.
func expireTx(ctx context.Context, tx pgx.Tx, where string, at any, args ...any) ([]Collaboration, error) {
	rows, err := tx.Query(ctx, `/* grants.expire */ UPDATE collaborations
		SET status = CASE WHEN created_at < `+ago(1, 2)+` THEN 'expired' ELSE 'cancelled' END, answered_at = `+dbNow(1)+`
		WHERE status = 'pending' AND (created_at < `+ago(1, 2)+` OR coalesce(heartbeat_at, created_at) < `+ago(1, 3)+`)
		  AND (`+where+`)
		RETURNING `+collabColumns, append([]any{at, Unanswered.Seconds(), Abandoned.Seconds()}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("grants: end the questions over by the rules: %w", err)
	}
	ended, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Collaboration, error) { return scanCollab(r) })
	if err != nil {
		return nil, fmt.Errorf("grants: end the questions over by the rules: %w", err)
	}
	for _, c := range ended {
		e := audit.Entry{Actor: audit.System, Action: "collaboration.expire", TargetType: "collaboration",
			TargetID: c.ID, TargetName: promptName(c.Prompt)}
		if c.Status == StatusCancelled {
			e.Action, e.Payload = "collaboration.cancel", map[string]any{"reason": "nobody waits for the answer any more (the caller's process ended)"}
		}
		if _, err := audit.Append(ctx, tx, e); err != nil {
			return nil, err
		}
		if _, err := events.CollaborationEnded.Publish(ctx, tx, UserTopic(c.UserID), c.event()); err != nil {
			return nil, err
		}
	}
	return ended, nil
}

// masked is s as an audit row may hold it: the append-only log keeps no secret value
// (docs/audit.md), so a credential an agent or a person wrote into a question, an
// answer or a target is masked there, as the router masks a call's own records. The
// question's and the grant's rows keep the words: their person reads them.
func masked(s string) string { return usage.RedactText(s) }

// promptName is a question's prompt as an audit row names it: masked before it is
// clipped, since a clipped credential may no longer be recognised as one.
func promptName(prompt string) string { return clip(masked(prompt), 80) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
