package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/uuidtext"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
)

// Connection is everything needed to open a session to a server, secrets decrypted.
// It exists only in memory (services/mcpclient); it is never logged or rendered.
type Connection struct {
	ServerID   string
	Name       string
	Type       string
	Command    string
	Args       []string
	WorkingDir string
	Env        map[string]string
	URL        string
	Headers    map[string]string // including the authentication header
	// Template is the YAML of a template server (services/template).
	Template string
	// AuthToken is the configured token alone (also in Headers), so it can be masked
	// whatever the header carrying it is called.
	AuthToken      string
	Timeout        time.Duration
	Retries        int
	HealthInterval time.Duration
	// Fingerprint changes whenever anything above changes, so a session knows when to reconnect.
	Fingerprint string
	// Identity is a MAC of the settings that decide what runs or is reached, and with
	// which secrets (not the timings): a plan's approval is bound to it, so a changed
	// command, environment, URL or credential is noticed before the next step runs.
	Identity string
	// ident is what Identity is the MAC of, kept so the identity can be computed again
	// under the current primary key after a key rotation (IdentityNow).
	ident []byte
}

// String hides the secrets if a Connection is ever formatted by mistake.
func (c Connection) String() string {
	return fmt.Sprintf("Connection{%s %s}", c.Name, c.Type)
}

// GoString hides the secrets from %#v too.
func (c Connection) GoString() string { return c.String() }

// Connection returns the decrypted connection settings of server id.
func (s *Service) Connection(ctx context.Context, id string) (Connection, error) {
	sv, err := s.GetServer(ctx, id)
	if err != nil {
		return Connection{}, err
	}
	return s.open(draftOf(sv))
}

// PreviewConnection validates a registration that is not saved (id "" for a new server,
// or an existing server with p applied) and returns its connection settings, so "Test
// connection" tries exactly what Save would store.
func (s *Service) PreviewConnection(ctx context.Context, id string, p Patch) (Connection, error) {
	d := newDraft("00000000-0000-0000-0000-000000000000")
	var before *draft
	if id != "" {
		cur, err := s.GetServer(ctx, id)
		if err != nil {
			return Connection{}, err
		}
		d = draftOf(cur)
		b := draftOf(cur)
		before = &b
	}
	d.apply(p)
	if p.KeepCommand && commandChanged(before, d) {
		return Connection{}, ErrCommandChange
	}
	if err := d.validateChange(before, s.egress); err != nil {
		return Connection{}, err
	}
	return s.open(d)
}

// AuditTest records that actor tried connection c ("Test connection"; id is the saved
// server it was tried for, "" for a new one). Names of env variables and headers are
// recorded, never their values.
func (s *Service) AuditTest(ctx context.Context, actor audit.Actor, id string, c Connection) error {
	payload := map[string]any{"name": c.Name, "type": c.Type, "saved": id != ""}
	addTarget(payload, c.Type, c.Command, c.Args, c.WorkingDir, c.URL, c.Template, slices.Sorted(maps.Keys(c.Env)), slices.Sorted(maps.Keys(c.Headers)))
	return audit.AppendAlone(ctx, s.begin, audit.Entry{Actor: actor, Action: "server.test", TargetType: "server",
		TargetID: id, TargetName: c.Name, Payload: payload})
}

// AuditReconnect records that actor had server sv's session closed and opened again
// (Reconnect: a stdio server's process is killed and started anew), and announces it so
// every replica reconnects its own session (each runs its own stdio process); replica
// is the one that answered, which has reconnected already.
func (s *Service) AuditReconnect(ctx context.Context, actor audit.Actor, sv Server, replica string) error {
	return db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "server.reconnect", TargetType: "server",
			TargetID: sv.ID, TargetName: sv.Name, Payload: map[string]any{"type": sv.Type}}); err != nil {
			return err
		}
		_, err := events.ServerReconnect.Publish(ctx, tx, ServersTopic,
			events.ServerReconnecting{ID: sv.ID, Name: sv.Name, Replica: replica})
		return err
	})
}

func (s *Service) open(d draft) (Connection, error) {
	c := Connection{ServerID: d.id, Name: d.name, Type: d.typ, Command: d.command, Args: slices.Clone(d.args),
		WorkingDir: d.workingDir, URL: d.url, Template: d.template, Env: map[string]string{}, Headers: map[string]string{},
		Timeout: time.Duration(d.timeoutMS) * time.Millisecond, Retries: d.retries,
		HealthInterval: time.Duration(d.healthIntervalMS) * time.Millisecond}
	var err error
	if c.Env, err = s.openMap(d.id, "env", d.env); err != nil {
		return Connection{}, err
	}
	if c.Headers, err = s.openMap(d.id, "headers", d.headers); err != nil {
		return Connection{}, err
	}
	token, err := s.openValue(d.id, "auth_token", "", d.authToken)
	if err != nil {
		return Connection{}, err
	}
	switch d.authType {
	case AuthBearer:
		c.Headers["Authorization"] = "Bearer " + token
		c.AuthToken = token
	case AuthHeader:
		c.Headers[d.authHeader] = token
		c.AuthToken = token
	}
	// What decides which program runs (or which endpoint is reached) and with which
	// credentials: approvals are bound to it (Identity), sessions restart on it and on
	// the timings (Fingerprint).
	var ident bytes.Buffer
	enc := json.NewEncoder(&ident)
	_ = enc.Encode([]any{c.Type, c.Command, c.Args, c.WorkingDir, c.URL})
	if c.Template != "" {
		// Only template servers add a line: the identities of the others stay as they were.
		_ = enc.Encode(c.Template)
	}
	for _, m := range []map[string]string{c.Env, c.Headers} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			_ = enc.Encode([]string{k, m[k]})
		}
		_ = enc.Encode("|")
	}
	c.ident = ident.Bytes()
	c.Identity = s.IdentityNow(c)
	h := sha256.New()
	h.Write(ident.Bytes())
	_ = json.NewEncoder(h).Encode([]any{c.Timeout, c.Retries, c.HealthInterval})
	c.Fingerprint = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// IdentityNow is c's Identity under the primary key the keyring holds now: a session
// that outlives a key rotation must answer with the identity a fresh read of its
// settings gives, or every plan approved after the rotation is refused as changed.
func (s *Service) IdentityNow(c Connection) string {
	if c.ident == nil {
		return c.Identity
	}
	return hex.EncodeToString(s.keys.MAC(c.ident))
}

// IdentityMatches reports whether identity is c's Identity under any key the keyring
// holds: one made by another replica whose keyring already has a key rotation's new
// primary key, or before a rotation, is the same settings.
func (s *Service) IdentityMatches(c Connection, identity string) bool {
	if c.ident == nil {
		return c.Identity == identity
	}
	mac, err := hex.DecodeString(identity)
	return err == nil && s.keys.VerifyMAC(c.ident, mac)
}

func (s *Service) openMap(id, field string, m map[string]secretValue) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		plain, err := s.openValue(id, field, k, v)
		if err != nil {
			return nil, err
		}
		out[k] = plain
	}
	return out, nil
}

func (s *Service) openValue(id, field, name string, v secretValue) (string, error) {
	if v.plain != nil {
		return *v.plain, nil
	}
	if v.cipher == "" {
		return "", nil
	}
	plain, err := s.keys.DecryptString(v.cipher, aad(id, field, name))
	if err != nil {
		what := field
		if name != "" {
			what += " " + name
		}
		return "", fmt.Errorf("registry: cannot decrypt %s of server %s (re-enter it, or restore the secret key it was saved with): %w", what, id, err)
	}
	return plain, nil
}

// MaxErrorText bounds the error text of a server's (a status, a health check, a failed
// discovery) that is stored and published: the server picks its length.
const MaxErrorText = 2048

// CutMark ends an error text cut to MaxErrorText.
const CutMark = "… (cut)"

// ClipError cuts an error text to MaxErrorText, ending it with CutMark.
func ClipError(s string) string { return textcheck.Clip(s, MaxErrorText, CutMark) }

// StatusUpdate is a change of a server's connection status.
type StatusUpdate struct {
	Status string
	Error  string      // the reason, for StatusError
	Info   *ServerInfo // set on connect
}

// SetStatus records a connection status and announces it on ServersTopic as
// server.status. It reports whether the status actually changed; an unchanged status
// (and error) writes nothing, so a flapping health check does not flood the events table.
func (s *Service) SetStatus(ctx context.Context, id string, u StatusUpdate) (bool, error) {
	if !uuidtext.Canonical(id) {
		return false, ErrNotFound
	}
	u.Error = ClipError(u.Error)
	changed := false
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var prev string
		var prevErr *string
		err := tx.QueryRow(ctx, `/* registry.SetStatus.lock */ SELECT connection_status, last_error FROM mcp_servers WHERE id = $1 FOR UPDATE`, id).Scan(&prev, &prevErr)
		if err == pgx.ErrNoRows {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		var errText *string
		if u.Status == StatusError {
			errText = &u.Error
		}
		// The stored last_error outlives the error status (it says what went wrong last),
		// so errors are compared only while the status is error.
		if prev == u.Status && (u.Status != StatusError || deref(prevErr) == deref(errText)) && u.Info == nil {
			return nil
		}
		changed = true
		var info any
		if u.Info != nil {
			info = u.Info
		}
		rows, err := tx.Query(ctx, `/* registry.SetStatus */
			UPDATE mcp_servers s SET connection_status = $2,
				last_error = CASE WHEN $2 = 'connected' THEN NULL WHEN $3::text IS NULL THEN s.last_error ELSE $3 END,
				last_connected = CASE WHEN $2 = 'connected' THEN now() ELSE s.last_connected END,
				server_info = COALESCE($4::jsonb, s.server_info),
				status_changed_at = CASE WHEN s.connection_status = $2 THEN s.status_changed_at ELSE now() END
			WHERE s.id = $1
			RETURNING `+serverColumns, id, u.Status, errText, info)
		if err != nil {
			return err
		}
		list, err := collectServers(rows)
		if err != nil || len(list) == 0 {
			return fmt.Errorf("registry: set status: %w", err)
		}
		sv := list[0]
		_, err = events.ServerStatusChanged.Publish(ctx, tx, ServersTopic, events.ServerStatus{ID: sv.ID, Name: sv.Name,
			Status: sv.Status, Previous: prev, Enabled: sv.Enabled, ToolCount: sv.ToolCount, LastError: deref(sv.LastError)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("registry: set status of %s: %w", id, err)
	}
	return changed, nil
}

// Health is one health check.
type Health struct {
	CheckedAt time.Time `db:"checked_at" json:"checked_at"`
	OK        bool      `db:"ok" json:"ok"`
	LatencyMS *float64  `db:"latency_ms" json:"latency_ms"`
	Error     *string   `db:"error" json:"error"`
}

// RecordHealth stores one health-check result.
func (s *Service) RecordHealth(ctx context.Context, id string, ok bool, latency time.Duration, errText string) error {
	var lat *float64
	if ok {
		v := float64(latency.Microseconds()) / 1000
		lat = &v
	}
	var e *string
	if errText != "" {
		errText = ClipError(errText)
		e = &errText
	}
	_, err := s.pool.Exec(ctx, `/* registry.RecordHealth */ INSERT INTO server_health (server_id, ok, latency_ms, error) VALUES ($1, $2, $3, $4)`, id, ok, lat, e)
	if err != nil {
		return fmt.Errorf("registry: record health: %w", err)
	}
	return nil
}

// HealthHistory returns the latest health checks of a server, newest first.
func (s *Service) HealthHistory(ctx context.Context, id string, limit int) ([]Health, error) {
	return db.All[Health](ctx, s.pool, "registry: health history", `/* registry.HealthHistory */
		SELECT checked_at, ok, latency_ms, error FROM server_health WHERE server_id = $1 ORDER BY checked_at DESC LIMIT $2`, id, limit)
}

// PruneDiscoveries deletes the record of discoveries past a server's newest keepN, and
// those older than keep but its newest: a server that announces list_changed without
// pause must not grow the table without end.
func (s *Service) PruneDiscoveries(ctx context.Context, keepN int, keep time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `/* registry.PruneDiscoveries */ DELETE FROM discovery_runs WHERE id IN (
		SELECT id FROM (SELECT id, started_at, row_number() OVER (PARTITION BY server_id ORDER BY id DESC) AS n FROM discovery_runs) r
		WHERE n > $1 OR n > 1 AND started_at < now() - $2::interval)`, keepN, keep)
	if err != nil {
		return 0, fmt.Errorf("registry: prune discoveries: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PruneHealth deletes health checks older than keep.
func (s *Service) PruneHealth(ctx context.Context, keep time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `/* registry.PruneHealth */ DELETE FROM server_health WHERE checked_at < now() - $1::interval`, keep)
	if err != nil {
		return 0, fmt.Errorf("registry: prune health: %w", err)
	}
	return tag.RowsAffected(), nil
}
