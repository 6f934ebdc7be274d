package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
)

// SessionsTopic is the event topic of sign-ins and sign-outs: events.SessionsTopic,
// which a replay reads through an index of its own (events.SinceAbout).
const SessionsTopic = events.SessionsTopic

// sessionTokenPrefix marks session cookies, so one is never mistaken for an API token.
const sessionTokenPrefix = "tws_"

// LoginRequest is a sign-in attempt.
type LoginRequest struct {
	Username, Password string
	IP, UserAgent      string
	RequestID          string
	// OldSession is the session cookie the browser still sent, if any: it is ended, so
	// every sign-in gets a fresh session id (no session fixation).
	OldSession string
	// Device is the device cookie the browser sent, if any (devices.go): one of this
	// account's lets it sign in while the account is throttled for failures from all
	// addresses, and is renewed by the sign-in.
	Device string
}

// Session is a new session; Token goes into the cookie and is never stored.
type Session struct {
	Token     string
	User      User
	ExpiresAt time.Time
	// Device is the device cookie to give the browser (until DeviceTTL from now), set
	// by Login only: the one it sent when that is this user's, else a new one.
	Device string
}

// SessionEvent is the payload of every event on SessionsTopic (events.Session).
type SessionEvent = events.Session

// Login checks a username and password and starts a session. Failures are recorded for
// throttling and audited; after too many, it returns a Throttled fault without checking:
// from this address for the account or for all accounts, or, unless the request brings
// one of the account's device cookies, for the account from all addresses.
//
// Attempts wait in memory, not on a pool connection, to be admitted: at most 8 sign-in
// transactions run at once in the process, one at a time per address; an address with
// 16 attempts in flight or waiting, or 256 waiting overall, is refused at once with a
// Throttled fault (scope "address" or "server"), so a flood cannot take the pool.
func (s *Service) Login(ctx context.Context, req LoginRequest) (Session, error) {
	// Nobody's username is longer than 48 bytes; keeping what is recorded of a failed
	// attempt short stops anonymous callers from writing bulk into the audit log.
	username := truncate(NormalizeUsername(req.Username), 64)
	// A browser's User-Agent may carry any bytes; what is stored of it is text.
	agent := truncate(strings.ToValidUTF8(req.UserAgent, "\uFFFD"), 300)
	from := throttleKey(req.IP)
	actor := audit.Actor{Kind: audit.ActorAnonymous, Name: username, IP: req.IP, RequestID: req.RequestID}
	release, err := s.admitAttempt(ctx, from, req.Device, "login")
	if err != nil {
		return Session{}, err
	}
	defer release()
	var sess Session
	var loginErr error
	taken := 0 // the failed sign-ins held back that this attempt's entry counts
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		if err := lockAttempt(ctx, tx, "Login", username, from); err != nil {
			return err
		}
		var cookie []byte // the device cookie's hash
		if req.Device != "" {
			cookie = hashToken(req.Device)
		}
		terr, err := s.throttled(ctx, tx, username, from)
		if err == nil && terr != nil {
			if th, _ := terr.Details.(Throttle); th.Scope == ScopeNetwork {
				// A wide IPv6 network's failures (a carrier's, an office's) are not the
				// owner's: their own browser passes, as it passes the account's limit
				// below; its /64 and the cookie itself still count its own failures.
				var known bool
				if known, err = knownDevice(ctx, tx, username, cookie); known {
					terr = nil
				}
			}
		}
		if err == nil && terr == nil {
			terr, err = s.throttledAnywhere(ctx, tx, username, cookie)
		}
		if err != nil {
			return err
		} else if terr != nil {
			// Refused without checking the password. Not audited: the failure that
			// started the throttling was, and auditing every refused attempt would let an
			// anonymous caller grow the append-only log without bound.
			loginErr = terr
			th, _ := ThrottleOf(terr)
			name, err := nameToKeep(ctx, tx, username)
			if err != nil {
				return err
			}
			s.log.Warn("auth: sign-in refused while throttled", "username", name, "ip", req.IP, "scope", th.Scope)
			return nil
		}
		// The row stays locked while the password is checked and the session made: a
		// password reset or change, or a disable, that commits meanwhile would miss the
		// new session (it deletes only committed ones); locked, it waits and ends it.
		u, err := getUser(ctx, tx, "username = $1", username, " FOR NO KEY UPDATE")
		found := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		hash := dummyHash()
		if found {
			hash = u.PasswordHash
		}
		ok, herr := VerifyPassword(hash, req.Password)
		if herr != nil {
			s.log.Error("auth: stored password hash is malformed", "user", username, "err", herr)
		}
		reason := ""
		switch {
		case !found:
			reason = "unknown user"
		case !ok:
			reason = "wrong password"
		case u.Disabled():
			reason = "user disabled"
		}
		if reason != "" {
			loginErr = ErrInvalidCredentials
			if err := recordFailure(ctx, tx, username, from); err != nil {
				return err
			}
			if found {
				if err := s.noteThrottledAnywhere(ctx, tx, u); err != nil {
					return err
				}
			} else if _, _, _, err := s.failuresAnywhere(ctx, tx, username); err != nil {
				// The same round trip as for an account's failure, answer unused.
				return err
			}
			name := username
			if !found {
				name = unknownName(username)
				actor.Name = name
			}
			targetID := name
			if found {
				targetID = u.ID
				actor.ID = u.ID
			}
			// Counted above for throttling whatever happens; audited within a budget, so
			// that many addresses cannot grow the append-only log without bound.
			ok, withheld := s.loginAudit.Take(from, true)
			if !ok {
				return nil
			}
			taken = withheld
			payload := map[string]any{"username": name, "reason": reason}
			if withheld > 0 {
				payload["withheld_before"] = withheld // failed sign-ins, from any address, not recorded since the last one that was
			}
			_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.login_failed", TargetType: "user", TargetID: targetID, TargetName: name,
				Payload: payload, Result: audit.ResultFailure})
			return err
		}

		// The browser's previous session ends here, so every sign-in gets a fresh
		// session id. Its row is deleted now and the sign-out audited and announced
		// below, with the rest: rows first, the journal lock last (see UpdateUser).
		var prevID, prevName string
		if req.OldSession != "" {
			err := tx.QueryRow(ctx, `/* auth.Login.rotate */ DELETE FROM sessions s USING users u
				WHERE s.token_hash = $1 AND u.id = s.user_id RETURNING u.id, u.username`, hashToken(req.OldSession)).Scan(&prevID, &prevName)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if err := forgiveFailures(ctx, tx, username, from); err != nil {
			return err
		}
		device, err := keepDevice(ctx, tx, u, req.Device)
		if err != nil {
			return err
		}
		token, hash2 := randomToken(sessionTokenPrefix)
		expires := time.Now().Add(s.opts.SessionTTL)
		if _, err := tx.Exec(ctx, `/* auth.Login.session */
			INSERT INTO sessions (token_hash, user_id, expires_at, ip, user_agent) VALUES ($1, $2, $3, $4, $5)`,
			hash2, u.ID, expires, req.IP, agent); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `/* auth.Login.last */ UPDATE users SET last_login_at = now() WHERE id = $1 RETURNING last_login_at`, u.ID).Scan(&u.LastLoginAt); err != nil {
			return err
		}
		// The previous session's end is announced whoever's it was, so the pages and
		// terminal sockets still on it end at once, not at their next periodic check.
		// When it was someone else's (a shared browser), they are signed out as by
		// Logout: audited too.
		if prevID != "" && prevID != u.ID {
			who := audit.Actor{Kind: audit.ActorUser, ID: prevID, Name: prevName, IP: req.IP, RequestID: actor.RequestID}
			if _, err := audit.Append(ctx, tx, audit.Entry{Actor: who, Action: "user.logout", TargetType: "user", TargetID: prevID, TargetName: prevName,
				Payload: map[string]any{"username": prevName, "reason": "another person signed in on the same browser"}}); err != nil {
				return err
			}
			if _, err := events.SessionEnded.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: prevID, Username: prevName,
				Reason: "another person signed in on the same browser"}); err != nil {
				return err
			}
		} else if prevID != "" {
			if _, err := events.SessionEnded.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: prevID, Username: prevName,
				Reason: "signed in again"}); err != nil {
				return err
			}
		}
		actor.Kind, actor.ID = audit.ActorUser, u.ID
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.login", TargetType: "user", TargetID: u.ID, TargetName: u.Username,
			Payload: map[string]any{"username": u.Username, "user_agent": agent}}); err != nil {
			return err
		}
		if _, err := events.SessionStarted.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: u.ID, Username: u.Username}); err != nil {
			return err
		}
		sess = Session{Token: token, User: u, ExpiresAt: expires, Device: device}
		return nil
	})
	if err != nil {
		// The entry that counted those held back rolled back with the transaction: the
		// count goes back to the budget, for the next entry or the quiet flush to write.
		s.loginAudit.GiveBack(from, true, taken)
		return Session{}, fmt.Errorf("auth: login: %w", err)
	}
	if loginErr != nil {
		return Session{}, loginErr
	}
	s.logins.know(sess.Device)
	return sess, nil
}

// The budget of failed sign-in audit rows: per address (as throttled: an IPv6 /64)
// and for all addresses together, a minute each, with a burst of as many.
const (
	loginAuditPerAddress = 20
	loginAuditTotal      = 120
)

// newLoginAuditLimit counts what it holds back all together (Pooled): an attacker's
// addresses rarely come back, so a count per address would mostly go unreported. When
// no later failed sign-in's entry counts them (the flood stopped, or the server stops),
// an entry of the system's does, after quiet (0: audit.DefaultQuiet) or at Close.
func (s *Service) newLoginAuditLimit(perAddress, total int, now func() time.Time, quiet time.Duration) *audit.PooledLimiter {
	lim := audit.NewLimiter(audit.LimitOptions{PerKey: perAddress, Total: total, Pooled: true, What: "failed sign-ins", Logger: s.log, Now: now})
	return audit.NewPooledLimiter(lim, audit.PooledOptions{Quiet: quiet, WritePooled: func(ctx context.Context, n int) error {
		return audit.AppendAlone(ctx, s.begin, audit.Entry{Actor: audit.System, Action: "user.login_failed", TargetType: "user",
			Payload: map[string]any{"withheld_before": n, "reason": "failed sign-ins held back by the audit budget, and counted by no " +
				"later failed sign-in: none was recorded since"}, Result: audit.ResultFailure})
	}})
}

// Close writes the count of failed sign-ins held back that no entry has counted yet,
// which would otherwise go with the process; the app calls it on shutdown, once no
// sign-in is served. It may be called more than once.
func (s *Service) Close(ctx context.Context) error {
	return s.loginAudit.Close(ctx)
}

// throttleKey is the address failures are counted for: an IPv4 address, or an IPv6
// address's /64 — one network's, since whoever has one IPv6 address usually has
// billions more in the same /64.
func throttleKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if a = a.Unmap(); a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// The wider IPv6 networks whose failed sign-ins are counted as well as their /64's
// (throttleKey), with their limits as multiples of Options.MaxIPFailures: whoever has
// one /64 often has a /56 or a /48 (65,536 /64s, free from tunnel brokers), and at the
// /64's limit alone a /48 could keep every sign-in's password check busy. Two, as
// throttled's query reads them.
var ipv6Networks = []struct{ bits, factor int }{{56, 3}, {48, 5}}

// ScopeNetwork is the scope of a sign-in refused for the failures of the wider IPv6
// network its address is in (ipv6Networks).
const ScopeNetwork = "network"

// networkKeys are the wider networks (ipv6Networks, in order) of the address from,
// a throttleKey: none for an IPv4 address.
func networkKeys(from string) []string {
	p, err := netip.ParsePrefix(from)
	if err != nil || !p.Addr().Is6() || p.Bits() != 64 {
		return nil
	}
	keys := make([]string, len(ipv6Networks))
	for i, n := range ipv6Networks {
		w, _ := p.Addr().Prefix(n.bits)
		keys[i] = w.String()
	}
	return keys
}

// networkRowName is the username of the rows that count a failure of username from
// from for its wider networks. It names both, so a sign-in forgives its own address's
// failures there too, and it is never a name typed or a user's: those are lower-case
// (NormalizeUsername), and it is not, so the counts per account never see these rows.
func networkRowName(username, from string) string {
	return "NETWORK " + from + " " + username
}

// lockAttempt takes, in tx, the locks of an attempt to sign in to username from the
// address from (a throttleKey): one attempt per address, per wider IPv6 network
// (ipv6Networks) and per account at a time, so parallel guesses cannot all slip in
// before the first failure is counted; with the /64's lock alone, attempts from many
// /64s of one /56 or /48 overshot its limit. Always the address's first, then its
// networks' narrowest first, then the account's, so no two attempts deadlock. Login
// and ChangePassword take them; caller names the statement where it waits
// (pg_stat_activity).
func lockAttempt(ctx context.Context, tx pgx.Tx, caller, username, from string) error {
	// For an IPv4 address ($3)[i] is NULL, and pg_advisory_xact_lock(NULL) locks nothing.
	_, err := tx.Exec(ctx, `/* auth.`+caller+`.lock */
		SELECT pg_advisory_xact_lock(hashtextextended('login-ip:' || $2, 0)),
		       pg_advisory_xact_lock(hashtextextended('login-ip:' || ($3::text[])[1], 0)),
		       pg_advisory_xact_lock(hashtextextended('login-ip:' || ($3::text[])[2], 0)),
		       pg_advisory_xact_lock(hashtextextended('login:' || $1, 0))`,
		username, from, networkKeys(from))
	return err
}

// forgiveFailures clears the account's recorded failures from this address (and its
// networks' rows for the account) once it has given the right password. Only this
// address's are forgiven: another address guessing at the account keeps its count,
// however often the owner signs in.
func forgiveFailures(ctx context.Context, tx pgx.Tx, username, from string) error {
	_, err := tx.Exec(ctx, `/* auth.forgiveFailures */ DELETE FROM login_failures
		WHERE (username = $1 AND ip = $2) OR (username = $3 AND ip = ANY($4::text[]))`,
		username, from, networkRowName(username, from), networkKeys(from))
	return err
}

// recordFailure counts a failed sign-in to username from the address from (a
// throttleKey), and for an IPv6 address for each of its wider networks.
func recordFailure(ctx context.Context, tx pgx.Tx, username, from string) error {
	_, err := tx.Exec(ctx, `/* auth.recordFailure */ INSERT INTO login_failures (username, ip)
		SELECT $1, $2 UNION ALL SELECT $3, unnest($4::text[])`, username, from, networkRowName(username, from), networkKeys(from))
	return err
}

// throttled returns a Throttled fault when this address has too many recent failures
// for this account, or for all accounts together, or its wider IPv6 networks do
// (ipv6Networks). Failures from other addresses do not
// count here: an attacker slows down their own address, never the account's owner
// signing in from theirs (issue #17, finding 7). Those of all addresses together are
// throttledAnywhere's, which the owner's browsers pass with their device cookies.
func (s *Service) throttled(ctx context.Context, q db.Querier, username, ip string) (*fault.Error, error) {
	// For each limit, the limit-th newest failure in the window: while it is there the
	// limit is reached, and when it leaves the window the count is under it again
	// (throttledAnywhere's rule). The oldest failure told too short a wait whenever more
	// than the limit were counted.
	var pairNth, ipNth, net0Nth, net1Nth *time.Time
	nets := networkKeys(ip) // none: ($4)[i] is NULL, and matches nothing
	var netLimits [2]int
	for i, n := range ipv6Networks {
		netLimits[i] = s.opts.MaxIPFailures * n.factor
	}
	err := q.QueryRow(ctx, `/* auth.throttled */
		SELECT (SELECT at FROM login_failures WHERE ip = $2 AND username = $1 AND at > now() - $3::interval ORDER BY at DESC OFFSET $5 LIMIT 1),
		       (SELECT at FROM login_failures WHERE ip = $2 AND at > now() - $3::interval ORDER BY at DESC OFFSET $6 LIMIT 1),
		       (SELECT at FROM login_failures WHERE ip = ($4::text[])[1] AND at > now() - $3::interval ORDER BY at DESC OFFSET $7 LIMIT 1),
		       (SELECT at FROM login_failures WHERE ip = ($4::text[])[2] AND at > now() - $3::interval ORDER BY at DESC OFFSET $8 LIMIT 1)`,
		username, ip, s.opts.ThrottleWindow, nets,
		s.opts.MaxAccountFailures-1, s.opts.MaxIPFailures-1, netLimits[0]-1, netLimits[1]-1).Scan(&pairNth, &ipNth, &net0Nth, &net1Nth)
	if err != nil {
		return nil, fmt.Errorf("auth: throttle check: %w", err)
	}
	retry := func(nth *time.Time) time.Duration {
		return max(time.Until(nth.Add(s.opts.ThrottleWindow)), time.Second)
	}
	switch {
	case pairNth != nil:
		return Throttled(retry(pairNth), "account from this address"), nil
	case ip != "" && ipNth != nil:
		return Throttled(retry(ipNth), "address"), nil
	case len(nets) > 0 && net0Nth != nil:
		return Throttled(retry(net0Nth), ScopeNetwork), nil
	case len(nets) > 0 && net1Nth != nil:
		return Throttled(retry(net1Nth), ScopeNetwork), nil
	}
	return nil, nil
}

// Authenticate returns the principal of a session cookie, or ErrUnauthenticated when the
// session does not exist, has expired, sat idle too long, or its user is disabled.
func (s *Service) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if len(token) < len(sessionTokenPrefix) || token[:len(sessionTokenPrefix)] != sessionTokenPrefix {
		return nil, ErrUnauthenticated
	}
	h := hashToken(token)
	rows, err := s.pool.Query(ctx, `/* auth.Authenticate */
		SELECT u.id::text AS id, u.username, u.display_name, u.role, u.password_hash, u.disabled_at, u.last_login_at,
		       u.created_at, u.updated_at, s.expires_at,
		       NOT (s.last_seen_at BETWEEN now() - $3::interval AND now()) AS stale
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = $1 AND s.expires_at > now() AND s.last_seen_at > now() - $2::interval AND u.disabled_at IS NULL`,
		h, s.opts.IdleTimeout, s.touchEvery())
	if err != nil {
		return nil, fmt.Errorf("auth: authenticate: %w", err)
	}
	type row struct {
		User
		ExpiresAt time.Time `db:"expires_at"`
		Stale     bool      `db:"stale"`
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[row])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, fmt.Errorf("auth: authenticate: %w", err)
	}
	// Refresh the idle clock at most once a minute (touchEvery): one write per active
	// user-minute, not one per request. last_seen_at is the database's now(), so it is compared with
	// that only: against this host's clock, a database clock running ahead made it look
	// fresh for ever and an active person was signed out at the idle timeout. One ahead
	// of the database's own clock (stepped back since) is brought back to now, so the
	// idle timeout counts from the last request, not from a time still to come.
	if r.Stale {
		if _, err := s.pool.Exec(ctx, `/* auth.Authenticate.touch */ UPDATE sessions SET last_seen_at = now()
			WHERE token_hash = $1 AND NOT (last_seen_at BETWEEN now() - $2::interval AND now())`, h, s.touchEvery()); err != nil {
			s.log.Warn("auth: touch session", "err", err)
		}
	}
	return &Principal{User: r.User, Kind: audit.ActorUser, SessionID: h, SessionExpiresAt: &r.ExpiresAt}, nil
}

// touchEvery is how often a session's idle clock (last_seen_at) is written at most: once
// a minute, or a quarter of the idle timeout when that is shorter, so that a session in
// use never reaches it between two writes.
func (s *Service) touchEvery() time.Duration { return min(time.Minute, s.opts.IdleTimeout/4) }

// SessionActivity refreshes the idle clock of a session from a long-lived connection,
// which Authenticate, run once at its handshake, does not see: a person typing in a
// terminal's websocket for hours is not idle. Call Seen at each message its person
// sends; it writes at most once per touchEvery (kept in memory, then checked in the
// database as Authenticate checks it). One per connection; safe for concurrent use.
type SessionActivity struct {
	s    *Service
	hash []byte // the session's token hash; nil: an API token, which has no idle clock
	mu   sync.Mutex
	next time.Time
}

// Activity returns the SessionActivity of p's connection.
func (s *Service) Activity(p *Principal) *SessionActivity {
	a := &SessionActivity{s: s}
	if p != nil && p.Kind == audit.ActorUser {
		a.hash = p.SessionID
	}
	return a
}

// Seen notes a message from the connection's person. A session that already ended
// (expired, idle too long, signed out) is not brought back: the connection's next
// check (CurrentRole) ends it.
func (a *SessionActivity) Seen(ctx context.Context) {
	if a == nil || a.hash == nil {
		return
	}
	now := time.Now()
	every := a.s.touchEvery()
	a.mu.Lock()
	due := !now.Before(a.next)
	if due {
		a.next = now.Add(every)
	}
	a.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := a.s.pool.Exec(ctx, `/* auth.SessionActivity.touch */ UPDATE sessions SET last_seen_at = now()
		WHERE token_hash = $1 AND NOT (last_seen_at BETWEEN now() - $2::interval AND now())
		  AND expires_at > now() AND last_seen_at > now() - $3::interval`, a.hash, every, a.s.opts.IdleTimeout); err != nil {
		a.s.log.Warn("auth: touch session from its connection", "err", err)
	}
}

// Logout ends the principal's session.
func (s *Service) Logout(ctx context.Context, p *Principal, actor audit.Actor) error {
	if p == nil || p.SessionID == nil {
		return ErrUnauthenticated
	}
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `/* auth.Logout */ DELETE FROM sessions WHERE token_hash = $1`, p.SessionID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.logout", TargetType: "user", TargetID: p.User.ID, TargetName: p.User.Username,
			Payload: map[string]any{"username": p.User.Username}}); err != nil {
			return err
		}
		_, err = events.SessionEnded.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: p.User.ID, Username: p.User.Username, Reason: "signed out"})
		return err
	})
	if err != nil {
		return fmt.Errorf("auth: logout: %w", err)
	}
	return nil
}

// endUserSessions deletes every session of u inside tx and reports whether there was
// any. The caller announces it (announceSessionsEnded) once its rows are all written:
// an event takes the journal lock, which is taken after row locks, never before.
func endUserSessions(ctx context.Context, tx pgx.Tx, u User) (bool, error) {
	tag, err := tx.Exec(ctx, `/* auth.endUserSessions */ DELETE FROM sessions WHERE user_id = $1`, u.ID)
	if err != nil {
		return false, fmt.Errorf("auth: end sessions: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// announceSessionsEnded tells the pages and terminals on u's sessions that they ended.
func announceSessionsEnded(ctx context.Context, tx pgx.Tx, u User, reason string) error {
	_, err := events.SessionEnded.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: u.ID, Username: u.Username, Reason: reason})
	return err
}

// ActiveUser is a user with at least one live session.
type ActiveUser struct {
	UserID      string    `db:"user_id" json:"user_id"`
	Username    string    `db:"username" json:"username"`
	DisplayName string    `db:"display_name" json:"display_name"`
	Role        Role      `db:"role" json:"role"`
	Sessions    int       `db:"sessions" json:"sessions"`
	LastSeenAt  time.Time `db:"last_seen_at" json:"last_seen_at"`
}

// ActiveUsers lists who is signed in now, most recently active first.
func (s *Service) ActiveUsers(ctx context.Context) ([]ActiveUser, error) {
	rows, err := s.pool.Query(ctx, `/* auth.ActiveUsers */
		SELECT u.id::text AS user_id, u.username, u.display_name, u.role, count(*)::int AS sessions, max(s.last_seen_at) AS last_seen_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.expires_at > now() AND s.last_seen_at > now() - $1::interval AND u.disabled_at IS NULL
		GROUP BY u.id ORDER BY max(s.last_seen_at) DESC, u.username LIMIT 100`, s.opts.IdleTimeout)
	if err != nil {
		return nil, fmt.Errorf("auth: active users: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[ActiveUser])
	if err != nil {
		return nil, fmt.Errorf("auth: active users: %w", err)
	}
	return out, nil
}

// Prune deletes ended sessions, failures older than the throttle window (and the marks
// of accounts throttled before it), and device cookies unused for DeviceTTL.
func (s *Service) Prune(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `/* auth.Prune */
		DELETE FROM sessions WHERE expires_at <= now() OR last_seen_at <= now() - $1::interval`, s.opts.IdleTimeout)
	if err == nil {
		_, err = s.pool.Exec(ctx, `/* auth.Prune.failures */ DELETE FROM login_failures WHERE at <= now() - $1::interval`, s.opts.ThrottleWindow)
	}
	if err == nil {
		_, err = s.pool.Exec(ctx, `/* auth.Prune.throttles */ DELETE FROM login_account_throttles WHERE since <= now() - $1::interval`, s.opts.ThrottleWindow)
	}
	if err == nil {
		_, err = s.pool.Exec(ctx, `/* auth.Prune.devices */ DELETE FROM login_devices WHERE last_used_at <= now() - $1::interval`, DeviceTTL)
	}
	if err != nil {
		return fmt.Errorf("auth: prune: %w", err)
	}
	return nil
}

// truncate cuts s to at most n bytes of valid UTF-8 (PostgreSQL refuses invalid text,
// and headers like User-Agent are whatever the client sends).
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// StillValid reports whether the principal's session or token would still
// authenticate now (long-lived connections re-check it periodically).
func (s *Service) StillValid(ctx context.Context, p *Principal) bool {
	_, err := s.CurrentRole(ctx, p)
	return err == nil
}

// unknownNameKey keys the tags of unknownName. It is random, made once per process and
// kept in memory only: nobody reading the logs or the database, now or from a backup,
// can test a guessed password against a tag, as they could with a key stored anywhere.
// The price: one name's tag differs between replicas and after a restart, so attempts
// are told apart within one process's records only.
var unknownNameKey = func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}()

// unknownName is a name typed to sign in that is nobody's, as the audit log and the
// server's log keep it: never as typed, since it is often a password typed into the
// name's box (one of Toolwarden's own generated passwords looks like a username), and
// the audit log is append-only. A short keyed tag (unknownNameKey) tells whether
// attempts typed the same name, and the length what kind of thing it was.
func unknownName(name string) string {
	m := hmac.New(sha256.New, unknownNameKey)
	m.Write([]byte(name))
	return fmt.Sprintf("(unknown name %x, %d characters)", m.Sum(nil)[:4], utf8.RuneCountInString(name))
}

// nameToKeep is username as a log line keeps it: as typed when it is a user's (it names
// the account attacked), else unknownName. For Login's refusals, which have not read
// the user's row.
func nameToKeep(ctx context.Context, q db.Querier, username string) (string, error) {
	var known bool
	if err := q.QueryRow(ctx, `/* auth.nameToKeep */ SELECT EXISTS (SELECT 1 FROM users WHERE username = $1)`, username).Scan(&known); err != nil {
		return "", fmt.Errorf("auth: is it a user's name: %w", err)
	}
	if known {
		return username, nil
	}
	return unknownName(username), nil
}

// ErrNoLongerValid is CurrentRole's answer for a session or token that would no longer
// authenticate. Any other error is the database's: the caller cannot tell, and must not
// sign a person out for it.
var ErrNoLongerValid = errors.New("auth: the session or token no longer authenticates")

// CurrentRole re-reads the principal's role. It returns ErrNoLongerValid when the
// session or token would no longer authenticate (ended, expired, revoked, user disabled).
func (s *Service) CurrentRole(ctx context.Context, p *Principal) (Role, error) {
	if p == nil {
		return "", ErrNoLongerValid
	}
	var role Role
	var err error
	if p.Kind == audit.ActorToken {
		if !uuidtext.Canonical(p.TokenID) {
			return "", ErrNoLongerValid
		}
		err = s.pool.QueryRow(ctx, `/* auth.CurrentRole.token */
			SELECT u.role FROM api_tokens t JOIN users u ON u.id = t.user_id
			WHERE t.id = $1::uuid AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()) AND u.disabled_at IS NULL`,
			p.TokenID).Scan(&role)
	} else {
		err = s.pool.QueryRow(ctx, `/* auth.CurrentRole.session */
			SELECT u.role FROM sessions s JOIN users u ON u.id = s.user_id
			WHERE s.token_hash = $1 AND s.expires_at > now() AND s.last_seen_at > now() - $2::interval AND u.disabled_at IS NULL`,
			p.SessionID, s.opts.IdleTimeout).Scan(&role)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNoLongerValid
	}
	if err != nil {
		return "", fmt.Errorf("auth: re-read the role: %w", err)
	}
	return role, nil
}
