package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// apiTokenPrefix marks API tokens ("tw_" + 43 base64url characters), which makes them
// easy for secret scanners to find.
const apiTokenPrefix = "tw_"

// Token is an API token's stored record; the token itself is never stored.
type Token struct {
	ID         string     `db:"id" json:"id"`
	UserID     string     `db:"user_id" json:"user_id"`
	Name       string     `db:"name" json:"name"`
	Prefix     string     `db:"prefix" json:"prefix"`
	CreatedAt  time.Time  `db:"created_at" json:"created_at"`
	LastUsedAt *time.Time `db:"last_used_at" json:"last_used_at"`
	ExpiresAt  *time.Time `db:"expires_at" json:"expires_at"`
	RevokedAt  *time.Time `db:"revoked_at" json:"revoked_at"`
	// ExpiresSoon: the token is active and its owner is being warned of its end
	// (WarnFrom has passed): on /tokens and on every page.
	ExpiresSoon bool `db:"-" json:"expires_soon"`
}

// DefaultTokenTTL is how long a token lives when its creator does not say
// (--token-default-ttl's default).
const DefaultTokenTTL = 90 * 24 * time.Hour

// ExpiryWarning is how long before a token expires its owner is warned, at most: a
// token made to live a shorter time is warned about in the last quarter of its life
// (WarnFrom), so a 7-day token is not "expiring soon" from its first minute.
const ExpiryWarning = 7 * 24 * time.Hour

// WarnFrom is when the owner of a token created at created that expires at expires
// starts being warned: ExpiryWarning before the end, or a quarter of its life before
// it when that is shorter.
func WarnFrom(created, expires time.Time) time.Time {
	return expires.Add(-min(ExpiryWarning, expires.Sub(created)/4))
}

// soon fills ExpiresSoon as of now.
func (t Token) soon(now time.Time) Token {
	t.ExpiresSoon = t.Status() == "active" && t.ExpiresAt != nil && !now.Before(WarnFrom(t.CreatedAt, *t.ExpiresAt))
	return t
}

// Status is "active", "revoked" or "expired".
func (t Token) Status() string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !t.ExpiresAt.After(time.Now()):
		return "expired"
	}
	return "active"
}

const tokenColumns = `id::text AS id, user_id::text AS user_id, name, prefix, created_at, last_used_at, expires_at, revoked_at`

const (
	// MaxLiveTokens bounds a person's tokens that are not revoked: every page reads
	// the ones about to expire, and a loop could otherwise mint them without end.
	MaxLiveTokens = 100
	// revokedListed is how many revoked tokens a list shows (the newest).
	revokedListed = 100
)

// NewToken is the input for CreateToken.
type NewToken struct {
	Name string `json:"name"`
	// ExpiresInDays: nil takes the default (Options.TokenDefaultTTL); 0 means the
	// token does not expire.
	ExpiresInDays *int `json:"expires_in_days"`
}

// CreateToken issues an API token for userID. The returned string is the token: show it
// once, it cannot be recovered.
func (s *Service) CreateToken(ctx context.Context, actor audit.Actor, userID string, in NewToken) (string, Token, error) {
	if actor.Kind == audit.ActorToken {
		return "", Token{}, ErrTokenMintsToken
	}
	in.Name = strings.TrimSpace(in.Name)
	var ve verr.Error
	if in.Name == "" || len([]rune(in.Name)) > 64 {
		ve.Add("name", "must be 1–64 characters")
	} else if why := badLabel(in.Name); why != "" {
		ve.Add("name", why)
	}
	if d := in.ExpiresInDays; d != nil && (*d < 0 || *d > 3650) {
		ve.Add("expires_in_days", "must be between 0 (never) and 3650 days")
	}
	if err := ve.Err(); err != nil {
		return "", Token{}, err
	}
	var expires *time.Time
	switch d := in.ExpiresInDays; {
	case d != nil && *d > 0:
		t := time.Now().Add(time.Duration(*d) * 24 * time.Hour)
		expires = &t
	case d == nil && s.opts.TokenDefaultTTL > 0:
		t := time.Now().Add(s.opts.TokenDefaultTTL)
		expires = &t
	}
	plain, hash := randomToken(apiTokenPrefix)
	var tok Token
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		u, err := lockUser(ctx, tx, userID)
		if err != nil {
			return err
		}
		if u.Disabled() {
			return conflict("the user " + u.Username + " is disabled")
		}
		// Counted under the user's row lock: two creations at once cannot both pass.
		var live int
		if err := tx.QueryRow(ctx, `/* auth.CreateToken.count */ SELECT count(*) FROM api_tokens WHERE user_id = $1::uuid AND revoked_at IS NULL`,
			userID).Scan(&live); err != nil {
			return err
		}
		if live >= MaxLiveTokens {
			return verr.New("name", fmt.Sprintf("%s already has %d tokens that are not revoked (expired ones count), the most a person may have: revoke the ones no longer used first", u.Username, live))
		}
		rows, err := tx.Query(ctx, `/* auth.CreateToken */
			INSERT INTO api_tokens (user_id, name, prefix, token_hash, expires_at) VALUES ($1, $2, $3, $4, $5)
			RETURNING `+tokenColumns, userID, in.Name, plain[:12], hash, expires)
		if err != nil {
			return err
		}
		if tok, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Token]); err != nil {
			if db.IsUniqueViolation(err, "api_tokens_user_name_live_key") {
				return verr.New("name", fmt.Sprintf("you already have a token named %q that is not revoked (an expired one counts): revoke it or choose another name", in.Name))
			}
			return err
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "token.create", TargetType: "token", TargetID: tok.ID, TargetName: tok.Name,
			Payload: map[string]any{"name": tok.Name, "prefix": tok.Prefix, "user": u.Username, "expires_at": expires}})
		return err
	})
	if err != nil {
		return "", Token{}, wrapUserErr("create token", err)
	}
	return plain, tok.soon(time.Now()), nil
}

// ListTokens returns userID's tokens, newest first.
func (s *Service) ListTokens(ctx context.Context, userID string) ([]Token, error) {
	if !uuidtext.Canonical(userID) {
		return nil, nil
	}
	// Every token that is not revoked (at most MaxLiveTokens), and the newest revoked ones.
	rows, err := s.pool.Query(ctx, `/* auth.ListTokens */ SELECT `+tokenColumns+` FROM api_tokens
		WHERE user_id = $1::uuid AND (revoked_at IS NULL OR id IN (SELECT id FROM api_tokens
			WHERE user_id = $1::uuid AND revoked_at IS NOT NULL ORDER BY created_at DESC LIMIT $2))
		ORDER BY created_at DESC`, userID, revokedListed)
	if err != nil {
		return nil, fmt.Errorf("auth: list tokens: %w", err)
	}
	toks, err := pgx.CollectRows(rows, pgx.RowToStructByName[Token])
	if err != nil {
		return nil, fmt.Errorf("auth: list tokens: %w", err)
	}
	now := time.Now()
	for i := range toks {
		toks[i] = toks[i].soon(now)
	}
	return toks, nil
}

// OthersTokensListed bounds ListOthersTokens: the newest this many are listed, and the
// rest only counted.
const OthersTokensListed = 200

// ErrTokenManagesTokens: a leaked token must not be able to find, and so keep track of,
// the tokens of everyone else (tokens never manage tokens).
var ErrTokenManagesTokens = fault.Forbidden("an API token cannot list other people's API tokens: sign in to do it")

// OwnedToken is a token with its owner's username, for a person who manages users.
type OwnedToken struct {
	Token
	Owner string `db:"owner" json:"owner"`
}

// ListOthersTokens returns live tokens (not revoked, not expired) of other people,
// newest first, at most OthersTokensListed, and how many there are in all: of userID
// when given, else of everyone but p. Only a person who manages users may: an
// administrator answering a compromised account.
func (s *Service) ListOthersTokens(ctx context.Context, p *Principal, userID string) ([]OwnedToken, int, error) {
	if p != nil && p.Kind == audit.ActorToken {
		return nil, 0, ErrTokenManagesTokens
	}
	if !p.Can(PermUsers) {
		return nil, 0, fault.Forbidden("only a person who manages users may list other people's API tokens")
	}
	if userID != "" && !uuidtext.Canonical(userID) {
		return nil, 0, verr.New("user", "must be a user id")
	}
	// count(*) OVER () is taken before LIMIT: the total of every matching token.
	rows, err := s.pool.Query(ctx, `/* auth.ListOthersTokens */ SELECT t.id::text AS id, t.user_id::text AS user_id, t.name, t.prefix,
			t.created_at, t.last_used_at, t.expires_at, t.revoked_at, u.username AS owner, count(*) OVER () AS total
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
		  AND CASE WHEN $1 = '' THEN t.user_id <> $2::uuid ELSE t.user_id = NULLIF($1, '')::uuid END
		ORDER BY t.created_at DESC, t.id LIMIT $3`, userID, p.User.ID, OthersTokensListed)
	if err != nil {
		return nil, 0, fmt.Errorf("auth: list others' tokens: %w", err)
	}
	type row struct {
		OwnedToken
		Total int `db:"total"`
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return nil, 0, fmt.Errorf("auth: list others' tokens: %w", err)
	}
	now, total := time.Now(), 0
	toks := make([]OwnedToken, len(rs))
	for i, r := range rs {
		toks[i], total = r.OwnedToken, r.Total
		toks[i].Token = toks[i].soon(now)
	}
	return toks, total, nil
}

// errTokenRevokesOthers: an API token, even an administrator's, revokes no one else's
// tokens (tokens never manage tokens); its own user's it may, as its user may.
var errTokenRevokesOthers = ErrTokenManagesTokens.Withf("an API token cannot revoke other people's API tokens: sign in to do it")

// RevokeToken revokes a token. ownerID limits it to that user's tokens; an empty ownerID
// (an administrator) may revoke any. An API token actor, even an administrator's, may
// revoke only its own user's tokens (else ErrTokenManagesTokens). Revoking twice is not
// an error.
func (s *Service) RevokeToken(ctx context.Context, actor audit.Actor, tokenID, ownerID string) (Token, error) {
	var tok Token
	if !uuidtext.Canonical(tokenID) || ownerID != "" && !uuidtext.Canonical(ownerID) {
		return Token{}, ErrTokenNotFound // another spelling names no token
	}
	byToken := actor.Kind == audit.ActorToken
	if byToken && ownerID != "" && ownerID != actor.ID {
		return Token{}, errTokenRevokesOthers
	}
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `/* auth.RevokeToken.get */ SELECT `+tokenColumns+` FROM api_tokens
			WHERE id = $1::uuid AND ($2 = '' OR user_id = $2::uuid) FOR UPDATE`, tokenID, ownerID)
		if err != nil {
			return err
		}
		if tok, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Token]); errors.Is(err, pgx.ErrNoRows) {
			return ErrTokenNotFound
		} else if err != nil {
			return err
		}
		// Checked here, not in the query: a leaked administrator's token is told it may
		// not, rather than that the token does not exist.
		if byToken && tok.UserID != actor.ID {
			return errTokenRevokesOthers
		}
		// An administrator revoking someone else's token: the audit row and the event
		// name whose it was.
		var owner string
		if err := tx.QueryRow(ctx, `/* auth.RevokeToken.owner */ SELECT username FROM users WHERE id = $1::uuid`, tok.UserID).Scan(&owner); err != nil {
			return err
		}
		if tok.RevokedAt != nil {
			return nil
		}
		revoked, err := revokeTokens(ctx, tx, "id = $1::uuid", tokenID)
		if err != nil {
			return err
		}
		if len(revoked) != 1 { // the row is locked above, and was not revoked
			return fmt.Errorf("revoked %d rows, want 1", len(revoked))
		}
		tok.RevokedAt = revoked[0].RevokedAt
		if _, err = audit.Append(ctx, tx, tokenRevokeEntry(actor, tok, owner, "")); err != nil {
			return err
		}
		// Other replicas forget the token (Follow); live connections it opened end.
		_, err = events.TokenRevoked.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: tok.UserID, Username: owner, Reason: "API token revoked"})
		return err
	})
	if err != nil {
		return Token{}, wrapUserErr("revoke token", err)
	}
	s.tokens.clear()
	return tok, nil
}

// revokeTokens revokes, inside tx, the tokens not revoked yet that match where (SQL
// over api_tokens with args), and returns them oldest first. The caller audits each
// (tokenRevokeEntry) once its rows are all written, and clears the token cache after
// the commit: RevokeToken, and UpdateUser disabling a user.
func revokeTokens(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]Token, error) {
	rows, err := tx.Query(ctx, `/* auth.revokeTokens */ UPDATE api_tokens SET revoked_at = now()
		WHERE revoked_at IS NULL AND (`+where+`) RETURNING `+tokenColumns, args...)
	if err != nil {
		return nil, err
	}
	toks, err := pgx.CollectRows(rows, pgx.RowToStructByName[Token])
	if err != nil {
		return nil, err
	}
	slices.SortFunc(toks, func(a, b Token) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return toks, nil
}

// tokenRevokeEntry is the audit entry of tok's revocation by actor; owner is the
// token's user's name, reason (when not empty) why it was revoked without being named.
func tokenRevokeEntry(actor audit.Actor, tok Token, owner, reason string) audit.Entry {
	payload := map[string]any{"name": tok.Name, "prefix": tok.Prefix, "user": owner}
	if reason != "" {
		payload["reason"] = reason
	}
	return audit.Entry{Actor: actor, Action: "token.revoke", TargetType: "token", TargetID: tok.ID, TargetName: tok.Name, Payload: payload}
}

// AuthenticateToken returns the principal for a bearer token, or ErrUnauthenticated when
// it is unknown, revoked, expired, or its user is disabled. A token seen lately is
// answered from memory (tokenCache).
func (s *Service) AuthenticateToken(ctx context.Context, plain string) (*Principal, error) {
	if !strings.HasPrefix(plain, apiTokenPrefix) {
		return nil, ErrUnauthenticated
	}
	hash := hashToken(plain)
	now := time.Now()
	e, gen := s.tokens.get(string(hash), now)
	if e == nil {
		var err error
		if e, err = s.lookupToken(ctx, hash); err != nil {
			return nil, err
		}
		s.tokens.put(gen, string(hash), e)
	}
	// last_used_at to the minute: one write per token-minute, not one per call.
	if s.tokens.touch(e, now) {
		if _, err := s.pool.Exec(ctx, `/* auth.AuthenticateToken.touch */ UPDATE api_tokens SET last_used_at = now() WHERE id = $1::uuid`, e.p.TokenID); err != nil {
			s.log.Warn("auth: touch token", "err", err)
		}
	}
	p := e.p
	return &p, nil
}

func (s *Service) lookupToken(ctx context.Context, hash []byte) (*cachedToken, error) {
	rows, err := s.pool.Query(ctx, `/* auth.AuthenticateToken */
		SELECT u.id::text AS id, u.username, u.display_name, u.role, u.password_hash, u.disabled_at, u.last_login_at,
		       u.created_at, u.updated_at, t.id::text AS token_id, t.name AS token_name, t.last_used_at, t.expires_at,
		       t.created_at AS token_created_at
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
		  AND u.disabled_at IS NULL`, hash)
	if err != nil {
		return nil, fmt.Errorf("auth: authenticate token: %w", err)
	}
	type row struct {
		User
		TokenID        string     `db:"token_id"`
		TokenName      string     `db:"token_name"`
		LastUsedAt     *time.Time `db:"last_used_at"`
		ExpiresAt      *time.Time `db:"expires_at"`
		TokenCreatedAt time.Time  `db:"token_created_at"`
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[row])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("auth: authenticate token: %w", err)
	}
	pr := Principal{User: r.User, Kind: audit.ActorToken, TokenID: r.TokenID, TokenName: r.TokenName, TokenExpiresAt: r.ExpiresAt}
	if r.ExpiresAt != nil {
		warn := WarnFrom(r.TokenCreatedAt, *r.ExpiresAt)
		pr.TokenWarnFrom = &warn
	}
	e := &cachedToken{p: pr, expires: r.ExpiresAt, fetched: time.Now()}
	if r.LastUsedAt != nil {
		e.lastUsed = *r.LastUsedAt
	}
	return e, nil
}

// CountTokens returns the number of active tokens: not revoked, not expired, and of a
// user not disabled (whose tokens do not sign in).
func (s *Service) CountTokens(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `/* auth.CountTokens */
		SELECT count(*) FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()) AND u.disabled_at IS NULL`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("auth: count tokens: %w", err)
	}
	return n, nil
}

// Days is an ExpiresInDays of n days (0: never).
func Days(n int) *int { return &n }

// ExpiringTokens lists userID's active tokens whose warning time (WarnFrom) has come,
// soonest first: what the owner is warned about on every page.
func (s *Service) ExpiringTokens(ctx context.Context, userID string) ([]Token, error) {
	if !uuidtext.Canonical(userID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `/* auth.ExpiringTokens */ SELECT `+tokenColumns+` FROM api_tokens
		WHERE user_id = $1::uuid AND revoked_at IS NULL AND expires_at > now() AND expires_at <= now() + $2::interval
		ORDER BY expires_at`, userID, ExpiryWarning)
	if err != nil {
		return nil, fmt.Errorf("auth: expiring tokens: %w", err)
	}
	toks, err := pgx.CollectRows(rows, pgx.RowToStructByName[Token])
	if err != nil {
		return nil, fmt.Errorf("auth: expiring tokens: %w", err)
	}
	// The SQL bounds the window by ExpiryWarning; WarnFrom, the one rule, says the rest.
	now := time.Now()
	out := toks[:0]
	for _, t := range toks {
		if t = t.soon(now); t.ExpiresSoon {
			out = append(out, t)
		}
	}
	return out, nil
}

// TokenDefaultTTL is the lifetime of a token created without an expiry (0: none).
func (s *Service) TokenDefaultTTL() time.Duration { return s.opts.TokenDefaultTTL }
