package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/net/http/httpguts"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Server types.
const (
	TypeStdio          = "stdio"
	TypeSSE            = "sse"
	TypeStreamableHTTP = "streamable_http"
)

// Types lists the server types in the order forms show them.
var Types = []string{TypeStdio, TypeStreamableHTTP, TypeSSE}

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

// namePattern is the server name rule of docs/api.md.
var namePattern = regexp.MustCompile(`^[a-z0-9-]{1,48}$`)

// envNamePattern is what a POSIX shell accepts as a variable name.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedHeaders are set by the MCP transports themselves; letting a registration
// override them would break the protocol rather than authenticate anything.
var reservedHeaders = []string{"host", "content-length", "content-type", "accept", "connection",
	"transfer-encoding", "mcp-session-id", "mcp-protocol-version", "last-event-id"}

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

	EnvNames       []string `db:"-" json:"env_names"`
	HeaderNames    []string `db:"-" json:"header_names"`
	AuthConfigured bool     `db:"-" json:"auth_configured"`
}

// serverColumns selects a Server; tool_count counts the tools the server still lists.
const serverColumns = `s.id, s.name, s.description, s.server_type, s.command, s.args, s.working_dir, s.url,
	s.env, s.headers, s.auth_type, s.auth_header, s.auth_token, s.timeout_ms, s.retries, s.health_interval_ms,
	s.enabled, s.trusted, s.auto_enable, s.connection_status, s.last_error, s.last_connected, s.status_changed_at,
	s.server_info, s.resources, s.prompts, s.created_at, s.updated_at,
	(SELECT count(*) FROM mcp_tools t WHERE t.server_id = s.id AND t.available)::int AS tool_count`

func collectServers(rows pgx.Rows) ([]Server, error) {
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[Server])
	for i := range list {
		list[i].fill()
	}
	return list, err
}

// fill derives the public description of the secrets.
func (s *Server) fill() {
	s.EnvNames = slices.Sorted(maps.Keys(s.Env))
	s.HeaderNames = slices.Sorted(maps.Keys(s.Headers))
	s.AuthConfigured = s.AuthToken != ""
	if s.Args == nil {
		s.Args = []string{}
	}
	if s.EnvNames == nil {
		s.EnvNames = []string{}
	}
	if s.HeaderNames == nil {
		s.HeaderNames = []string{}
	}
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
	// server runs (see ChangesCommand): set it for callers without server.command. It is
	// checked against the row locked for the update, so no concurrent edit slips past it.
	KeepCommand bool
	// KeepTrust refuses (ErrTrustChange) a patch that would change whether the server
	// is trusted: set it for callers without server.trust. Checked on the locked row.
	KeepTrust bool
}

// ErrTrustChange: the patch (or a new server) sets whether a server is trusted, and the
// caller may not: trust decides risk, so only administrators do.
var ErrTrustChange = fault.Forbidden("only administrators can mark a server trusted or untrusted: trust decides how risky its tools are")

// ErrTrustedTargetChange: the patch changes what a trusted server is (where it points,
// what it runs, with which credentials), and the caller may not mark servers trusted:
// the trust an administrator gave was for the server as it was.
var ErrTrustedTargetChange = fault.Forbidden("only administrators can change what a trusted server runs or where it points (its command, URL, environment, headers or credentials): its tools' risk relies on that trust")

// ErrCommandChange: the patch changes what a stdio server runs, and the caller may not.
var ErrCommandChange = fault.Forbidden("only administrators can set what a stdio server runs on the Toolwarden host (its command, args, env and working directory)")

// PatchFromSpec is the patch that turns any server into sp (secrets replaced wholesale).
func PatchFromSpec(sp Spec) Patch {
	p := Patch{Name: &sp.Name, Description: &sp.Description, Type: &sp.Type, Command: &sp.Command,
		Args: &sp.Args, WorkingDir: &sp.WorkingDir, URL: &sp.URL, AuthType: &sp.AuthType,
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

// draft is a registration being validated: plain fields plus secrets, each either a
// stored ciphertext (kept) or a new plain value (to encrypt).
type draft struct {
	id, name, description, typ, command, workingDir, url string
	args                                                 []string
	env, headers                                         map[string]secretValue
	authType, authHeader                                 string
	authToken                                            secretValue
	timeoutMS, retries, healthIntervalMS                 int
	enabled, trusted, autoEnable                         bool
}

// secretValue is either a stored ciphertext or a new plain value.
type secretValue struct {
	cipher string
	plain  *string
}

func (v secretValue) set() bool { return v.cipher != "" || (v.plain != nil && *v.plain != "") }

func draftOf(s Server) draft {
	d := draft{id: s.ID, name: s.Name, description: s.Description, typ: s.Type, command: s.Command,
		workingDir: s.WorkingDir, url: s.URL, args: slices.Clone(s.Args), authType: s.AuthType,
		authHeader: s.AuthHeader, authToken: secretValue{cipher: s.AuthToken}, timeoutMS: s.TimeoutMS,
		retries: s.Retries, healthIntervalMS: s.HealthIntervalMS, enabled: s.Enabled, trusted: s.Trusted,
		autoEnable: s.AutoEnable, env: map[string]secretValue{}, headers: map[string]secretValue{}}
	for k, c := range s.Env {
		d.env[k] = secretValue{cipher: c}
	}
	for k, c := range s.Headers {
		d.headers[k] = secretValue{cipher: c}
	}
	return d
}

func newDraft(id string) draft {
	return draft{id: id, authType: AuthNone, timeoutMS: DefaultTimeoutMS, retries: DefaultRetries,
		healthIntervalMS: DefaultHealthIntervalMS, enabled: true,
		env: map[string]secretValue{}, headers: map[string]secretValue{}}
}

func (d *draft) apply(p Patch) {
	setIf(&d.name, p.Name)
	setIf(&d.description, p.Description)
	setIf(&d.typ, p.Type)
	setIf(&d.command, p.Command)
	if p.Args != nil {
		d.args = slices.Clone(*p.Args)
	}
	setIf(&d.workingDir, p.WorkingDir)
	setIf(&d.url, p.URL)
	applySecrets(d.env, p.Env, p.ReplaceEnv)
	applySecrets(d.headers, p.Headers, p.ReplaceHeaders)
	setIf(&d.authType, p.AuthType)
	setIf(&d.authHeader, p.AuthHeader)
	if p.AuthToken != nil {
		v := *p.AuthToken
		d.authToken = secretValue{plain: &v}
	}
	if p.TimeoutMS != nil {
		d.timeoutMS = *p.TimeoutMS
		if d.timeoutMS == 0 {
			d.timeoutMS = DefaultTimeoutMS
		}
	}
	setIf(&d.retries, p.Retries)
	if p.HealthIntervalMS != nil {
		d.healthIntervalMS = *p.HealthIntervalMS
		if d.healthIntervalMS == 0 {
			d.healthIntervalMS = DefaultHealthIntervalMS
		}
	}
	setIf(&d.enabled, p.Enabled)
	setIf(&d.trusted, p.Trusted)
	setIf(&d.autoEnable, p.AutoEnable)
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func applySecrets(dst map[string]secretValue, changes map[string]*string, replace bool) {
	if replace {
		for k := range dst {
			if _, ok := changes[k]; !ok {
				delete(dst, k)
			}
		}
	}
	for k, v := range changes {
		if v == nil {
			delete(dst, k)
			continue
		}
		val := *v
		dst[k] = secretValue{plain: &val}
	}
}

// validate normalizes d and reports every problem, keyed by the API field name.
func (d *draft) validate() error {
	var ve verr.Error
	d.name = strings.TrimSpace(d.name)
	d.description = strings.TrimSpace(d.description)
	d.command = strings.TrimSpace(d.command)
	d.url = strings.TrimSpace(d.url)
	d.workingDir = strings.TrimSpace(d.workingDir)
	d.authHeader = strings.TrimSpace(d.authHeader)
	if d.args == nil {
		d.args = []string{} // a JSON array in the row, never NULL
	}
	switch {
	case d.name == "":
		ve.Add("name", "is required: a short slug such as \"github\" or \"files-prod\"")
	case !namePattern.MatchString(d.name):
		ve.Add("name", "must be 1–48 characters of lower-case letters, digits and '-' (for example \"files-prod\")")
	}
	if utf8.RuneCountInString(d.description) > MaxDescription {
		ve.Add("description", fmt.Sprintf("must be at most %d characters", MaxDescription))
	}
	switch d.typ {
	case TypeStdio:
		if d.command == "" {
			ve.Add("command", "is required for a stdio server: the program to start, such as \"npx\" or \"/usr/local/bin/my-server\"")
		} else if strings.ContainsRune(d.command, 0) {
			ve.Add("command", "must not contain NUL characters")
		}
		for i, a := range d.args {
			if strings.ContainsRune(a, 0) {
				ve.Add(fmt.Sprintf("args/%d", i), "must not contain NUL characters")
			}
		}
		if d.workingDir != "" && !filepath.IsAbs(d.workingDir) {
			ve.Add("working_dir", "must be an absolute path (or empty for Toolwarden's own directory)")
		}
		for _, k := range slices.Sorted(maps.Keys(d.env)) {
			if !envNamePattern.MatchString(k) {
				ve.Add("env/"+k, "is not a valid variable name: use letters, digits and '_', not starting with a digit")
			} else if v := d.env[k].plain; v != nil && strings.ContainsRune(*v, 0) {
				ve.Add("env/"+k, "must not contain NUL characters")
			}
		}
		if len(d.headers) > 0 {
			ve.Add("headers", "apply to HTTP servers only; a stdio server takes its settings from env")
		}
		if d.authType != AuthNone && d.authType != "" {
			ve.Add("auth_type", "applies to HTTP servers only; pass a stdio server its token through env")
		}
	case TypeSSE, TypeStreamableHTTP:
		if d.url == "" {
			ve.Add("url", "is required for an HTTP server, for example http://127.0.0.1:3001/mcp")
		} else if msg := checkURL(d.url); msg != "" {
			ve.Add("url", msg)
		}
		if len(d.env) > 0 {
			ve.Add("env", "applies to stdio servers only")
		}
		if d.workingDir != "" {
			ve.Add("working_dir", "applies to stdio servers only")
		}
		if d.command != "" || len(d.args) > 0 {
			ve.Add("command", "applies to stdio servers only")
		}
		seen := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(d.headers)) {
			lower := strings.ToLower(k)
			switch {
			case !httpguts.ValidHeaderFieldName(k):
				ve.Add("headers/"+k, "is not a valid header name")
			case slices.Contains(reservedHeaders, lower):
				ve.Add("headers/"+k, "is set by the MCP transport and cannot be overridden")
			case seen[lower] != "":
				ve.Add("headers/"+k, fmt.Sprintf("duplicates %q (header names ignore case)", seen[lower]))
			}
			seen[lower] = k
			if v := d.headers[k].plain; v != nil && !httpguts.ValidHeaderFieldValue(*v) {
				ve.Add("headers/"+k, "value must not contain line breaks or control characters")
			}
		}
		switch d.authType {
		case "", AuthNone:
			d.authType = AuthNone
			d.authHeader = ""
		case AuthBearer, AuthHeader:
			if !d.authToken.set() {
				ve.Add("auth_token", "is required when authentication is "+d.authType)
			} else if v := d.authToken.plain; v != nil && !httpguts.ValidHeaderFieldValue(*v) {
				ve.Add("auth_token", "must not contain line breaks or control characters")
			}
			if d.authType == AuthBearer {
				d.authHeader = ""
				if _, ok := seen["authorization"]; ok {
					ve.Add("headers/"+seen["authorization"], "conflicts with bearer authentication; remove one of them")
				}
			} else if d.authHeader == "" {
				ve.Add("auth_header", "is required for custom-header authentication, for example X-API-Key")
			} else if !httpguts.ValidHeaderFieldName(d.authHeader) {
				ve.Add("auth_header", "is not a valid header name")
			} else if slices.Contains(reservedHeaders, strings.ToLower(d.authHeader)) {
				ve.Add("auth_header", "is set by the MCP transport and cannot be used")
			} else if k, ok := seen[strings.ToLower(d.authHeader)]; ok {
				ve.Add("headers/"+k, "conflicts with the authentication header; remove one of them")
			}
		default:
			ve.Add("auth_type", "must be none, bearer or header")
		}
	case "":
		ve.Add("type", "is required: stdio, sse or streamable_http")
	default:
		ve.Add("type", fmt.Sprintf("%q is not a server type: use stdio, sse or streamable_http", d.typ))
	}
	if d.authType == "" || d.typ == TypeStdio {
		d.authType = AuthNone
		d.authHeader = ""
	}
	if d.authType == AuthNone {
		d.authToken = secretValue{}
	}
	if d.timeoutMS < MinTimeoutMS || d.timeoutMS > MaxTimeoutMS {
		ve.Add("timeout_ms", fmt.Sprintf("must be between %d and %d milliseconds", MinTimeoutMS, MaxTimeoutMS))
	}
	if d.retries < 0 || d.retries > MaxRetries {
		ve.Add("retries", fmt.Sprintf("must be between 0 and %d", MaxRetries))
	}
	if d.healthIntervalMS < MinHealthIntervalMS || d.healthIntervalMS > MaxHealthIntervalMS {
		ve.Add("health_interval_ms", fmt.Sprintf("must be between %d and %d milliseconds", MinHealthIntervalMS, MaxHealthIntervalMS))
	}
	return ve.Err()
}

// argRef is a ${NAME} reference in an argument to one of the server's env variables.
var argRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandArgs replaces each ${NAME} in args with env[NAME], so a stdio server that takes
// its token as an argument gets it from an encrypted env value rather than from an
// argument stored (and shown) in plain text. References to names env does not have are
// left as they are.
func ExpandArgs(args []string, env map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = argRef.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// missingRef returns the first ${NAME} in a that env does not define, or "".
func missingRef[V any](a string, env map[string]V) string {
	for _, m := range argRef.FindAllStringSubmatch(a, -1) {
		if _, ok := env[m[1]]; !ok {
			return m[1]
		}
	}
	return ""
}

// secretArg says why args[i] looks like a credential, or returns "". An argument with a
// ${NAME} reference takes its credential from env, so only a literal credential beside
// the reference counts.
func secretArg(args []string, i int) string {
	a := args[i]
	if argRef.MatchString(a) {
		for _, w := range strings.Fields(argRef.ReplaceAllString(a, " ")) {
			if secrets.LooksSecretValue(strings.Trim(w, `"':=,;`)) {
				return "it has the shape of a credential"
			}
		}
		return ""
	}
	prev := ""
	if i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.ContainsAny(args[i-1], "= ") {
		prev = args[i-1]
	}
	return literalSecret(a, prev)
}

// literalSecret: see secretArg; prev is the flag before a, if any.
func literalSecret(a, prev string) string {
	a = strings.TrimSpace(a)
	secretFlag := func(f string) bool { return secrets.LooksSecretName(strings.TrimLeft(f, "-")) }
	switch {
	case a == "":
		return ""
	case secrets.LooksSecretValue(a):
		return "it has the shape of a credential"
	}
	if k, v, ok := strings.Cut(a, "="); ok && k != "" && !strings.ContainsAny(k, " \t:") {
		if v == "" {
			return ""
		}
		if secretFlag(k) {
			return "the value of " + k
		}
		if why := literalSecret(v, ""); why != "" {
			return "the value of " + k + ": " + why
		}
		return ""
	}
	if name, v, ok := strings.Cut(a, ":"); ok && httpguts.ValidHeaderFieldName(name) && strings.HasPrefix(v, " ") {
		// A header such as mcp-remote's --header "Authorization: Bearer …".
		if v = strings.TrimSpace(v); v != "" && (secrets.LooksSecretName(name) || secrets.LooksSecretValue(v)) {
			return "the value of the " + name + " header"
		}
		return ""
	}
	if f, v, ok := strings.Cut(a, " "); ok && strings.HasPrefix(f, "-") && secretFlag(f) && strings.TrimSpace(v) != "" {
		return "the value of " + f
	}
	if prev != "" && !strings.HasPrefix(a, "-") && secretFlag(prev) {
		return "it follows " + prev
	}
	return ""
}

// secretInURL names the query parameter of raw that looks like a credential, or "".
func secretInURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	q := u.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[k] {
			if v != "" && (secrets.LooksSecretName(k) || secrets.LooksSecretValue(v)) {
				return k
			}
		}
	}
	return ""
}

// validateChange validates d as the new state of cur (nil for a new server): the rules
// of validate, and stored secrets never follow a server to another origin. Whoever may
// edit a server must not be able to point it at their own host and collect its stored
// header values and token there; after such a move each must be entered again.
func (d *draft) validateChange(cur *draft) error {
	err := d.validate()
	if err == nil {
		err = d.checkPlainText(cur)
	}
	if cur == nil || cur.typ == TypeStdio || d.typ == TypeStdio || origin(cur.url) == origin(d.url) {
		return err
	}
	var ve verr.Error
	if err != nil {
		var pve *verr.Error
		if !errors.As(err, &pve) {
			return err
		}
		ve = *pve
	}
	if ve.For("url") != "" {
		return err // the URL itself is wrong: that is the one thing to fix
	}
	moved := fmt.Sprintf("is stored for %s; enter it again to send it to %s, or remove it", origin(cur.url), origin(d.url))
	for _, k := range slices.Sorted(maps.Keys(d.headers)) {
		if d.headers[k].plain == nil && ve.For("headers/"+k) == "" {
			ve.Add("headers/"+k, moved)
		}
	}
	if d.authType != AuthNone && d.authToken.plain == nil && d.authToken.cipher != "" && ve.For("auth_token") == "" {
		ve.Add("auth_token", moved)
	}
	return ve.Err()
}

// checkPlainText refuses credentials in the fields stored in plain text (args, URL) and
// ${NAME} references to env variables the server does not have. Only what this change
// sets is checked, so a server registered before these rules can still be edited.
func (d *draft) checkPlainText(cur *draft) error {
	var ve verr.Error
	if d.typ == TypeStdio && (cur == nil || !slices.Equal(cur.args, d.args) || !slices.Equal(slices.Sorted(maps.Keys(cur.env)), slices.Sorted(maps.Keys(d.env)))) {
		for i, a := range d.args {
			if name := missingRef(a, d.env); name != "" {
				ve.Add(fmt.Sprintf("args/%d", i), fmt.Sprintf("refers to ${%s}, but env has no %s: add it under environment variables, or write the value here", name, name))
			} else if why := secretArg(d.args, i); why != "" {
				ve.Add(fmt.Sprintf("args/%d", i), "looks like a secret ("+why+"), and arguments are stored and shown in plain text: "+
					"put the value in an env variable, which is stored encrypted, and write ${NAME} here; Toolwarden substitutes it when it starts the server")
			}
		}
	}
	if d.typ != TypeStdio && (cur == nil || cur.url != d.url) {
		if k := secretInURL(d.url); k != "" {
			ve.Add("url", fmt.Sprintf("carries a secret in its query (%s), and URLs are stored and shown in plain text: "+
				"send it as a header or with Authentication instead, which are stored encrypted", k))
		}
	}
	return ve.Err()
}

// origin is scheme://host:port of a URL, lower-cased, with the scheme's default port
// spelled out; "" when it has no host.
func origin(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port)
}

func checkURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must start with http:// or https://"
	case u.Host == "":
		return "must include a host, for example http://127.0.0.1:3001/mcp"
	case u.User != nil:
		return "must not contain credentials; use Authentication or a header instead"
	case u.Fragment != "":
		return "must not contain a #fragment"
	}
	return ""
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
	addTarget(m, d.typ, d.command, d.args, d.workingDir, d.url, slices.Sorted(maps.Keys(d.env)), slices.Sorted(maps.Keys(d.headers)))
	if d.typ != TypeStdio {
		m["auth_type"], m["auth_header"] = d.authType, d.authHeader
	}
	return m
}

// addTarget adds what a registration connects to (never secret values, only their names)
// to an audit payload.
func addTarget(m map[string]any, typ, command string, args []string, workingDir, url string, envNames, headerNames []string) {
	if typ == TypeStdio {
		m["command"], m["args"], m["working_dir"], m["env_names"] = command, args, workingDir, envNames
	} else {
		m["url"], m["header_names"] = url, headerNames
	}
}

// CreateServer registers a server. Bad input returns a *verr.Error naming each field.
func (s *Service) CreateServer(ctx context.Context, actor audit.Actor, sp Spec) (Server, error) {
	d := newDraft(uuid.NewString())
	d.apply(PatchFromSpec(sp))
	if err := d.validateChange(nil); err != nil {
		return Server{}, err
	}
	var out Server
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.insert(ctx, tx, d)
		if err != nil {
			return err
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "server.create", TargetType: "server",
			TargetID: out.ID, TargetName: out.Name, Payload: d.auditView()}); err != nil {
			return err
		}
		return publishChanged(ctx, tx, out)
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
			auto_enable)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
		d.id, d.name, d.description, d.typ, d.command, d.args, d.workingDir, d.url, sl.env, sl.headers,
		d.authType, d.authHeader, sl.authToken, d.timeoutMS, d.retries, d.healthIntervalMS, d.enabled, d.trusted, initial,
		d.autoEnable)
	if err != nil {
		return Server{}, writeError("create", d.name, err)
	}
	return getServer(ctx, tx, d.id, false)
}

// UpdateServer applies p to the server id.
func (s *Service) UpdateServer(ctx context.Context, actor audit.Actor, id string, p Patch) (Server, error) {
	var out Server
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := getServer(ctx, tx, id, true)
		if err != nil {
			return err
		}
		d, before := draftOf(cur), draftOf(cur)
		d.apply(p)
		if p.KeepCommand && commandChanged(&before, d) {
			return ErrCommandChange
		}
		if p.KeepTrust && d.trusted != before.trusted {
			return ErrTrustChange
		}
		if p.KeepTrust && before.trusted && targetChanged(&before, d) {
			return ErrTrustedTargetChange
		}
		if err := d.validateChange(&before); err != nil {
			return err
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
	_, err = tx.Exec(ctx, `/* registry.UpdateServer */
		UPDATE mcp_servers SET name = $2, description = $3, server_type = $4, command = $5, args = $6,
			working_dir = $7, url = $8, env = $9, headers = $10, auth_type = $11, auth_header = $12,
			auth_token = $13, timeout_ms = $14, retries = $15, health_interval_ms = $16, enabled = $17,
			trusted = $18, connection_status = $19, auto_enable = $20,
			status_changed_at = CASE WHEN connection_status = $19 THEN status_changed_at ELSE now() END,
			updated_at = now()
		WHERE id = $1`,
		d.id, d.name, d.description, d.typ, d.command, d.args, d.workingDir, d.url, sl.env, sl.headers,
		d.authType, d.authHeader, sl.authToken, d.timeoutMS, d.retries, d.healthIntervalMS, d.enabled, d.trusted, status,
		d.autoEnable)
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

// connectionChanged reports whether next connects differently from cur (so the live
// session must be replaced).
func connectionChanged(cur, next draft) bool {
	if cur.typ != next.typ || cur.command != next.command || !slices.Equal(cur.args, next.args) ||
		cur.workingDir != next.workingDir || cur.url != next.url || cur.authType != next.authType ||
		cur.authHeader != next.authHeader || cur.timeoutMS != next.timeoutMS || cur.retries != next.retries ||
		cur.healthIntervalMS != next.healthIntervalMS || next.authToken.plain != nil {
		return true
	}
	for _, pair := range [][2]map[string]secretValue{{cur.env, next.env}, {cur.headers, next.headers}} {
		if len(pair[0]) != len(pair[1]) {
			return true
		}
		for k, v := range pair[1] {
			if _, ok := pair[0][k]; !ok || v.plain != nil {
				return true
			}
		}
	}
	return false
}

// ChangesCommand reports whether applying p to cur (nil for a new server) sets what a
// stdio server runs on the host: its type becomes stdio, or its command, args, working
// directory or env change. Such a change needs auth.PermServerCommand.
func ChangesCommand(cur *Server, p Patch) bool {
	next := newDraft("")
	var before *draft
	if cur != nil {
		d := draftOf(*cur)
		before, next = &d, draftOf(*cur)
	}
	next.apply(p)
	return commandChanged(before, next)
}

// commandChanged: see ChangesCommand.
func commandChanged(cur *draft, next draft) bool {
	if next.typ != TypeStdio {
		return false
	}
	if cur == nil || cur.typ != TypeStdio || cur.command != strings.TrimSpace(next.command) ||
		!slices.Equal(cur.args, next.args) && !(len(cur.args) == 0 && len(next.args) == 0) ||
		cur.workingDir != strings.TrimSpace(next.workingDir) || len(cur.env) != len(next.env) {
		return true
	}
	for k, v := range next.env {
		if _, ok := cur.env[k]; !ok || v.plain != nil {
			return true
		}
	}
	return false
}

// ChangesTrustedTarget reports whether applying p to the trusted server cur changes
// what it is (see ErrTrustedTargetChange); false for an untrusted one.
func ChangesTrustedTarget(cur Server, p Patch) bool {
	if !cur.Trusted {
		return false
	}
	before, next := draftOf(cur), draftOf(cur)
	next.apply(p)
	return targetChanged(&before, next)
}

// targetChanged: what the server runs or reaches, and with which secrets, differs.
func targetChanged(cur *draft, next draft) bool {
	if commandChanged(cur, next) {
		return true
	}
	if cur.typ != next.typ || cur.url != strings.TrimSpace(next.url) || cur.authType != next.authType ||
		cur.authHeader != next.authHeader || next.authToken.plain != nil || len(cur.headers) != len(next.headers) {
		return true
	}
	for k, v := range next.headers {
		if _, ok := cur.headers[k]; !ok || v.plain != nil {
			return true
		}
	}
	return false
}

// SetEnabled enables or disables a server (a disabled server has no session).
func (s *Service) SetEnabled(ctx context.Context, actor audit.Actor, id string, enabled bool) (Server, error) {
	return s.UpdateServer(ctx, actor, id, Patch{Enabled: &enabled})
}

// DeleteServer removes a server and, with it, its tools and their history.
func (s *Service) DeleteServer(ctx context.Context, actor audit.Actor, id string) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := getServer(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `/* registry.DeleteServer */ DELETE FROM mcp_servers WHERE id = $1`, id); err != nil {
			return fmt.Errorf("registry: delete server %q: %w", cur.Name, err)
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "server.delete", TargetType: "server",
			TargetID: cur.ID, TargetName: cur.Name, Payload: map[string]any{"name": cur.Name, "type": cur.Type, "tool_count": cur.ToolCount}}); err != nil {
			return err
		}
		_, err = events.ServerDeleted.Publish(ctx, tx, ServersTopic, events.ServerRef{ID: cur.ID, Name: cur.Name})
		return err
	})
}

func publishChanged(ctx context.Context, tx pgx.Tx, sv Server) error {
	_, err := events.ServerChanged.Publish(ctx, tx, ServersTopic, events.ServerStatus{ID: sv.ID, Name: sv.Name,
		Status: sv.Status, Enabled: sv.Enabled, ToolCount: sv.ToolCount, LastError: deref(sv.LastError)})
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// GetServer returns one server by id.
func (s *Service) GetServer(ctx context.Context, id string) (Server, error) {
	return getServer(ctx, s.pool, id, false)
}

func getServer(ctx context.Context, q db.Querier, id string, forUpdate bool) (Server, error) {
	if uuid.Validate(id) != nil {
		return Server{}, ErrNotFound
	}
	lock := ""
	if forUpdate {
		lock = " FOR UPDATE"
	}
	return oneServer(ctx, q, "get server", `/* registry.GetServer */ SELECT `+serverColumns+` FROM mcp_servers s WHERE s.id = $1`+lock, id)
}

// oneServer runs a query for at most one server; none is ErrNotFound.
func oneServer(ctx context.Context, q db.Querier, what, sql string, args ...any) (Server, error) {
	list, err := db.All[Server](ctx, q, "registry: "+what, sql, args...)
	if err != nil {
		return Server{}, err
	}
	if len(list) == 0 {
		return Server{}, ErrNotFound
	}
	list[0].fill()
	return list[0], nil
}

// GetServerByName returns one server by its name.
func (s *Service) GetServerByName(ctx context.Context, name string) (Server, error) {
	return oneServer(ctx, s.pool, "get server "+strconv.Quote(name),
		`/* registry.GetServerByName */ SELECT `+serverColumns+` FROM mcp_servers s WHERE s.name = $1`, name)
}

// ListQuery filters and pages ListServers.
type ListQuery struct {
	Q       string // matches name and description, case-insensitively
	Status  string // one of Statuses, or "" for all
	Type    string // one of Types, or ""
	Enabled *bool
	Limit   int // default 24, at most 200
	Offset  int
}

// ListServers returns one page of servers by name, and how many match in all.
func (s *Service) ListServers(ctx context.Context, lq ListQuery) ([]Server, int, error) {
	if lq.Limit <= 0 {
		lq.Limit = 24
	}
	lq.Limit = min(lq.Limit, 200)
	lq.Offset = max(lq.Offset, 0)
	where := `WHERE ($1 = '' OR s.name ILIKE '%' || $1 || '%' OR s.description ILIKE '%' || $1 || '%')
		AND ($2 = '' OR s.connection_status = $2) AND ($3 = '' OR s.server_type = $3)
		AND ($4::boolean IS NULL OR s.enabled = $4)`
	q := db.EscapeLike(strings.TrimSpace(lq.Q))
	var total int
	if err := s.pool.QueryRow(ctx, `/* registry.CountServers */ SELECT count(*) FROM mcp_servers s `+where,
		q, lq.Status, lq.Type, lq.Enabled).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("registry: count servers: %w", err)
	}
	rows, err := s.pool.Query(ctx, `/* registry.ListServers */ SELECT `+serverColumns+` FROM mcp_servers s `+where+`
		ORDER BY s.name LIMIT $5 OFFSET $6`, q, lq.Status, lq.Type, lq.Enabled, lq.Limit, lq.Offset)
	if err != nil {
		return nil, 0, fmt.Errorf("registry: list servers: %w", err)
	}
	list, err := collectServers(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("registry: list servers: %w", err)
	}
	return list, total, nil
}

// EnabledServerIDs lists the servers that should have a live session.
func (s *Service) EnabledServerIDs(ctx context.Context) ([]string, error) {
	return db.Column[string](ctx, s.pool, "registry: enabled servers",
		`/* registry.EnabledServerIDs */ SELECT id::text FROM mcp_servers WHERE enabled ORDER BY name`)
}

// CountServers returns how many servers are registered, by status.
func (s *Service) CountServers(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `/* registry.CountServersByStatus */ SELECT connection_status, count(*)::int FROM mcp_servers GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("registry: count servers: %w", err)
	}
	out := map[string]int{}
	var st string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[st] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("registry: count servers: %w", err)
	}
	return out, nil
}

// IsValidation reports whether err is a field-level input error.
func IsValidation(err error) bool {
	var ve *verr.Error
	return errors.As(err, &ve)
}
