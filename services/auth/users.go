package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// User is a person or agent that can sign in.
type User struct {
	ID           string     `db:"id" json:"id"`
	Username     string     `db:"username" json:"username"`
	DisplayName  string     `db:"display_name" json:"display_name"`
	Role         Role       `db:"role" json:"role"`
	PasswordHash string     `db:"password_hash" json:"-"`
	DisabledAt   *time.Time `db:"disabled_at" json:"disabled_at"`
	LastLoginAt  *time.Time `db:"last_login_at" json:"last_login_at"`
	CreatedAt    time.Time  `db:"created_at" json:"created_at"`
	UpdatedAt    time.Time  `db:"updated_at" json:"updated_at"`
}

// Disabled reports whether the user may not sign in.
func (u User) Disabled() bool { return u.DisabledAt != nil }

// Name is the display name, or the username when there is none.
func (u User) Name() string {
	if u.DisplayName != "" {
		return u.DisplayName
	}
	return u.Username
}

const userColumns = `id::text AS id, username, display_name, role, password_hash, disabled_at, last_login_at, created_at, updated_at`

var usernamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,47}$`)

// NormalizeUsername trims and lower-cases a username as typed.
func NormalizeUsername(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// NewUser is the input for CreateUser.
type NewUser struct {
	Username    string `json:"username"`
	DisplayName string `json:"display_name"`
	Role        Role   `json:"role"`
	Password    string `json:"password"` // empty: generate one, returned by CreateUser
}

// CreateUser adds a user. When in.Password is empty a random one is generated and
// returned (to be shown once). Problems with the input come back as *verr.Error.
func (s *Service) CreateUser(ctx context.Context, actor audit.Actor, in NewUser) (User, string, error) {
	if actor.Kind == audit.ActorToken {
		return User{}, "", ErrTokenGivesAccess
	}
	in.Username = NormalizeUsername(in.Username)
	in.DisplayName = strings.TrimSpace(in.DisplayName)
	generated := ""
	if in.Password == "" {
		generated = GeneratePassword()
		in.Password = generated
	}
	var ve verr.Error
	if !usernamePattern.MatchString(in.Username) {
		ve.Add("username", "must be 1–48 characters: lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if utf8.RuneCountInString(in.DisplayName) > 100 {
		ve.Add("display_name", "must be at most 100 characters")
	} else if why := badLabel(in.DisplayName); why != "" {
		ve.Add("display_name", why)
	}
	if !in.Role.Valid() {
		ve.Add("role", "must be one of "+roleList())
	}
	if msg := checkPassword(in.Username, in.Password); msg != "" {
		ve.Add("password", msg)
	}
	if err := ve.Err(); err != nil {
		return User{}, "", err
	}
	hash, err := HashPassword(in.Password)
	if err != nil {
		return User{}, "", err
	}
	var u User
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `/* auth.CreateUser */
			INSERT INTO users (username, display_name, role, password_hash) VALUES ($1, $2, $3, $4)
			RETURNING `+userColumns, in.Username, in.DisplayName, in.Role, hash)
		if err != nil {
			return err
		}
		if u, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User]); err != nil {
			if db.IsUniqueViolation(err, "users_username_key") {
				return verr.New("username", fmt.Sprintf("%q is already taken", in.Username))
			}
			return err
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.create", TargetType: "user", TargetID: u.ID, TargetName: u.Username,
			Payload: map[string]any{"username": u.Username, "role": u.Role, "display_name": u.DisplayName}})
		return err
	})
	if err != nil {
		return User{}, "", wrapUserErr("create user", err)
	}
	return u, generated, nil
}

// badLabel says why s cannot be a name people read (a display name, a token's name), or
// "": text PostgreSQL cannot store, or a control or invisible format character, which a
// terminal acts on (ESC), forges a line of a log (a newline) or nobody sees (U+202E
// reversing what follows, a zero-width space making two names look alike). Names read
// from configuration files are held to the same (configcode's badName).
func badLabel(s string) string { return textcheck.Readable(s, "a name", textcheck.AllowJoiners) }

func roleList() string {
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// ListUsers returns every user, by username.
func (s *Service) ListUsers(ctx context.Context) ([]User, error) {
	rows, err := s.pool.Query(ctx, `/* auth.ListUsers */ SELECT `+userColumns+` FROM users ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("auth: list users: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowToStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("auth: list users: %w", err)
	}
	return users, nil
}

// GetUser returns the user with id, or ErrNotFound.
func (s *Service) GetUser(ctx context.Context, id string) (User, error) {
	if !uuidtext.Canonical(id) {
		return User{}, ErrNotFound // another spelling names no user
	}
	return getUser(ctx, s.pool, "id = $1::uuid", id, "")
}

// GetUserByName returns the user with username, or ErrNotFound.
func (s *Service) GetUserByName(ctx context.Context, username string) (User, error) {
	return getUser(ctx, s.pool, "username = $1", NormalizeUsername(username), "")
}

func getUser(ctx context.Context, q db.Querier, where string, arg any, suffix string) (User, error) {
	rows, err := q.Query(ctx, `/* auth.getUser */ SELECT `+userColumns+` FROM users WHERE `+where+suffix, arg)
	if err != nil {
		return User{}, fmt.Errorf("auth: get user: %w", err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("auth: get user: %w", err)
	}
	return u, nil
}

// lockUser loads the user FOR UPDATE inside tx.
func lockUser(ctx context.Context, tx pgx.Tx, id string) (User, error) {
	if !uuidtext.Canonical(id) {
		return User{}, ErrNotFound
	}
	return getUser(ctx, tx, "id = $1::uuid", id, " FOR UPDATE")
}

// lockForAdminChange loads the user FOR UPDATE after taking the lock that serializes
// every change which could leave no active admin (demote, disable), so two of them on
// different admins neither both succeed nor deadlock.
func lockForAdminChange(ctx context.Context, tx pgx.Tx, id string) (User, error) {
	if _, err := tx.Exec(ctx, `/* auth.lockAdmins */ SELECT pg_advisory_xact_lock(hashtextextended('auth:admins', 0))`); err != nil {
		return User{}, err
	}
	return lockUser(ctx, tx, id)
}

// keepAnAdmin refuses to take u out of the active admins when no other is left.
func keepAnAdmin(ctx context.Context, tx pgx.Tx, u User) error {
	if u.Role != RoleAdmin || u.Disabled() {
		return nil
	}
	var others int
	if err := tx.QueryRow(ctx, `/* auth.keepAnAdmin */
		SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL AND id <> $1`, u.ID).Scan(&others); err != nil {
		return err
	}
	if others == 0 {
		return errLastAdmin
	}
	return nil
}

var errLastAdmin = conflict("this is the last active administrator: make another user an administrator first")

// UserChange is a change to a user; nil fields stay as they are.
type UserChange struct {
	Role     *Role `json:"role"`
	Disabled *bool `json:"disabled"`
}

// SetRole changes a user's role.
func (s *Service) SetRole(ctx context.Context, actor audit.Actor, id string, role Role) (User, error) {
	return s.UpdateUser(ctx, actor, id, UserChange{Role: &role})
}

// SetDisabled disables or re-enables a user. Disabling ends all their sessions at once
// and revokes their live API tokens (each audited as token.revoke): re-enabling brings
// none of them back.
func (s *Service) SetDisabled(ctx context.Context, actor audit.Actor, id string, disabled bool) (User, error) {
	return s.UpdateUser(ctx, actor, id, UserChange{Disabled: &disabled})
}

// UpdateUser applies a role change and/or a disable in one transaction: either all of
// it happens or none of it. It refuses to leave no active administrator, and refuses
// to let anyone disable themselves.
func (s *Service) UpdateUser(ctx context.Context, actor audit.Actor, id string, ch UserChange) (User, error) {
	if actor.Kind == audit.ActorToken && (ch.Role != nil || ch.Disabled != nil && !*ch.Disabled) {
		return User{}, ErrTokenGivesAccess
	}
	if ch.Role != nil && !ch.Role.Valid() {
		return User{}, verr.New("role", "must be one of "+roleList())
	}
	var u User
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		if u, err = lockForAdminChange(ctx, tx, id); err != nil {
			return err
		}
		// Every row is written before the audit entries and events, which take the
		// journal lock: Logout and sign-in delete a session row and then take it, so
		// taking it first and then waiting on their row would deadlock against them.
		var entries []audit.Entry
		sessionsEnded := false
		if ch.Role != nil && *ch.Role != u.Role {
			if err := keepAnAdmin(ctx, tx, u); err != nil {
				return err
			}
			old := u.Role
			if err := tx.QueryRow(ctx, `/* auth.SetRole */ UPDATE users SET role = $2, updated_at = now() WHERE id = $1::uuid RETURNING updated_at`,
				id, *ch.Role).Scan(&u.UpdatedAt); err != nil {
				return err
			}
			u.Role = *ch.Role
			entries = append(entries, audit.Entry{Actor: actor, Action: "user.role_change", TargetType: "user", TargetID: id, TargetName: u.Username,
				Payload: map[string]any{"username": u.Username, "from": old, "to": u.Role}})
		}
		if ch.Disabled != nil && *ch.Disabled != u.Disabled() {
			disable := *ch.Disabled
			if disable {
				if actor.ID == id {
					return conflict("you cannot disable your own account")
				}
				if err := keepAnAdmin(ctx, tx, u); err != nil {
					return err
				}
			}
			if err := tx.QueryRow(ctx, `/* auth.SetDisabled */
				UPDATE users SET disabled_at = CASE WHEN $2 THEN now() END, updated_at = now() WHERE id = $1::uuid
				RETURNING disabled_at, updated_at`, id, disable).Scan(&u.DisabledAt, &u.UpdatedAt); err != nil {
				return err
			}
			action := "user.enable"
			var revoked []Token
			if disable {
				action = "user.disable"
				if sessionsEnded, err = endUserSessions(ctx, tx, u); err != nil {
					return err
				}
				// Their live API tokens are revoked, not only refused while the account is
				// disabled: re-enabling it must not bring back one a thief made with a
				// stolen session. Expired ones work no more anyway and are left as they are.
				if revoked, err = revokeTokens(ctx, tx, "user_id = $1::uuid AND (expires_at IS NULL OR expires_at > now())", id); err != nil {
					return err
				}
			}
			payload := map[string]any{"username": u.Username}
			if disable {
				payload["tokens_revoked"] = len(revoked)
			}
			entries = append(entries, audit.Entry{Actor: actor, Action: action, TargetType: "user", TargetID: id, TargetName: u.Username,
				Payload: payload})
			for _, tok := range revoked {
				entries = append(entries, tokenRevokeEntry(actor, tok, u.Username, "user disabled"))
			}
		}
		if len(entries) == 0 {
			return nil
		}
		// One write of the chain: a disable may revoke up to MaxLiveTokens tokens.
		if _, err := audit.AppendBatch(ctx, tx, entries); err != nil {
			return err
		}
		if sessionsEnded {
			if err := announceSessionsEnded(ctx, tx, u, "user disabled"); err != nil {
				return err
			}
		}
		// Live connections of this user re-check what they may still see.
		_, err = events.UserChanged.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: u.ID, Username: u.Username, Reason: "account changed"})
		return err
	})
	if err != nil {
		return User{}, wrapUserErr("update user", err)
	}
	s.tokens.clear() // the user's tokens act with the new role, or not at all
	return u, nil
}

// ResetPassword sets a new password for a user (a random one, returned, when pw is
// empty) and ends their sessions.
func (s *Service) ResetPassword(ctx context.Context, actor audit.Actor, id, pw string) (string, error) {
	if actor.Kind == audit.ActorToken {
		return "", ErrTokenGivesAccess
	}
	if actor.Kind == audit.ActorUser && actor.ID == id {
		// Without the current password, a session left open (or stolen) would take the
		// account over: one's own password changes where it is asked for.
		return "", conflict("Change your own password under your user menu (Change password): it asks for your current one.")
	}
	generated := ""
	if pw == "" {
		generated = GeneratePassword()
		pw = generated
	}
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		u, err := lockUser(ctx, tx, id)
		if err != nil {
			return err
		}
		if msg := checkPassword(u.Username, pw); msg != "" {
			return verr.New("password", msg)
		}
		hash, err := HashPassword(pw)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `/* auth.ResetPassword */ UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1::uuid`, id, hash); err != nil {
			return err
		}
		ended, err := endUserSessions(ctx, tx, u)
		if err != nil {
			return err
		}
		if err := endDevices(ctx, tx, u); err != nil {
			return err
		}
		// The journal lock last, after every row (as in UpdateUser).
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.password_reset", TargetType: "user", TargetID: id, TargetName: u.Username,
			Payload: map[string]any{"username": u.Username, "generated": generated != ""}}); err != nil {
			return err
		}
		if !ended {
			return nil
		}
		return announceSessionsEnded(ctx, tx, u, "password reset")
	})
	if err != nil {
		return "", wrapUserErr("reset password", err)
	}
	return generated, nil
}

func wrapUserErr(op string, err error) error {
	if _, ok := fault.As(err); ok { // not found, bad input, a conflict: the caller's to see as is
		return err
	}
	return fmt.Errorf("auth: %s: %w", op, err)
}

// CountUsers returns the number of users and of enabled users.
func (s *Service) CountUsers(ctx context.Context) (total, active int, err error) {
	err = s.pool.QueryRow(ctx, `/* auth.CountUsers */ SELECT count(*), count(*) FILTER (WHERE disabled_at IS NULL) FROM users`).Scan(&total, &active)
	if err != nil {
		err = fmt.Errorf("auth: count users: %w", err)
	}
	return total, active, err
}

// Bootstrap creates the first administrator, `admin`, when there are no users at all.
// An empty password means a random one. It returns the password to show once, or ""
// when users already existed.
func (s *Service) Bootstrap(ctx context.Context, password string) (string, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `/* auth.Bootstrap */ SELECT count(*) FROM users`).Scan(&n); err != nil {
		return "", fmt.Errorf("auth: bootstrap: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	_, generated, err := s.CreateUser(ctx, audit.System, NewUser{Username: "admin", Role: RoleAdmin, Password: password})
	var ve *verr.Error
	if errors.As(err, &ve) && ve.For("username") != "" {
		return "", nil // another replica created it first
	}
	if err != nil {
		return "", fmt.Errorf("auth: bootstrap admin: %w", err)
	}
	if generated != "" {
		return generated, nil
	}
	return password, nil
}

// CheckBootstrap says before a start whether Bootstrap would refuse password: on a
// database with no user yet, a password given that the rules refuse is the reason,
// as text; with users there (Bootstrap does nothing) or none given (a random one), "".
func (s *Service) CheckBootstrap(ctx context.Context, password string) (string, error) {
	why := ""
	if password != "" {
		why = checkPassword("admin", password)
	}
	if why == "" {
		return "", nil
	}
	var n int
	if err := s.pool.QueryRow(ctx, `/* auth.CheckBootstrap */ SELECT count(*) FROM users`).Scan(&n); err != nil {
		return "", fmt.Errorf("auth: bootstrap check: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	return why, nil
}

// ChangePassword is a person changing their own password: current must be their
// password now, next must pass the rules of CreateUser. Every session of the user
// ends, the one the change came from too: it goes on as the returned new session
// (as at sign-in), so a copy of its old cookie is signed out. API tokens are not
// touched. Bad input comes back as *verr.Error naming current_password or
// new_password, and changes nothing.
func (s *Service) ChangePassword(ctx context.Context, actor audit.Actor, p *Principal, current, next string) (Session, error) {
	if p == nil || p.Kind != audit.ActorUser || p.SessionID == nil {
		return Session{}, fault.Forbidden("only a person signed in with a browser session may change their password, not an API token")
	}
	// Admitted as a sign-in is (Login): it checks and hashes a password holding the
	// person's row lock, and a flood of them must not take the pool while they wait.
	release, err := s.admitAttempt(ctx, throttleKey(actor.IP), "", "change password")
	if err != nil {
		return Session{}, err
	}
	defer release()
	var refused error // a refusal whose record must still commit
	var sess Session
	from := throttleKey(actor.IP)
	err = db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		// Login's locks (lockAttempt), before the row's as there: a failed sign-in and a
		// wrong current password from one address or network cannot both pass the
		// throttle check below at the limit's last failure. (Usernames never change.)
		if err := lockAttempt(ctx, tx, "ChangePassword", p.User.Username, from); err != nil {
			return err
		}
		u, err := lockUser(ctx, tx, p.User.ID)
		if err != nil {
			return err
		}
		// The session was checked before the row was locked: a disable or a password
		// reset committed meanwhile ended it, and ends this change too.
		var live bool
		if err := tx.QueryRow(ctx, `/* auth.ChangePassword.session */
			SELECT EXISTS (SELECT 1 FROM sessions WHERE token_hash = $1 AND user_id = $2 AND expires_at > now())`, p.SessionID, u.ID).Scan(&live); err != nil {
			return err
		}
		if !live || u.Disabled() {
			return ErrUnauthenticated
		}
		if current == "" {
			return verr.New("current_password", "is required")
		}
		// Guessing the current password through a stolen session is guessing a password:
		// it counts as a failed sign-in, and is throttled like one from its address. The
		// limit of failures from all addresses (throttledAnywhere) is not applied: a live
		// session is proof of a sign-in as a device cookie is, and an owner under attack
		// must still be able to change their password.
		if terr, err := s.throttled(ctx, tx, u.Username, from); err != nil {
			return err
		} else if terr != nil {
			refused = terr
			return nil
		}
		ok, err := VerifyPassword(u.PasswordHash, current)
		if err != nil {
			return err
		}
		if !ok {
			refused = verr.New("current_password", "is not your current password")
			if err := recordFailure(ctx, tx, u.Username, from); err != nil {
				return err
			}
			if err := s.noteThrottledAnywhere(ctx, tx, u); err != nil {
				return err
			}
			_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.password_change", TargetType: "user", TargetID: u.ID, TargetName: u.Username,
				Payload: map[string]any{"username": u.Username, "reason": "wrong current password"}, Result: audit.ResultFailure})
			return err
		}
		if msg := checkPassword(u.Username, next); msg != "" {
			return verr.New("new_password", msg)
		}
		if next == current {
			return verr.New("new_password", "must differ from the current password")
		}
		// The right password from this address forgives its failures, as a sign-in
		// does: the owner's own typos before a change must not lock them out after it.
		if err := forgiveFailures(ctx, tx, u.Username, from); err != nil {
			return err
		}
		hash, err := HashPassword(next)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `/* auth.ChangePassword */ UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1`, u.ID, hash); err != nil {
			return err
		}
		// The device cookies were proof of a sign-in with the old password: they end.
		// This browser, which just gave the current one, gets a new one: during an
		// attack on the account, its next sign-in still gets through.
		if err := endDevices(ctx, tx, u); err != nil {
			return err
		}
		device, err := keepDevice(ctx, tx, u, "")
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `/* auth.ChangePassword.sessions */ DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $2`, u.ID, p.SessionID)
		if err != nil {
			return fmt.Errorf("auth: end other sessions: %w", err)
		}
		// The session the change came from ends as well and goes on under a new id, as
		// at sign-in: whoever copied its cookie is signed out with the other sessions.
		// Same browser, so its user agent carries over.
		var agent string
		if err := tx.QueryRow(ctx, `/* auth.ChangePassword.rotate */ DELETE FROM sessions WHERE token_hash = $1 RETURNING user_agent`,
			p.SessionID).Scan(&agent); errors.Is(err, pgx.ErrNoRows) {
			return ErrUnauthenticated // signed out meanwhile (Logout does not wait on the user's row)
		} else if err != nil {
			return fmt.Errorf("auth: end this session: %w", err)
		}
		token, hash2 := randomToken(sessionTokenPrefix)
		expires := time.Now().Add(s.opts.SessionTTL)
		if _, err := tx.Exec(ctx, `/* auth.ChangePassword.session */
			INSERT INTO sessions (token_hash, user_id, expires_at, ip, user_agent) VALUES ($1, $2, $3, $4, $5)`,
			hash2, u.ID, expires, actor.IP, agent); err != nil {
			return err
		}
		// Always announced: open pages and terminals still on the old id (a copy's among
		// them) end at once, not at their next periodic check.
		if _, err := events.SessionEnded.Publish(ctx, tx, SessionsTopic, SessionEvent{UserID: u.ID, Username: u.Username,
			Reason: "password changed"}); err != nil {
			return err
		}
		u.PasswordHash = hash
		sess = Session{Token: token, User: u, ExpiresAt: expires, Device: device}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "user.password_change", TargetType: "user", TargetID: u.ID, TargetName: u.Username,
			Payload: map[string]any{"username": u.Username, "other_sessions_ended": tag.RowsAffected()}})
		return err
	})
	if err != nil {
		return Session{}, wrapUserErr("change password", err)
	}
	if refused != nil {
		return Session{}, refused
	}
	s.logins.know(sess.Device)
	return sess, nil
}
