// Package auth owns users, passwords, sessions, API tokens and the role → permission
// table. Every change it makes is audited in the same transaction.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
)

// Errors the web layer maps to responses.
var (
	ErrNotFound = fault.NotFound("user")
	// ErrTokenNotFound is a token that does not exist or is not the caller's to revoke.
	ErrTokenNotFound = fault.NotFound("token")
	// ErrInvalidCredentials is answered by the sign-in form itself, never by the error
	// handler, so it says nothing of which half was wrong.
	ErrInvalidCredentials = errors.New("auth: wrong username or password")
	ErrUnauthenticated    = fault.Unauthenticated("Sign in, or send an API token as 'Authorization: Bearer <token>'.")
	// ErrTokenMintsToken: otherwise a leaked short-lived token could mint itself a
	// permanent successor that outlives its revocation.
	ErrTokenMintsToken = fault.Forbidden("an API token cannot create API tokens: sign in to create one")
	// ErrTokenGivesAccess: a leaked token that could create a user, set a password, give
	// a role or enable an account would have a person's session of its own, outliving
	// its revocation and deciding what only people decide. Disabling is left to tokens.
	ErrTokenGivesAccess = fault.Forbidden("an API token cannot create users, set passwords, change roles or enable accounts: sign in to do it (or use toolwarden user create)")
)

// Throttle is the details of a sign-in refused for a while after too many failures
// (a rate-limited fault; see Throttled).
type Throttle struct {
	RetryAfterSeconds int           `json:"retry_after_seconds"`
	RetryAfter        time.Duration `json:"-"`
	Scope             string        `json:"-"` // "account from this address", "address", ScopeAccount, or "server"
	// Busy: refused before any check because too many sign-ins were under way at once
	// (from the address, or on the server), not for failures.
	Busy bool `json:"-"`
}

// Throttled is the fault of a sign-in refused for wait after too many failures from scope.
func Throttled(wait time.Duration, scope string) *fault.Error {
	return fault.RateLimited(fmt.Sprintf("too many failed sign-ins for this %s; try again in %s", scope, wait.Round(time.Second)), wait).
		WithDetails(Throttle{RetryAfterSeconds: int(wait.Seconds()), RetryAfter: wait, Scope: scope})
}

// ScopeAccount is the scope of a sign-in refused because the account has too many
// failed sign-ins from all addresses together (Options.MaxAccountFailuresAnywhere): a
// browser that signed in to it before (its device cookie) is not refused for it.
const ScopeAccount = "account"

// AccountThrottled is the fault of a sign-in refused for wait because of the account's
// failed sign-ins from all addresses; it says what still works.
func AccountThrottled(wait time.Duration) *fault.Error {
	at := time.Now().Add(wait).UTC().Format("15:04 UTC")
	return fault.RateLimited(fmt.Sprintf("too many failed sign-ins for this account from many addresses: sign in from a browser that "+
		"has signed in to it before, or try again in %s (at %s)", wait.Round(time.Second), at), wait).
		WithDetails(Throttle{RetryAfterSeconds: int(wait.Seconds()), RetryAfter: wait, Scope: ScopeAccount})
}

// ThrottleOf returns the throttle of a sign-in or password change refused by Throttled
// or by admission (Busy).
func ThrottleOf(err error) (Throttle, bool) {
	f, ok := fault.As(err)
	if !ok {
		return Throttle{}, false
	}
	t, ok := f.Details.(Throttle)
	return t, ok
}

// conflict is an action refused because of the current state (the last admin cannot
// be disabled, say). Its message is meant for people.
func conflict(msg string) *fault.Error { return fault.Conflict("", msg).About("user") }

// Options tune the service. nil means defaults.
type Options struct {
	SessionTTL  time.Duration // absolute session lifetime (default 24h)
	IdleTimeout time.Duration // a session unused this long ends (default 4h)
	// Throttling: MaxAccountFailures failed sign-ins for one username from one address,
	// or MaxIPFailures from one address for any usernames, within ThrottleWindow refuse
	// further attempts from that address until fewer than that are left in the window.
	// Other addresses are not slowed by these, so nobody can lock an account's owner out.
	MaxAccountFailures int           // default 5
	MaxIPFailures      int           // default 20
	ThrottleWindow     time.Duration // default 15m
	// MaxAccountFailuresAnywhere failed sign-ins for one username from all addresses
	// together within ThrottleWindow refuse, without checking the password, every
	// further sign-in to it that does not come with a device cookie of that account (a
	// browser that signed in to it before), until the window has fewer: guesses spread
	// over many addresses stop, and the owner's browsers still sign in. Default 30.
	MaxAccountFailuresAnywhere int
	// TokenDefaultTTL is the lifetime of an API token whose creator names none
	// (--token-default-ttl, DefaultTokenTTL); 0: such tokens do not expire.
	TokenDefaultTTL time.Duration
	Logger          *slog.Logger
	// Local is this process's buses reading pool: the service begins its transactions
	// on it, so its events are delivered to them before its methods return (see
	// events.Local). nil: they arrive with the NOTIFY.
	Local *events.Local
}

// Service is the auth service.
type Service struct {
	pool   *pgxpool.Pool
	begin  db.TxBeginner // pool, or its Local
	opts   Options
	log    *slog.Logger
	tokens tokenCache
	logins *admission // sign-ins waiting for a transaction (admission.go)
	// loginAudit bounds the failed sign-ins audited one by one, and writes the count of
	// those held back that no later one counted (sessions.go); Close flushes it.
	loginAudit *audit.PooledLimiter
}

// New returns the auth service.
func New(pool *pgxpool.Pool, opts *Options) *Service {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 24 * time.Hour
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 4 * time.Hour
	}
	if o.MaxAccountFailures <= 0 {
		o.MaxAccountFailures = 5
	}
	if o.MaxIPFailures <= 0 {
		o.MaxIPFailures = 20
	}
	if o.MaxAccountFailuresAnywhere <= 0 {
		o.MaxAccountFailuresAnywhere = 30
	}
	if o.ThrottleWindow <= 0 {
		o.ThrottleWindow = 15 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Service{pool: pool, begin: o.Local.Beginner(pool), opts: o, log: o.Logger,
		logins: newAdmission(loginMaxTx, loginMaxPerAddress, loginMaxWaiting)}
	s.loginAudit = s.newLoginAuditLimit(loginAuditPerAddress, loginAuditTotal, nil, 0)
	return s
}

// Principal is an authenticated caller: a user signed in through a session, or an
// API token acting for its user.
type Principal struct {
	User      User
	Kind      string // audit.ActorUser (session) or audit.ActorToken
	TokenID   string // the API token's id when Kind is audit.ActorToken
	TokenName string // and its name
	SessionID []byte // the session's token hash when Kind is audit.ActorUser
	// TokenExpiresAt is the API token's expiry (nil: none), so an agent can be told
	// when its token is about to end.
	TokenExpiresAt *time.Time
	// TokenWarnFrom is when its owner starts being warned of that end (WarnFrom).
	TokenWarnFrom *time.Time
	// SessionExpiresAt is the session's absolute end (nil for a token).
	SessionExpiresAt *time.Time
}

// ExpiresAt is when the principal's session or token ends by itself (zero: never).
// Nothing is published then: what stays open on it (a websocket) looks again at that time.
func (p *Principal) ExpiresAt() time.Time {
	switch {
	case p == nil:
	case p.TokenExpiresAt != nil:
		return *p.TokenExpiresAt
	case p.SessionExpiresAt != nil:
		return *p.SessionExpiresAt
	}
	return time.Time{}
}

// Can reports whether the principal's role grants p; an API token is never granted
// what only a person may do (PersonOnly).
func (p *Principal) Can(perm Permission) bool {
	if perm == PermPublic {
		return true
	}
	if p != nil && p.Kind == audit.ActorToken && PersonOnly(perm) {
		return false
	}
	return p != nil && p.User.Role.Can(perm)
}

// Actor describes the principal for the audit log.
func (p *Principal) Actor(ip, requestID string) audit.Actor {
	if p == nil {
		return audit.Actor{Kind: audit.ActorAnonymous, IP: ip, RequestID: requestID}
	}
	return audit.Actor{Kind: p.Kind, ID: p.User.ID, Name: p.User.Username, IP: ip, RequestID: requestID, TokenID: p.TokenID,
		TokenName: p.TokenName}
}

// randomToken returns prefix followed by 32 random bytes in base64url, and its SHA-256.
func randomToken(prefix string) (string, []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := prefix + base64.RawURLEncoding.EncodeToString(b)
	return tok, hashToken(tok)
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}
