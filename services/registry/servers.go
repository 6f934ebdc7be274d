package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Server types.
const (
	TypeStdio          = "stdio"
	TypeSSE            = "sse"
	TypeStreamableHTTP = "streamable_http"
	// TypeTemplate is a server whose tools are defined in YAML (services/template) and
	// served by Toolwarden itself.
	TypeTemplate = "template"
)

// Types lists the server types in the order forms show them.
var Types = []string{TypeStdio, TypeStreamableHTTP, TypeSSE, TypeTemplate}

// Connection statuses (docs/api.md).
const (
	StatusConnecting   = "connecting"
	StatusConnected    = "connected"
	StatusError        = "error"
	StatusDisconnected = "disconnected"
)

// Statuses lists every connection status.
var Statuses = []string{StatusConnected, StatusConnecting, StatusError, StatusDisconnected}

// Authentication kinds for HTTP servers.
const (
	AuthNone   = "none"
	AuthBearer = "bearer" // Authorization: Bearer <token>
	AuthHeader = "header" // <auth_header>: <token>
)

// Defaults and limits of the connection settings.
const (
	DefaultTimeoutMS        = 30_000
	DefaultRetries          = 3
	DefaultHealthIntervalMS = 30_000
	MinTimeoutMS            = 100
	MaxTimeoutMS            = 600_000
	MaxRetries              = 10
	MinHealthIntervalMS     = 1000
	MaxHealthIntervalMS     = 3_600_000
)

// MaxDescription is the longest server description accepted.
const MaxDescription = 2000

// ServerInfo is what a server said about itself when the session was initialized.
type ServerInfo struct {
	Name            string          `json:"name,omitempty"`
	Title           string          `json:"title,omitempty"`
	Version         string          `json:"version,omitempty"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	Instructions    string          `json:"instructions,omitempty"`
}

// Resource is one entry of a server's resources/list.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// Prompt is one entry of a server's prompts/list.
type Prompt struct {
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Arguments   []string `json:"arguments,omitempty"`
}

// Server is a registered MCP server. Secret values are never in it: Env and Headers map
// names to ciphertexts and are not serialized; EnvNames, HeaderNames and AuthConfigured
// say what is configured. AutoEnable: tools of the server that pass validation are
// enabled without review (services/toolstate); it applies to tools validated from then
// on, not to those already validated.
type Server struct {
	ID               string            `db:"id" json:"id"`
	Name             string            `db:"name" json:"name"`
	Description      string            `db:"description" json:"description"`
	Type             string            `db:"server_type" json:"type"`
	Command          string            `db:"command" json:"command,omitempty"`
	Args             []string          `db:"args" json:"args,omitempty"`
	WorkingDir       string            `db:"working_dir" json:"working_dir,omitempty"`
	URL              string            `db:"url" json:"url,omitempty"`
	Template         string            `db:"template" json:"template,omitempty"`
	Env              map[string]string `db:"env" json:"-"`
	Headers          map[string]string `db:"headers" json:"-"`
	AuthType         string            `db:"auth_type" json:"auth_type"`
	AuthHeader       string            `db:"auth_header" json:"auth_header,omitempty"`
	AuthToken        string            `db:"auth_token" json:"-"`
	TimeoutMS        int               `db:"timeout_ms" json:"timeout_ms"`
	Retries          int               `db:"retries" json:"retries"`
	HealthIntervalMS int               `db:"health_interval_ms" json:"health_interval_ms"`
	Enabled          bool              `db:"enabled" json:"enabled"`
	Trusted          bool              `db:"trusted" json:"trusted"`
	AutoEnable       bool              `db:"auto_enable" json:"auto_enable"`
	Status           string            `db:"connection_status" json:"status"`
	LastError        *string           `db:"last_error" json:"last_error"`
	LastConnected    *time.Time        `db:"last_connected" json:"last_connected"`
	StatusChangedAt  time.Time         `db:"status_changed_at" json:"status_changed_at"`
	Info             ServerInfo        `db:"server_info" json:"server_info"`
	Resources        []Resource        `db:"resources" json:"resources"`
	Prompts          []Prompt          `db:"prompts" json:"prompts"`
	CreatedAt        time.Time         `db:"created_at" json:"created_at"`
	UpdatedAt        time.Time         `db:"updated_at" json:"updated_at"`
	ToolCount        int               `db:"tool_count" json:"tool_count"`
	// UndoesOthers counts the other servers' tools whose compensation (undo step) is a
	// tool of this server: deleting it removes them (DeleteServerReport says which).
	UndoesOthers int `db:"undoes_others" json:"-"`

	EnvNames       []string `db:"-" json:"env_names"`
	HeaderNames    []string `db:"-" json:"header_names"`
	AuthConfigured bool     `db:"-" json:"auth_configured"`
	// NameReserved: the server had its name before the name was kept for Toolwarden's
	// own tools (toolname.Reserved); it works, and should be renamed.
	NameReserved bool `db:"-" json:"name_reserved,omitempty"`
}

// Spec is a server registration as a person or a file states it, with plain secret values.
// On update (Patch), secrets follow different rules; see Patch.
type Spec struct {
	Name             string
	Description      string
	Type             string
	Command          string
	Args             []string
	WorkingDir       string
	URL              string
	Template         string // the YAML of a template server
	Env              map[string]string
	Headers          map[string]string
	AuthType         string
	AuthHeader       string
	AuthToken        string
	TimeoutMS        int // 0: default
	Retries          *int
	HealthIntervalMS int // 0: default
	Enabled          bool
	Trusted          bool
	AutoEnable       bool // validated tools are enabled without review
}

// Patch changes some fields of a server; nil fields stay as they are. Secret maps
// (Env, Headers) set the names they mention: a nil value removes that name, others
// are kept. AuthToken nil keeps the stored token, "" clears it.
type Patch struct {
	Name             *string
	Description      *string
	Type             *string
	Command          *string
	Args             *[]string
	WorkingDir       *string
	URL              *string
	Template         *string
	Env              map[string]*string
	Headers          map[string]*string
	ReplaceEnv       bool // names not in Env are removed
	ReplaceHeaders   bool // names not in Headers are removed
	AuthType         *string
	AuthHeader       *string
	AuthToken        *string
	TimeoutMS        *int
	Retries          *int
	HealthIntervalMS *int
	Enabled          *bool
	Trusted          *bool
	AutoEnable       *bool
	// KeepCommand refuses (ErrCommandChange) a patch that would change what a stdio
	// server runs, or the YAML of a template server with command tools (see
	// ChangesCommand): set it for callers without server.command. It is checked against
	// the row locked for the update, so no concurrent edit slips past it.
	KeepCommand bool
	// KeepTrust refuses (ErrTrustChange) a patch that would change whether the server
	// is trusted: set it for callers without server.trust. Checked on the locked row.
	KeepTrust bool
	// ExpectUpdatedAt, when set, is the updated_at the change was based on: a newer one
	// (someone saved meanwhile) fails with a CodeStale fault instead of undoing it.
	ExpectUpdatedAt *time.Time
}

// CodeStale is the code of an update based on a server that changed since (Patch.ExpectUpdatedAt).
const CodeStale = "stale_server"

// StaleServer is the details of a CodeStale fault: when the server was last saved.
type StaleServer struct {
	UpdatedAt time.Time `json:"updated_at"`
}

// stale: the server changed since the caller read it.
func stale(sv Server) *fault.Error {
	return fault.Stale(CodeStale, fmt.Sprintf("server %s changed since you read it (saved again at %s); read it again to see the changes and apply yours to it",
		sv.Name, sv.UpdatedAt.UTC().Format(time.DateTime+" UTC"))).About("server").WithDetails(StaleServer{UpdatedAt: sv.UpdatedAt})
}

// ErrTrustChange: the patch (or a new server) sets whether a server is trusted, and the
// caller may not: trust decides risk, so only administrators do.
var ErrTrustChange = fault.Forbidden("only administrators can mark a server trusted or untrusted: trust decides how risky its tools are")

// ErrTrustedTargetChange: the patch changes what a trusted server is (where it points,
// what it runs, with which credentials), and the caller may not mark servers trusted:
// the trust an administrator gave was for the server as it was.
var ErrTrustedTargetChange = fault.Forbidden("only administrators can change what a trusted server runs or where it points (its command, URL, environment, headers, credentials or template): its tools' risk relies on that trust")

// ErrCommandChange: the patch changes what a stdio server runs (or sets a template that
// runs commands), and the caller may not.
var ErrCommandChange = fault.Forbidden("only administrators can set what runs on the Toolwarden host: a stdio server's command, args, env and working directory, or a template whose tools run commands")

// PatchFromSpec is the patch that turns any server into sp (secrets replaced wholesale).
func PatchFromSpec(sp Spec) Patch {
	p := Patch{Name: &sp.Name, Description: &sp.Description, Type: &sp.Type, Command: &sp.Command,
		Args: &sp.Args, WorkingDir: &sp.WorkingDir, URL: &sp.URL, Template: &sp.Template, AuthType: &sp.AuthType,
		AuthHeader: &sp.AuthHeader, AuthToken: &sp.AuthToken, TimeoutMS: &sp.TimeoutMS,
		Retries: sp.Retries, HealthIntervalMS: &sp.HealthIntervalMS, Enabled: &sp.Enabled,
		Trusted: &sp.Trusted, AutoEnable: &sp.AutoEnable, ReplaceEnv: true, ReplaceHeaders: true,
		Env: map[string]*string{}, Headers: map[string]*string{}}
	for k, v := range sp.Env {
		p.Env[k] = &v
	}
	for k, v := range sp.Headers {
		p.Headers[k] = &v
	}
	return p
}

// sealed is a validated draft with every secret encrypted, ready to store.
type sealed struct {
	env, headers map[string]string
	authToken    string
}

func (s *Service) seal(d draft) (sealed, error) {
	out := sealed{env: map[string]string{}, headers: map[string]string{}}
	var err error
	if out.env, err = s.sealMap(d.id, "env", d.env); err != nil {
		return out, err
	}
	if out.headers, err = s.sealMap(d.id, "headers", d.headers); err != nil {
		return out, err
	}
	if v := d.authToken; v.plain != nil && *v.plain != "" {
		if out.authToken, err = s.keys.EncryptString(*v.plain, aad(d.id, "auth_token", "")); err != nil {
			return out, fmt.Errorf("registry: encrypt auth token: %w", err)
		}
	} else if v.plain == nil {
		out.authToken = v.cipher
	}
	return out, nil
}

func (s *Service) sealMap(id, field string, m map[string]secretValue) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v.plain == nil {
			out[k] = v.cipher
			continue
		}
		c, err := s.keys.EncryptString(*v.plain, aad(id, field, k))
		if err != nil {
			return nil, fmt.Errorf("registry: encrypt %s %s: %w", field, k, err)
		}
		out[k] = c
	}
	return out, nil
}

// aad binds a ciphertext to its row, field and name, so a value copied elsewhere in the
// database does not decrypt.
func aad(id, field, name string) string {
	if name == "" {
		return "mcp_servers/" + id + "/" + field
	}
	return "mcp_servers/" + id + "/" + field + "/" + name
}

// auditView is what the audit log records about a registration: never secret values.
func (d draft) auditView() map[string]any {
	m := map[string]any{"name": d.name, "type": d.typ, "description": d.description, "enabled": d.enabled,
		"trusted": d.trusted, "auto_enable": d.autoEnable, "timeout_ms": d.timeoutMS, "retries": d.retries, "health_interval_ms": d.healthIntervalMS}
	addTarget(m, d.typ, d.command, d.args, d.workingDir, d.url, d.template, slices.Sorted(maps.Keys(d.env)), slices.Sorted(maps.Keys(d.headers)))
	if d.typ == TypeSSE || d.typ == TypeStreamableHTTP {
		m["auth_type"], m["auth_header"] = d.authType, d.authHeader
	}
	return m
}

// addTarget adds what a registration connects to (never secret values, only their names)
// to an audit payload. A template server's YAML is recorded whole: it is what runs.
func addTarget(m map[string]any, typ, command string, args []string, workingDir, url, tmpl string, envNames, headerNames []string) {
	switch typ {
	case TypeStdio:
		m["command"], m["args"], m["working_dir"], m["env_names"] = command, args, workingDir, envNames
	case TypeTemplate:
		m["template"] = tmpl
	default:
		m["url"], m["header_names"] = url, headerNames
	}
}

// CreateServer registers a server. Bad input returns a *verr.Error naming each field.
func (s *Service) CreateServer(ctx context.Context, actor audit.Actor, sp Spec) (Server, error) {
	d := newDraft(uuid.NewString())
	d.apply(PatchFromSpec(sp))
	if err := d.validateChange(nil, s.egress); err != nil {
		return Server{}, err
	}
	var out Server
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		var err error
		out, err = s.insert(ctx, tx, d)
		if err != nil {
			return err
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "server.create", TargetType: "server",
			TargetID: out.ID, TargetName: out.Name, Payload: d.auditView()}); err != nil {
			return err
		}
		return publishCreated(ctx, tx, out)
	})
	if err != nil {
		return Server{}, err
	}
	return out, nil
}

func (s *Service) insert(ctx context.Context, tx pgx.Tx, d draft) (Server, error) {
	sl, err := s.seal(d)
	if err != nil {
		return Server{}, err
	}
	initial := StatusDisconnected
	if d.enabled {
		initial = StatusConnecting
	}
	_, err = tx.Exec(ctx, `/* registry.CreateServer */
		INSERT INTO mcp_servers (id, name, description, server_type, command, args, working_dir, url, env, headers,
			auth_type, auth_header, auth_token, timeout_ms, retries, health_interval_ms, enabled, trusted, connection_status,
			auto_enable, template)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`,
		d.id, d.name, d.description, d.typ, d.command, d.args, d.workingDir, d.url, sl.env, sl.headers,
		d.authType, d.authHeader, sl.authToken, d.timeoutMS, d.retries, d.healthIntervalMS, d.enabled, d.trusted, initial,
		d.autoEnable, d.template)
	if err != nil {
		return Server{}, writeError("create", d.name, err)
	}
	return getServer(ctx, tx, d.id, false)
}

// UpdateServer applies p to the server id.
func (s *Service) UpdateServer(ctx context.Context, actor audit.Actor, id string, p Patch) (Server, error) {
	var out Server
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		cur, err := getServer(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if p.ExpectUpdatedAt != nil && !p.ExpectUpdatedAt.Equal(cur.UpdatedAt) {
			return stale(cur)
		}
		d, before := draftOf(cur), draftOf(cur)
		d.apply(p)
		if cur.Type == TypeBuiltin {
			if err := builtinPatch(before, d); err != nil {
				return err
			}
		} else if p.KeepCommand && commandChanged(&before, d) {
			return ErrCommandChange
		}
		if p.KeepTrust && d.trusted != before.trusted {
			return ErrTrustChange
		}
		if p.KeepTrust && before.trusted && targetChanged(&before, d) {
			return ErrTrustedTargetChange
		}
		if cur.Type != TypeBuiltin {
			if err := d.validateChange(&before, s.egress); err != nil {
				return err
			}
		}
		if out, err = s.update(ctx, tx, cur, d); err != nil {
			return err
		}
		beforeView := draftOf(cur).auditView()
		after := d.auditView()
		changed := map[string]any{}
		for k, v := range after {
			if fmt.Sprint(beforeView[k]) != fmt.Sprint(v) {
				changed[k] = map[string]any{"from": beforeView[k], "to": v}
			}
		}
		if names := changedSecrets(p); len(names) > 0 {
			changed["secrets_changed"] = names
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "server.update", TargetType: "server",
			TargetID: out.ID, TargetName: out.Name, Payload: map[string]any{"changes": changed}}); err != nil {
			return err
		}
		return publishChanged(ctx, tx, out)
	})
	if err != nil {
		return Server{}, err
	}
	return out, nil
}

// changedSecrets names the secrets a patch sets or clears (names only, never values).
func changedSecrets(p Patch) []string {
	var names []string
	for k := range p.Env {
		names = append(names, "env/"+k)
	}
	for k := range p.Headers {
		names = append(names, "headers/"+k)
	}
	if p.AuthToken != nil {
		names = append(names, "auth_token")
	}
	slices.Sort(names)
	return names
}

func (s *Service) update(ctx context.Context, tx pgx.Tx, cur Server, d draft) (Server, error) {
	if err := movedToolSecrets(ctx, tx, cur.ID, ptr(draftOf(cur)), &d); err != nil {
		return Server{}, err
	}
	sl, err := s.seal(d)
	if err != nil {
		return Server{}, err
	}
	status := cur.Status
	switch {
	case !d.enabled:
		status = StatusDisconnected
	case !cur.Enabled || connectionChanged(draftOf(cur), d):
		// The session is about to be replaced: say so now, not after the old one is gone.
		status = StatusConnecting
	}
	// updated_at is the version edit forms send back (Patch.ExpectUpdatedAt): every save
	// moves it, even two in the same microsecond.
	_, err = tx.Exec(ctx, `/* registry.UpdateServer */
		UPDATE mcp_servers SET name = $2, description = $3, server_type = $4, command = $5, args = $6,
			working_dir = $7, url = $8, env = $9, headers = $10, auth_type = $11, auth_header = $12,
			auth_token = $13, timeout_ms = $14, retries = $15, health_interval_ms = $16, enabled = $17,
			trusted = $18, connection_status = $19, auto_enable = $20, template = $21,
			status_changed_at = CASE WHEN connection_status = $19 THEN status_changed_at ELSE now() END,
			updated_at = GREATEST(now(), updated_at + interval '1 microsecond')
		WHERE id = $1`,
		d.id, d.name, d.description, d.typ, d.command, d.args, d.workingDir, d.url, sl.env, sl.headers,
		d.authType, d.authHeader, sl.authToken, d.timeoutMS, d.retries, d.healthIntervalMS, d.enabled, d.trusted, status,
		d.autoEnable, d.template)
	if err != nil {
		return Server{}, writeError("update", d.name, err)
	}
	return getServer(ctx, tx, d.id, false)
}

// writeError turns a taken name into a field error on "name".
func writeError(verb, name string, err error) error {
	if db.IsUniqueViolation(err, "mcp_servers_name_key") {
		return verr.New("name", fmt.Sprintf("a server named %q already exists", name))
	}
	return fmt.Errorf("registry: %s server %q: %w", verb, name, err)
}

// SetEnabled enables or disables a server (a disabled server has no session).
func (s *Service) SetEnabled(ctx context.Context, actor audit.Actor, id string, enabled bool) (Server, error) {
	return s.UpdateServer(ctx, actor, id, Patch{Enabled: &enabled})
}

// DeleteServer removes a server and, with it, its tools, their history and their
// per-user rules: refused (CodeUserRules) when some rule refuses a tool and actor may
// not lift refusals; each removed rule is audited as tool.permission, and each
// compensation of another server's tool that one of its tools undid as tool.compensation.
func (s *Service) DeleteServer(ctx context.Context, actor audit.Actor, id string) error {
	_, err := s.DeleteServerReport(ctx, actor, id)
	return err
}

// Deleted is what deleting a server removed beyond it and its tools.
type Deleted struct {
	// LostUndo are the tools of other servers (qualified names) whose compensation one
	// of its tools was: their steps have nothing to undo them now.
	LostUndo []string
}

// DeleteServerReport is DeleteServer, saying what else the deletion removed.
func (s *Service) DeleteServerReport(ctx context.Context, actor audit.Actor, id string) (Deleted, error) {
	var out Deleted
	err := db.WithTx(ctx, s.begin, func(tx pgx.Tx) error {
		out = Deleted{}
		cur, err := getServer(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if cur.Type == TypeBuiltin {
			return ErrBuiltinFixed
		}
		comps, err := deleteLockedServer(ctx, tx, actor, cur, "server.delete", nil)
		for _, c := range comps {
			out.LostUndo = append(out.LostUndo, toolname.Join(c.Server, c.Tool))
		}
		return err
	})
	return out, err
}

// deleteLockedServer deletes cur, whose row tx has locked, with its tools: refused
// (CodeUserRules) when a per-user rule refuses one of them and actor may not lift
// refusals. It audits, under action (with extra in its payload), the deletion, each rule
// removed and each compensation of another server's tool that one of its tools undid,
// and announces the deletion; it returns those compensations.
func deleteLockedServer(ctx context.Context, tx pgx.Tx, actor audit.Actor, cur Server, action string, extra map[string]any) ([]undoneCompensation, error) {
	rules, err := userRulesOf(ctx, tx, actor, cur)
	if err != nil {
		return nil, err
	}
	comps, err := compensationsUndoneBy(ctx, tx, cur)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `/* registry.DeleteServer */ DELETE FROM mcp_servers WHERE id = $1`, cur.ID); err != nil {
		return nil, fmt.Errorf("registry: delete server %q: %w", cur.Name, err)
	}
	payload := map[string]any{"name": cur.Name, "type": cur.Type, "tool_count": cur.ToolCount, "rules_removed": len(rules),
		"compensations_removed": len(comps)}
	maps.Copy(payload, extra)
	entries := append(removedRuleEntries(actor, cur, rules, action), removedCompensationEntries(actor, cur, comps, action)...)
	entries = append(entries, audit.Entry{Actor: actor, Action: action, TargetType: "server", TargetID: cur.ID, TargetName: cur.Name,
		Payload: payload})
	if _, err := audit.AppendBatch(ctx, tx, entries); err != nil {
		return nil, err
	}
	return comps, publishDeleted(ctx, tx, events.ServerRef{ID: cur.ID, Name: cur.Name})
}

// undoneCompensation is the compensation of another server's tool whose undo tool is on
// a server about to be deleted: tool_compensations.undo_tool_id cascades, so the
// deletion removes it and a rollback of that tool's steps has nothing to undo them.
type undoneCompensation struct {
	ToolID     string `db:"tool_id"`
	Server     string `db:"server"` // the tool's
	Tool       string `db:"tool"`
	UndoToolID string `db:"undo_tool_id"`
	Undo       string `db:"undo"` // on the server deleted
}

// compensationsUndoneBy are the compensations deleting sv removes from other servers'
// tools. Called after userRulesOf has locked sv's tools (FOR UPDATE): a compensation
// being set to undo with one of them holds a key-share lock on it, so it is read here
// once committed, or waits for the deletion.
func compensationsUndoneBy(ctx context.Context, tx pgx.Tx, sv Server) ([]undoneCompensation, error) {
	return db.All[undoneCompensation](ctx, tx, "registry: compensations undone by a server's tools", `/* registry.DeleteServer.compensations */
		SELECT c.tool_id::text AS tool_id, ts.name AS server, t.name AS tool, u.id::text AS undo_tool_id, u.name AS undo
		FROM tool_compensations c JOIN mcp_tools u ON u.id = c.undo_tool_id
			JOIN mcp_tools t ON t.id = c.tool_id JOIN mcp_servers ts ON ts.id = t.server_id
		WHERE u.server_id = $1 AND t.server_id <> $1 ORDER BY ts.name, t.name`, sv.ID)
}

// removedCompensationEntries are the tool.compensation audit entries of the
// compensations a deletion (because: its audit action) removes, as removing one on the
// tool's page is audited (undo_tool_id ""), naming the undo tool that went.
func removedCompensationEntries(actor audit.Actor, sv Server, comps []undoneCompensation, because string) []audit.Entry {
	out := make([]audit.Entry, len(comps))
	for i, c := range comps {
		out[i] = audit.Entry{Actor: actor, Action: "tool.compensation", TargetType: "tool", TargetID: c.ToolID,
			TargetName: toolname.Join(c.Server, c.Tool), Payload: map[string]any{"undo_tool_id": "", "argument_map": nil,
				"removed_undo_tool": toolname.Join(sv.Name, c.Undo), "removed_undo_tool_id": c.UndoToolID, "because": because, "server": sv.Name}}
	}
	return out
}

// publishDeleted announces a server's deletion on the servers' topic and on the tools'
// (its tools went with it: the tool list's pages follow only that topic).
func publishDeleted(ctx context.Context, tx pgx.Tx, ref events.ServerRef) error {
	if _, err := events.ServerDeleted.Publish(ctx, tx, ServersTopic, ref); err != nil {
		return err
	}
	_, err := events.ServerDeleted.Publish(ctx, tx, ToolsTopic, ref)
	return err
}

func publishChanged(ctx context.Context, tx pgx.Tx, sv Server) error {
	return publishServer(ctx, tx, sv, false)
}

// publishCreated announces a server just added.
func publishCreated(ctx context.Context, tx pgx.Tx, sv Server) error {
	return publishServer(ctx, tx, sv, true)
}

func publishServer(ctx context.Context, tx pgx.Tx, sv Server, created bool) error {
	_, err := events.ServerChanged.Publish(ctx, tx, ServersTopic, events.ServerStatus{ID: sv.ID, Name: sv.Name,
		Status: sv.Status, Enabled: sv.Enabled, ToolCount: sv.ToolCount, LastError: deref(sv.LastError), Created: created})
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// IsValidation reports whether err is a field-level input error.
func IsValidation(err error) bool {
	var ve *verr.Error
	return errors.As(err, &ve)
}
