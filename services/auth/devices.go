package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
)

// Device cookies (OWASP's "device cookie" against distributed password guessing): a
// browser that signed in to an account is given a long-lived random token bound to that
// account, of which only the hash is stored (login_devices, migration 64). When the
// account has too many failed sign-ins from all addresses together, only a sign-in
// that brings one is still checked; the rest are refused unchecked, so the guessing
// stops and the owner's own browsers still get in.
const (
	deviceTokenPrefix = "twd_"
	// DeviceTTL is how long a device cookie is kept unused: the cookie's lifetime,
	// renewed at each sign-in with it, and the age at which an unused one is dropped.
	DeviceTTL = 180 * 24 * time.Hour
	// maxDevices is how many device cookies one user keeps, the most recently used:
	// the table stays bounded however often someone signs in from new browsers.
	maxDevices = 20
)

// throttledAnywhere returns an AccountThrottled fault when the account has
// MaxAccountFailuresAnywhere failed sign-ins or more in the window, from all addresses
// together, and device (the hash of the device cookie sent, or nil) is not one of that
// account's.
func (s *Service) throttledAnywhere(ctx context.Context, q db.Querier, username string, device []byte) (*fault.Error, error) {
	// The limit-th newest failure in the window: while it is there, the account is at
	// the limit, and when it leaves the window the account is under it again.
	var nth *time.Time
	if err := q.QueryRow(ctx, `/* auth.throttledAnywhere */
		SELECT (SELECT at FROM login_failures WHERE username = $1 AND at > now() - $2::interval ORDER BY at DESC OFFSET $3 LIMIT 1)`,
		username, s.opts.ThrottleWindow, s.opts.MaxAccountFailuresAnywhere-1).Scan(&nth); err != nil {
		return nil, fmt.Errorf("auth: account throttle check: %w", err)
	}
	if nth == nil {
		return nil, nil
	}
	if known, err := knownDevice(ctx, q, username, device); err != nil || known {
		return nil, err
	}
	return AccountThrottled(max(time.Until(nth.Add(s.opts.ThrottleWindow)), time.Second)), nil
}

// knownDevice reports whether device (a device cookie's hash; nil: none) is one of
// username's browsers that signed in within DeviceTTL.
func knownDevice(ctx context.Context, q db.Querier, username string, device []byte) (bool, error) {
	if device == nil {
		return false, nil
	}
	var known bool
	if err := q.QueryRow(ctx, `/* auth.knownDevice */
		SELECT EXISTS (SELECT 1 FROM login_devices d JOIN users u ON u.id = d.user_id
			WHERE d.token_hash = $1 AND u.username = $2 AND d.last_used_at > now() - $3::interval)`,
		device, username, DeviceTTL).Scan(&known); err != nil {
		return false, fmt.Errorf("auth: device check: %w", err)
	}
	return known, nil
}

// noteThrottledAnywhere audits, once per account per window, that u has just reached
// MaxAccountFailuresAnywhere failed sign-ins from all addresses: from now on sign-ins
// without a device cookie are refused unchecked, and those refusals are never audited,
// so this entry is what an admin sees of it. It is the failure path's own
// user.login_failed (so it files under the "auth" actions), outside the failed sign-in
// budget: at most one per existing account per window.
func (s *Service) noteThrottledAnywhere(ctx context.Context, tx pgx.Tx, u User) error {
	n, addresses, nth, err := s.failuresAnywhere(ctx, tx, u.Username)
	if err != nil {
		return err
	}
	if nth == nil {
		return nil
	}
	// One row per account, renewed only once its window has passed: the account going
	// in and out of the state as single failures leave the window is one episode.
	tag, err := tx.Exec(ctx, `/* auth.noteThrottledAnywhere.mark */
		INSERT INTO login_account_throttles AS t (username) VALUES ($1)
		ON CONFLICT (username) DO UPDATE SET since = now() WHERE t.since <= now() - $2::interval`,
		u.Username, s.opts.ThrottleWindow)
	if err != nil {
		return fmt.Errorf("auth: account throttle mark: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	until := nth.Add(s.opts.ThrottleWindow).UTC()
	s.log.Warn("auth: sign-ins to an account without a device cookie refused: too many failed sign-ins from many addresses",
		"username", u.Username, "failures", n, "addresses", addresses, "until", until)
	_, err = audit.Append(ctx, tx, audit.Entry{Actor: audit.System, Action: "user.login_failed", TargetType: "user", TargetID: u.ID,
		TargetName: u.Username, Result: audit.ResultFailure,
		Payload: map[string]any{"username": u.Username, "scope": ScopeAccount, "failures": n, "addresses": addresses,
			"until":  until.Format(time.RFC3339),
			"reason": "too many failed sign-ins from many addresses: until then, only browsers that signed in to the account before may sign in"}})
	return err
}

// failuresAnywhere counts the failed sign-ins to username within the window, from every
// address: how many, from how many addresses, and the time of the
// MaxAccountFailuresAnywhere-th newest (nil while there are fewer). Login runs it for a
// name that is nobody's too (and drops the answer): without that round trip, the time a
// failure takes would tell which names are accounts.
func (s *Service) failuresAnywhere(ctx context.Context, tx pgx.Tx, username string) (n, addresses int, nth *time.Time, err error) {
	if err := tx.QueryRow(ctx, `/* auth.noteThrottledAnywhere.count */
		SELECT count(*), count(DISTINCT ip), (array_agg(at ORDER BY at DESC))[$3]
		FROM login_failures WHERE username = $1 AND at > now() - $2::interval`,
		username, s.opts.ThrottleWindow, s.opts.MaxAccountFailuresAnywhere).Scan(&n, &addresses, &nth); err != nil {
		return 0, 0, nil, fmt.Errorf("auth: account throttle count: %w", err)
	}
	return n, addresses, nth, nil
}

// keepDevice renews the device cookie token if it is one of u's, or gives u a new one,
// and returns the token for the cookie. The user keeps the maxDevices most recently
// used; unused ones past DeviceTTL go too (and with Prune).
func keepDevice(ctx context.Context, tx pgx.Tx, u User, token string) (string, error) {
	if token != "" {
		tag, err := tx.Exec(ctx, `/* auth.keepDevice.touch */
			UPDATE login_devices SET last_used_at = now() WHERE token_hash = $1 AND user_id = $2 AND last_used_at > now() - $3::interval`,
			hashToken(token), u.ID, DeviceTTL)
		if err != nil {
			return "", fmt.Errorf("auth: device cookie: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return token, nil
		}
	}
	// Another user's cookie (a shared browser), an ended or unknown one, or none: this
	// browser is given one of u's.
	token, hash := randomToken(deviceTokenPrefix)
	if _, err := tx.Exec(ctx, `/* auth.keepDevice.new */ INSERT INTO login_devices (token_hash, user_id) VALUES ($1, $2)`, hash, u.ID); err != nil {
		return "", fmt.Errorf("auth: device cookie: %w", err)
	}
	if _, err := tx.Exec(ctx, `/* auth.keepDevice.bound */
		DELETE FROM login_devices WHERE user_id = $1 AND token_hash <> $4 AND (last_used_at <= now() - $2::interval OR token_hash IN (
			SELECT token_hash FROM login_devices WHERE user_id = $1 AND token_hash <> $4 ORDER BY last_used_at DESC, created_at DESC OFFSET $3))`,
		u.ID, DeviceTTL, maxDevices-1, hash); err != nil {
		return "", fmt.Errorf("auth: device cookie bound: %w", err)
	}
	return token, nil
}

// endDevices ends every device cookie of u (a password change or reset: they were proof
// of a sign-in with the password that no longer is).
func endDevices(ctx context.Context, tx pgx.Tx, u User) error {
	if _, err := tx.Exec(ctx, `/* auth.endDevices */ DELETE FROM login_devices WHERE user_id = $1`, u.ID); err != nil {
		return fmt.Errorf("auth: end device cookies: %w", err)
	}
	return nil
}
