-- Device cookies (services/auth/devices.go): a browser that signed in to an account
-- keeps a long-lived random token bound to it, of which only the SHA-256 is stored.
-- When the account has too many failed sign-ins from all addresses together, only
-- sign-ins that bring one are still checked, so guesses spread over many addresses stop
-- while the owner's browsers still sign in. Each user keeps the 20 most recently used;
-- one unused for 180 days goes. A password change or reset deletes the user's.
CREATE TABLE login_devices (
    token_hash   bytea PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX login_devices_user_idx ON login_devices (user_id, last_used_at);

-- When an account last reached that limit (one row per username), so that reaching it
-- is audited once per throttle window, not at every failure that keeps it there.
CREATE TABLE login_account_throttles (
    username text PRIMARY KEY,
    since    timestamptz NOT NULL DEFAULT now()
);
