// Package grants is what people allowed through user_collaboration (seed 000 §2, §4):
// a grant lets one conversation do one operation (optionally on one target) for a
// while — by default 300 s — once or until it expires. A one-time grant is consumed by
// a conditional UPDATE, so two calls racing for it cannot both pass; a second use of a
// one-time grant is refused and audited. Expired grants are pruned. The package also
// keeps user_collaboration's requests (collaborations.go).
package grants

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/callmeta"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
)

// DefaultTTL is how long a grant lasts unless it says otherwise (seed 000 §4).
const DefaultTTL = 300 * time.Second

// Topic is where every grant is announced (an administrator's /grants follows it);
// GiverTopic is where the grants one person gave are (theirs follows it).
const Topic = "grants"

const giverPrefix = "grants:"

// GiverTopic is the topic of the grants userID gave.
func GiverTopic(userID string) string { return giverPrefix + userID }

// GiverOfTopic is the person a GiverTopic is about.
func GiverOfTopic(topic string) (string, bool) {
	u, ok := strings.CutPrefix(topic, giverPrefix)
	return u, ok && u != ""
}

// announce publishes a grant's event on Topic and on its giver's topic.
func announce(ctx context.Context, tx pgx.Tx, k events.Kind[events.GrantRef], g Grant) error {
	if _, err := k.Publish(ctx, tx, Topic, event(g)); err != nil {
		return err
	}
	if g.UserID == nil {
		return nil
	}
	_, err := k.Publish(ctx, tx, GiverTopic(*g.UserID), event(g))
	return err
}

// Options configure the service.
type Options struct {
	Logger *slog.Logger
	// Now is the clock (tests move it); nil: the database's now(), so that what one
	// replica writes (a grant's expiry, a question's heartbeat) and another checks agree
	// whatever their hosts' clocks say.
	Now func() time.Time
	// Local is this process's buses reading pool (events.Local); nil: none.
	Local *events.Local
}

// Service keeps grants and collaborations.
type Service struct {
	pool *pgxpool.Pool
	tx   db.TxBeginner
	log  *slog.Logger
	// clock is Options.Now, nil for the database's now() (at), which every grant read
	// also carries (Grant.ReadAt) for what is decided in Go (EndOf); now is this host's.
	clock func() time.Time
	now   func() time.Time
	wait  *waiters
}

// New returns the service.
func New(pool *pgxpool.Pool, opts *Options) *Service {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, tx: o.Local.Beginner(pool), log: o.Logger, clock: o.Now, now: now, wait: newWaiters()}
}

// at is the parameter a statement reads the time from with dbNow: the clock's time, or
// nil for the database's now().
func (s *Service) at() any {
	if s.clock == nil {
		return nil
	}
	return s.clock()
}

// dbNow is the time of parameter $n (at): the clock's, else the database's now().
func dbNow(n int) string { return fmt.Sprintf("coalesce($%d::timestamptz, now())", n) }

// ago is dbNow(n) less $m seconds.
func ago(n, m int) string { return fmt.Sprintf("(%s - make_interval(secs => $%d))", dbNow(n), m) }

// Grant is one grant.
type Grant struct {
	ID              string     `json:"id"`
	ConversationID  string     `json:"conversation_id"`
	Operation       string     `json:"operation"`
	Target          string     `json:"target,omitempty"`
	OneTime         bool       `json:"one_time"`
	Uses            int        `json:"uses"`
	UserID          *string    `json:"user_id,omitempty"`
	UserName        string     `json:"user_name"`
	CollaborationID *string    `json:"collaboration_id,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	ExpiresAt       time.Time  `json:"expires_at"`
	ConsumedAt      *time.Time `json:"consumed_at,omitempty"`
	RevokedAt       *time.Time `json:"revoked_at,omitempty"`
	// ReadAt is the database's now() when the grant was read: whether it has expired
	// is told by the clock that wrote its expiry, not this host's.
	ReadAt time.Time `json:"-"`
}

// Spec is a grant to create.
type Spec struct {
	ConversationID string
	// Operation: "file_operations.create_file", "create_file" or a whole tool
	// ("file_operations"); the prefix builtin__ is dropped.
	Operation string
	// Target: a path or a command the grant is for; "" for any.
	Target  string
	TTL     time.Duration // 0: DefaultTTL
	OneTime bool
	// By is the person who allowed it.
	By              audit.Actor
	CollaborationID string
}

const grantColumns = `id::text, conversation_id, operation, target, one_time, uses, user_id::text, user_name,
	collaboration_id::text, created_at, expires_at, consumed_at, revoked_at, now()`

// bare is op when it names no tool, else "".
func bare(op string) string {
	op = normalize(op)
	if strings.Contains(op, ".") {
		return ""
	}
	return op
}

// matches is the condition on a grant's operation and target ($2 candidates, $3
// target, $5 bare).
const matches = `operation = ANY($2) OR ($5 <> '' AND split_part(operation, '.', 2) = $5)`

// usableFor is the condition of a grant that lets conversation $1 do the operation
// (matches) on target $3 at $4 (dbNow): what Allow uses and Has looks for.
const usableFor = `conversation_id = $1 AND (` + matches + `) AND (target = '' OR target = $3)
	AND revoked_at IS NULL AND consumed_at IS NULL AND expires_at > coalesce($4::timestamptz, now())`

func scanGrant(row pgx.Row) (Grant, error) {
	var g Grant
	err := row.Scan(&g.ID, &g.ConversationID, &g.Operation, &g.Target, &g.OneTime, &g.Uses, &g.UserID, &g.UserName,
		&g.CollaborationID, &g.CreatedAt, &g.ExpiresAt, &g.ConsumedAt, &g.RevokedAt, &g.ReadAt)
	return g, err
}

// normalize is an operation as grants store and match it.
func normalize(op string) string {
	return strings.TrimPrefix(strings.TrimSpace(op), "builtin__")
}

// candidates are the grant operations that allow op: itself, its tool (every
// operation of it) and its bare operation name. A bare op ("create_file") is also
// allowed by a grant of any tool's operation of that name (bare, below).
func candidates(op string) []string {
	op = normalize(op)
	out := []string{op}
	if tool, name, ok := strings.Cut(op, "."); ok {
		out = append(out, tool, name)
	}
	return out
}

// Create records a grant (in its own transaction).
func (s *Service) Create(ctx context.Context, sp Spec) (Grant, error) {
	var g Grant
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		var err error
		g, err = s.CreateTx(ctx, tx, sp)
		return err
	})
	return g, err
}

// CreateTx records a grant in tx, audited there.
func (s *Service) CreateTx(ctx context.Context, tx pgx.Tx, sp Spec) (Grant, error) {
	sp.Operation = normalize(sp.Operation)
	if sp.ConversationID == "" || sp.Operation == "" {
		return Grant{}, fault.Invalid("invalid_grant", "a grant needs a conversation and an operation", nil)
	}
	if sp.TTL <= 0 {
		sp.TTL = DefaultTTL
	}
	var userID, collab any
	if sp.By.Kind == audit.ActorUser && sp.By.ID != "" {
		userID = sp.By.ID
	}
	if sp.CollaborationID != "" {
		collab = sp.CollaborationID
	}
	g, err := scanGrant(tx.QueryRow(ctx, `/* grants.Create */ INSERT INTO grants (conversation_id, operation, target, one_time, user_id, user_name,
		collaboration_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, `+dbNow(8)+`, `+dbNow(8)+` + make_interval(secs => $9))
		RETURNING `+grantColumns, sp.ConversationID, sp.Operation, sp.Target, sp.OneTime, userID, sp.By.Name, collab, s.at(), sp.TTL.Seconds()))
	if err != nil {
		return Grant{}, fmt.Errorf("grants: create: %w", err)
	}
	if _, err := audit.Append(ctx, tx, audit.Entry{Actor: sp.By, Action: "grant.create", TargetType: "grant", TargetID: g.ID,
		TargetName: masked(g.Operation), Payload: map[string]any{"conversation_id": g.ConversationID, "operation": masked(g.Operation),
			"target": masked(g.Target), "one_time": g.OneTime, "expires_at": g.ExpiresAt, "collaboration_id": sp.CollaborationID}}); err != nil {
		return Grant{}, err
	}
	if err := announce(ctx, tx, events.GrantCreated, g); err != nil {
		return Grant{}, err
	}
	return g, nil
}

func event(g Grant) events.GrantRef {
	return events.GrantRef{ID: g.ID, ConversationID: g.ConversationID, Operation: g.Operation, Target: g.Target}
}

// Allow reports whether a grant lets conversation do operation on target, consuming a
// one-time grant (builtin.Grants). A multi-use grant is preferred to a one-time one.
// A call waits for another's use of the same grant (FOR UPDATE, not SKIP LOCKED: two
// parallel calls under one multi-use grant were refused, or took a one-time grant).
// Every use is audited; a second use of a consumed one-time grant is refused and
// audited as denied.
func (s *Service) Allow(ctx context.Context, conversation, operation, target string) (bool, error) {
	allowed, _, err := s.Use(ctx, conversation, operation, target)
	return allowed, err
}

// Use is Allow that also says whether the grant it used has no target, so allows the
// operation on any target: only then may one use cover a second target (a rename's
// two paths), since a grant for one path may have been used up by the time the other
// is looked at.
func (s *Service) Use(ctx context.Context, conversation, operation, target string) (allowed, anyTarget bool, err error) {
	if conversation == "" || normalize(operation) == "" {
		return false, false, nil
	}
	now := s.at()
	// The use is the caller's (a person or their token), with the call it served.
	user, callID := audit.System, ""
	if m, ok := callmeta.From(ctx); ok && m.UserID != "" {
		user, callID = audit.Caller(m.ActorKind, m.UserID, m.UserName, m.TokenID), m.CallID
	}
	err = db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		// The subselect locks below its LIMIT: a grant another call consumed while this
		// one waited on it fails the recheck and the next usable one is taken, so a
		// one-time grant left is used, not missed (TestUseConcurrentOneTimeGrants).
		g, err := scanGrant(tx.QueryRow(ctx, `/* grants.Allow */ UPDATE grants SET uses = uses + 1,
				consumed_at = CASE WHEN one_time THEN `+dbNow(4)+` ELSE consumed_at END
			WHERE id = (SELECT id FROM grants WHERE `+usableFor+`
				ORDER BY one_time, created_at LIMIT 1 FOR UPDATE)
			  AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > `+dbNow(4)+`
			RETURNING `+grantColumns, conversation, candidates(operation), target, now, bare(operation)))
		if err == nil {
			allowed, anyTarget = true, g.Target == ""
			_, err = audit.Append(ctx, tx, audit.Entry{Actor: user, Action: "grant.use", TargetType: "grant", TargetID: g.ID,
				TargetName: masked(g.Operation), Payload: map[string]any{"conversation_id": conversation, "operation": masked(normalize(operation)),
					"target": masked(target), "one_time": g.OneTime, "uses": g.Uses, "call_id": callID}})
			if err != nil {
				return err
			}
			return announce(ctx, tx, events.GrantUsed, g)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("grants: use: %w", err)
		}
		// Refused. A one-time grant that was for this and is used up: a second use,
		// which the audit log records.
		used, err := scanGrant(tx.QueryRow(ctx, `/* grants.Allow.used */ SELECT `+grantColumns+` FROM grants
			WHERE conversation_id = $1 AND (`+matches+`) AND (target = '' OR target = $3)
			  AND one_time AND consumed_at IS NOT NULL AND revoked_at IS NULL AND expires_at > `+dbNow(4)+`
			ORDER BY consumed_at DESC LIMIT 1`, conversation, candidates(operation), target, now, bare(operation)))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("grants: look for a used grant: %w", err)
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: user, Action: "grant.reuse", TargetType: "grant", TargetID: used.ID,
			TargetName: masked(used.Operation), Result: audit.ResultDenied, Payload: map[string]any{"conversation_id": conversation,
				"operation": masked(normalize(operation)), "target": masked(target), "reason": "a one-time grant was already used"}})
		return err
	})
	return allowed, anyTarget, err
}

// Has reports whether a grant would let conversation do operation on target now,
// without using it: the check made before a person is asked to approve a call that
// will need the grant when it runs.
func (s *Service) Has(ctx context.Context, conversation, operation, target string) (bool, error) {
	if conversation == "" || normalize(operation) == "" {
		return false, nil
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `/* grants.Has */ SELECT EXISTS (SELECT 1 FROM grants WHERE `+usableFor+`)`,
		conversation, candidates(operation), target, s.at(), bare(operation)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("grants: look for a grant: %w", err)
	}
	return ok, nil
}

// Filter chooses grants to list.
type Filter struct {
	// UserID: only grants this person gave ("" for everyone's).
	UserID string
	// ConversationID: only this conversation's ("" for all).
	ConversationID string
}

// userParam is f.UserID as a uuid parameter: nil for everyone's; ok is false when it is
// no uuid as PostgreSQL writes it, which is nobody's.
func (f Filter) userParam() (id any, ok bool) {
	if f.UserID == "" {
		return nil, true
	}
	return f.UserID, uuidtext.Canonical(f.UserID)
}

// Active lists the grants that can still be used, newest first.
func (s *Service) Active(ctx context.Context, f Filter) ([]Grant, error) {
	user, ok := f.userParam()
	if !ok {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `/* grants.Active */ SELECT `+grantColumns+` FROM grants
		WHERE revoked_at IS NULL AND consumed_at IS NULL AND expires_at > `+dbNow(1)+`
		  AND ($2::uuid IS NULL OR user_id = $2) AND ($3 = '' OR conversation_id = $3)
		ORDER BY created_at DESC LIMIT 500`, s.at(), user, f.ConversationID)
	if err != nil {
		return nil, fmt.Errorf("grants: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Grant, error) { return scanGrant(r) })
}

// EndedKept is how long a grant that can no longer be used stays listed (Ended) after
// it expired; Prune removes it then. Its audit entries stay.
const EndedKept = 24 * time.Hour

// Ended lists the grants that ended in the last EndedKept (used up, revoked or
// expired), the most recent end first.
func (s *Service) Ended(ctx context.Context, f Filter) ([]Grant, error) {
	user, ok := f.userParam()
	if !ok {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `/* grants.Ended */ SELECT `+grantColumns+` FROM grants
		WHERE (revoked_at > `+ago(1, 2)+` OR consumed_at > `+ago(1, 2)+`
		    OR (expires_at > `+ago(1, 2)+` AND expires_at <= `+dbNow(1)+`))
		  AND ($3::uuid IS NULL OR user_id = $3) AND ($4 = '' OR conversation_id = $4)
		ORDER BY LEAST(revoked_at, consumed_at, expires_at) DESC LIMIT 200`, s.at(), EndedKept.Seconds(), user, f.ConversationID)
	if err != nil {
		return nil, fmt.Errorf("grants: ended: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Grant, error) { return scanGrant(r) })
}

// EndOf says how g ended ("used", "revoked", "expired") and when; "" while it is usable.
func (s *Service) EndOf(g Grant) (string, time.Time) {
	switch {
	case g.RevokedAt != nil:
		return "revoked", *g.RevokedAt
	case g.ConsumedAt != nil:
		return "used", *g.ConsumedAt
	case !g.ExpiresAt.After(s.nowFor(g)):
		return "expired", g.ExpiresAt
	}
	return "", time.Time{}
}

// nowFor is the time g's expiry is compared with: the clock's, else the database's
// when g was read (this host's for a grant built by hand).
func (s *Service) nowFor(g Grant) time.Time {
	switch {
	case s.clock != nil:
		return s.clock()
	case !g.ReadAt.IsZero():
		return g.ReadAt
	}
	return s.now()
}

// Usable reports whether g can still be used now (not revoked, used up or expired).
func (s *Service) Usable(g Grant) bool {
	how, _ := s.EndOf(g)
	return how == ""
}

// Get returns one grant.
func (s *Service) Get(ctx context.Context, id string) (Grant, error) {
	if !uuidtext.Canonical(id) {
		return Grant{}, fault.NotFound("grant") // compared as uuids (the primary key)
	}
	g, err := scanGrant(s.pool.QueryRow(ctx, `/* grants.Get */ SELECT `+grantColumns+` FROM grants WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Grant{}, fault.NotFound("grant")
	}
	return g, err
}

// Revoke ends a grant now. onlyOwn: the actor may revoke only the grants they gave.
func (s *Service) Revoke(ctx context.Context, by audit.Actor, id string, onlyOwn bool) (Grant, error) {
	var own any // nil: anyone's
	if onlyOwn {
		own = by.ID
	}
	// An id in another spelling, or an actor with no uuid revoking their own, names no grant.
	if !uuidtext.Canonical(id) || (onlyOwn && !uuidtext.Canonical(by.ID)) {
		return Grant{}, fault.NotFound("grant")
	}
	var g Grant
	err := db.WithTx(ctx, s.tx, func(tx pgx.Tx) error {
		var err error
		g, err = scanGrant(tx.QueryRow(ctx, `/* grants.Revoke */ UPDATE grants SET revoked_at = `+dbNow(2)+`, revoked_by = $3
			WHERE id = $1 AND revoked_at IS NULL AND consumed_at IS NULL AND expires_at > `+dbNow(2)+`
			  AND ($4::uuid IS NULL OR user_id = $4) RETURNING `+grantColumns,
			id, s.at(), by.Name, own))
		if errors.Is(err, pgx.ErrNoRows) {
			// Ended already (kept a day to be listed): say so, and change nothing.
			ended, gerr := scanGrant(tx.QueryRow(ctx, `/* grants.Revoke.ended */ SELECT `+grantColumns+` FROM grants
				WHERE id = $1 AND ($2::uuid IS NULL OR user_id = $2)`, id, own))
			if gerr != nil {
				return fault.NotFound("grant")
			}
			how, at := s.EndOf(ended)
			if how == "" { // expired by the statement's time, not yet by the clock read since
				how, at = "expired", ended.ExpiresAt
			}
			return fault.Conflict("grant_ended", fmt.Sprintf("The grant of %s already ended (%s at %s UTC); there is nothing to revoke.",
				ended.Operation, how, at.UTC().Format("15:04:05")))
		}
		if err != nil {
			return fmt.Errorf("grants: revoke: %w", err)
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: by, Action: "grant.revoke", TargetType: "grant", TargetID: g.ID,
			TargetName: masked(g.Operation), Payload: map[string]any{"conversation_id": g.ConversationID, "operation": masked(g.Operation),
				"target": masked(g.Target)}}); err != nil {
			return err
		}
		return announce(ctx, tx, events.GrantRevoked, g)
	})
	return g, err
}

// Prune removes grants a day (EndedKept) after they expired (used-up and revoked ones
// too, so a second use of a one-time grant is recognised until they expire, and the
// ended list shows them for that day), marks questions nobody answered within
// Unanswered as expired, and removes questions ended QuestionsKept ago (the audit log
// keeps what each was asked and answered, credentials masked). It returns the grants removed.
func (s *Service) Prune(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `/* grants.Prune */ DELETE FROM grants WHERE expires_at <= `+ago(1, 2), s.at(), EndedKept.Seconds())
	if err != nil {
		return 0, fmt.Errorf("grants: prune: %w", err)
	}
	if err := s.expireUnanswered(ctx); err != nil {
		return tag.RowsAffected(), fmt.Errorf("grants: expire questions: %w", err)
	}
	// One row per call of user_collaboration: kept for good, an agent asking in a loop
	// grows the table (and each person's list) without end.
	if _, err := s.pool.Exec(ctx, `/* grants.Prune.questions */ DELETE FROM collaborations
		WHERE status <> 'pending' AND coalesce(answered_at, created_at) <= `+ago(1, 2), s.at(), QuestionsKept.Seconds()); err != nil {
		return tag.RowsAffected(), fmt.Errorf("grants: prune questions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// QuestionsKept is how long a question that ended (answered, declined, cancelled or
// expired) stays listed.
const QuestionsKept = 90 * 24 * time.Hour
