package registry

// Configuration as code (seed 004 scenario 4): server registrations exported to a YAML
// file that lives in version control, and imported back — from that file or from the
// files MCP clients already have (Claude Desktop, .mcp.json, VS Code) — as a reviewed
// plan applied in one transaction. Secret values never leave the database.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/tidwall/jsonc"
	"go.yaml.in/yaml/v3"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ConfigVersion is the version of the native configuration format that Export writes.
const ConfigVersion = 1

// Configuration file formats ParseConfig reads.
const (
	FormatToolwarden = "toolwarden" // Toolwarden's own YAML (Export)
	FormatClaude     = "claude"     // claude_desktop_config.json and .mcp.json: {"mcpServers": {...}}
	FormatVSCode     = "vscode"     // VS Code's mcp.json: {"servers": {...}, "inputs": [...]}
)

// formatTitles name the formats for people.
var formatTitles = map[string]string{
	FormatToolwarden: "Toolwarden YAML",
	FormatClaude:     "Claude Desktop / .mcp.json",
	FormatVSCode:     "VS Code mcp.json",
}

// Config is a configuration file, parsed. Servers are sorted by name.
type Config struct {
	File     string // as given to ParseConfig; used in messages
	Format   string // FormatToolwarden, FormatClaude or FormatVSCode
	Servers  []ServerConfig
	Warnings []Problem
}

// ServerConfig is one server as a file states it. A nil field is one the file's format
// cannot express: the stored value stays (or the default, for a new server). Files in
// the native format state every field. In Env and Headers, every name the server should
// have is listed; a nil value means "keep the stored value" — secret values are never
// exported, so a file usually says only which secrets exist.
type ServerConfig struct {
	Name             string
	Type             string
	Description      *string
	Command          string
	Args             []string
	WorkingDir       *string
	URL              string
	Env              map[string]*string
	Headers          map[string]*string
	Auth             *AuthConfig
	TimeoutMS        *int
	Retries          *int
	HealthIntervalMS *int
	Enabled          *bool
	Trusted          *bool
	AutoEnable       *bool
}

// AuthConfig is the authentication of an HTTP server. Token nil keeps the stored token.
type AuthConfig struct {
	Type   string // AuthNone, AuthBearer or AuthHeader
	Header string // for AuthHeader
	Token  *string
}

// Problem is one error or warning about a configuration file or an import plan. It
// names the file, the server (when there is one) and the field (when there is one).
type Problem struct {
	File    string `json:"file"`
	Server  string `json:"server,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Server != "" {
		fmt.Fprintf(&b, ": server %q", p.Server)
	}
	if p.Field != "" {
		b.WriteString(": " + p.Field)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// ConfigError is every problem found in a configuration file or an import plan.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// ErrInvalidPlan is returned by ApplyImport for a plan that has errors.
var ErrInvalidPlan = errors.New("registry: the import plan has errors; nothing was changed")

// ─── Export ──────────────────────────────────────────────────────────────────────────

// exportHeader opens every exported file: the file is meant to be read, diffed and
// edited by people, who need to know why the secrets look empty.
const exportHeader = `# Toolwarden MCP servers: written by 'toolwarden export', read by 'toolwarden import'.
#
# Secret values are never exported. env and headers list each secret by name with a
# null value, and an auth block never holds its token. On import:
#   - a null value keeps the value already stored for that name;
#   - a name that is not stored yet is skipped with a warning: set it after import;
#   - a value written here replaces the stored one; 'toolwarden import' expands
#     ${env:NAME} and ${NAME} from its environment, so secrets can come from CI;
#   - a name removed from the file removes that secret.
`

// configFile is the native format. Field order here is the order in the file.
type configFile struct {
	Version int            `yaml:"version"`
	Servers []configServer `yaml:"servers"`
}

type configServer struct {
	Name             string             `yaml:"name"`
	Type             string             `yaml:"type"`
	Description      string             `yaml:"description,omitempty"`
	Command          string             `yaml:"command,omitempty"`
	Args             []string           `yaml:"args,omitempty,flow"`
	WorkingDir       string             `yaml:"working_dir,omitempty"`
	URL              string             `yaml:"url,omitempty"`
	Env              map[string]*string `yaml:"env,omitempty"`
	Headers          map[string]*string `yaml:"headers,omitempty"`
	Auth             *configAuth        `yaml:"auth,omitempty"`
	TimeoutMS        int                `yaml:"timeout_ms"`
	Retries          int                `yaml:"retries"`
	HealthIntervalMS int                `yaml:"health_interval_ms"`
	Enabled          bool               `yaml:"enabled"`
	Trusted          bool               `yaml:"trusted"`
	AutoEnable       bool               `yaml:"auto_enable,omitempty"` // written only when on
}

type configAuth struct {
	Type   string `yaml:"type"`
	Header string `yaml:"header,omitempty"`
}

// Export writes every registered server in the native format. The output depends only
// on the registrations: servers by name, keys in a fixed order, no timestamps or ids,
// so exporting an unchanged database twice gives identical bytes and a diff in version
// control shows only real changes. It decrypts nothing.
func (s *Service) Export(ctx context.Context) ([]byte, error) {
	list, err := allServers(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	f := configFile{Version: ConfigVersion, Servers: make([]configServer, 0, len(list))}
	for _, sv := range list {
		cs := configServer{Name: sv.Name, Type: sv.Type, Description: sv.Description,
			TimeoutMS: sv.TimeoutMS, Retries: sv.Retries, HealthIntervalMS: sv.HealthIntervalMS,
			Enabled: sv.Enabled, Trusted: sv.Trusted, AutoEnable: sv.AutoEnable}
		if sv.Type == TypeStdio {
			cs.Command, cs.Args, cs.WorkingDir = sv.Command, sv.Args, sv.WorkingDir
		} else {
			cs.URL = sv.URL
			if sv.AuthType != AuthNone && sv.AuthType != "" {
				cs.Auth = &configAuth{Type: sv.AuthType, Header: sv.AuthHeader}
			}
		}
		cs.Env, cs.Headers = namesOnly(sv.Env), namesOnly(sv.Headers)
		f.Servers = append(f.Servers, cs)
	}
	var buf bytes.Buffer
	buf.WriteString(exportHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("registry: export: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("registry: export: %w", err)
	}
	return buf.Bytes(), nil
}

// namesOnly maps each secret name to nil: the value is not exported.
func namesOnly(m map[string]string) map[string]*string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k := range m {
		out[k] = nil
	}
	return out
}

func allServers(ctx context.Context, q db.Querier) ([]Server, error) {
	rows, err := q.Query(ctx, `/* registry.AllServers */ SELECT `+serverColumns+` FROM mcp_servers s ORDER BY s.name`)
	if err != nil {
		return nil, fmt.Errorf("registry: list servers: %w", err)
	}
	list, err := collectServers(rows)
	if err != nil {
		return nil, fmt.Errorf("registry: list servers: %w", err)
	}
	return list, nil
}

// ─── Parsing ─────────────────────────────────────────────────────────────────────────

// ParseOptions tunes ParseConfig.
type ParseOptions struct {
	// ExpandEnv replaces ${env:NAME} and ${NAME} (also ${NAME:-default}) with the
	// variable's value. The command line sets it: its environment is the admin's. The
	// web UI does not: the server's environment is not the uploader's to read.
	// Without it, references are kept literally, with a warning.
	ExpandEnv bool
	// LookupEnv reads a variable (the command line passes os.LookupEnv); nil finds none.
	LookupEnv func(name string) (string, bool)
}

// maxConfigSize bounds what ParseConfig reads; a real file is a few kilobytes.
const maxConfigSize = 4 << 20

// ParseConfig reads a configuration file: Toolwarden's YAML (Export), Claude Desktop's
// claude_desktop_config.json or a .mcp.json ({"mcpServers": {...}}), or VS Code's
// mcp.json ({"servers": {...}, "inputs": [...]}, also nested under "mcp" in a settings
// file). The format is recognized by content; filename names the file in messages and
// breaks a tie only when the content is empty of servers. Server names that are not
// slugs are turned into slugs, with a warning. Every problem is reported at once as a
// *ConfigError.
func ParseConfig(filename string, data []byte, opts ParseOptions) (*Config, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	p := &parser{file: filename, opts: opts, cfg: &Config{File: filename}}
	if len(data) > maxConfigSize {
		p.fail("", "", fmt.Sprintf("is larger than %d bytes; is it the right file?", maxConfigSize))
		return nil, p.err()
	}
	root, ok := p.decode(data)
	if !ok {
		return nil, p.err()
	}
	p.cfg.Format = p.detect(root)
	switch p.cfg.Format {
	case FormatToolwarden:
		p.native(root.(map[string]any))
	case FormatClaude:
		p.clients(root.(map[string]any), "mcpServers")
	case FormatVSCode:
		m := root.(map[string]any)
		if nested, ok := m["mcp"].(map[string]any); ok && m["servers"] == nil {
			m = nested
		}
		p.readInputs(m["inputs"])
		p.clients(m, "servers")
	default:
		return nil, p.err()
	}
	p.finish()
	if err := p.err(); err != nil {
		return nil, err
	}
	return p.cfg, nil
}

type parser struct {
	file   string
	opts   ParseOptions
	cfg    *Config
	errs   []Problem
	inputs map[string]string // VS Code input id → its description
	named  []namedServer
}

type namedServer struct {
	orig string // the name as the file spells it
	sc   ServerConfig
}

func (p *parser) fail(server, field, msg string) {
	p.errs = append(p.errs, Problem{File: p.file, Server: server, Field: field, Message: msg})
}

func (p *parser) warn(server, field, msg string) {
	p.cfg.Warnings = append(p.cfg.Warnings, Problem{File: p.file, Server: server, Field: field, Message: msg})
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return &ConfigError{Problems: p.errs}
}

// decode turns JSON (with comments and trailing commas, as VS Code writes them) or YAML
// into a tree of nil, bool, string, json.Number, []any and map[string]any.
func (p *parser) decode(data []byte) (any, bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		p.fail("", "", "is empty")
		return nil, false
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		// jsonc blanks comments and trailing commas byte for byte, so encoding/json's
		// offsets (and the line and column in its errors) are those of the file.
		clean := jsonc.ToJSON(data)
		dec := json.NewDecoder(bytes.NewReader(clean))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			p.fail("", "", "is not valid JSON: "+jsonError(clean, err))
			return nil, false
		}
		if off := dec.InputOffset(); len(bytes.TrimSpace(clean[off:])) > 0 {
			off += int64(len(clean[off:]) - len(bytes.TrimLeft(clean[off:], " \t\r\n")))
			p.fail("", "", "is not valid JSON: "+at(clean, off, "unexpected data after the end of the top-level object"))
			return nil, false
		}
		return v, true
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.fail("", "", "is not valid YAML: "+strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, false
	}
	v, err := fromYAML(&doc, 0)
	if err != nil {
		p.fail("", "", "is not valid YAML: "+err.Error())
		return nil, false
	}
	return v, true
}

// jsonError describes a JSON decoding error with its line and column.
func jsonError(data []byte, err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "the file ends too early (a missing } or ]?)"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return at(data, se.Offset-1, strings.TrimPrefix(err.Error(), "json: ")) // Offset counts the bad byte
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// at prefixes msg with the line and column of the byte at index off of data.
func at(data []byte, off int64, msg string) string {
	off = min(max(off, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, column %d: %s", line, col, msg)
}

// fromYAML converts a YAML node into the same tree JSON decodes to, keeping scalars'
// text (so `PORT: 3000` stays "3000", not a float) and refusing duplicate keys.
func fromYAML(n *yaml.Node, depth int) (any, error) {
	if depth > 64 {
		return nil, errors.New("nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromYAML(n.Content[0], depth+1)
	case yaml.AliasNode:
		return fromYAML(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := fromYAML(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key must be a plain value", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q appears twice", k.Line, k.Value)
			}
			v, err := fromYAML(vn, depth+1)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			return b, nil
		case "!!int", "!!float":
			return json.Number(n.Value), nil
		}
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// detect recognizes the format by the keys at the top of the file.
func (p *parser) detect(root any) string {
	m, ok := root.(map[string]any)
	if !ok {
		p.fail("", "", "must hold a mapping at the top: version and servers (Toolwarden), mcpServers (Claude Desktop, .mcp.json) or servers (VS Code mcp.json)")
		return ""
	}
	if _, ok := m["mcpServers"]; ok {
		return FormatClaude
	}
	switch m["servers"].(type) {
	case []any:
		return FormatToolwarden
	case map[string]any:
		return FormatVSCode
	}
	if _, ok := m["version"]; ok {
		return FormatToolwarden
	}
	if nested, ok := m["mcp"].(map[string]any); ok {
		if _, ok := nested["servers"]; ok {
			return FormatVSCode
		}
	}
	// Nothing in the content says which format this is: a Claude Desktop config
	// without servers yet is still one.
	switch base := strings.ToLower(filepath.Base(p.file)); {
	case base == "claude_desktop_config.json" || base == ".mcp.json":
		p.warn("", "mcpServers", "is missing: the file lists no servers")
		m["mcpServers"] = map[string]any{}
		return FormatClaude
	case base == "mcp.json":
		p.warn("", "servers", "is missing: the file lists no servers")
		m["servers"] = map[string]any{}
		return FormatVSCode
	}
	p.fail("", "", "is not a server configuration Toolwarden knows: expected version and servers (Toolwarden), mcpServers (Claude Desktop, .mcp.json) or servers (VS Code mcp.json)")
	return ""
}

// native reads Toolwarden's own format. Unknown keys are errors: in a file kept in
// version control a misspelt key must not be silently ignored.
func (p *parser) native(m map[string]any) {
	top := &obj{p: p, m: m, strict: true}
	switch v, ok := m["version"]; {
	case !ok:
		p.fail("", "version", fmt.Sprintf("is missing: the first line of the file should be version: %d", ConfigVersion))
	default:
		if n, ok := v.(json.Number); !ok || n.String() != strconv.Itoa(ConfigVersion) {
			p.fail("", "version", fmt.Sprintf("%s is not a version this Toolwarden reads (want %d)", describe(v), ConfigVersion))
		}
	}
	top.used("version")
	list, ok := m["servers"].([]any)
	if !ok && m["servers"] != nil {
		p.fail("", "servers", "must be a list of servers")
	}
	top.used("servers")
	top.finish()
	for i, item := range list {
		sm, ok := item.(map[string]any)
		if !ok {
			p.fail("", fmt.Sprintf("servers[%d]", i), "must be a mapping with name, type, ...")
			continue
		}
		name, _ := scalarString(sm["name"])
		o := &obj{p: p, server: name, m: sm, strict: true}
		if name == "" {
			o.server = fmt.Sprintf("#%d", i+1)
			p.fail(o.server, "name", "is required")
		}
		o.used("name")
		sc := ServerConfig{
			Description:      ptr(o.str("description")),
			WorkingDir:       ptr(o.expanded("working_dir")),
			Env:              o.secrets("env"),
			Headers:          o.secrets("headers"),
			TimeoutMS:        ptr(o.integer("timeout_ms", DefaultTimeoutMS)),
			Retries:          ptr(o.integer("retries", DefaultRetries)),
			HealthIntervalMS: ptr(o.integer("health_interval_ms", DefaultHealthIntervalMS)),
			Enabled:          ptr(o.boolean("enabled", true)),
			Trusted:          ptr(o.boolean("trusted", false)),
			AutoEnable:       ptr(o.boolean("auto_enable", false)),
			Auth:             &AuthConfig{Type: AuthNone},
		}
		sc.Type, sc.Command, sc.Args, sc.URL = o.transport()
		if am, ok := sm["auth"]; ok && am != nil {
			if a, ok := am.(map[string]any); ok {
				ao := &obj{p: p, server: o.server, prefix: "auth.", m: a, strict: true}
				sc.Auth.Type = ao.str("type")
				if sc.Auth.Type == "" {
					sc.Auth.Type = AuthNone
					if _, ok := a["type"]; !ok {
						p.fail(o.server, "auth.type", "is required: none, bearer or header")
					}
				}
				sc.Auth.Header = ao.str("header")
				sc.Auth.Token = ao.secret("token")
				ao.finish()
			} else {
				p.fail(o.server, "auth", "must be a mapping with type, header and token")
			}
		}
		o.used("auth")
		o.finish()
		p.named = append(p.named, namedServer{orig: name, sc: sc})
	}
}

// clients reads the MCP client formats (Claude Desktop, .mcp.json, VS Code): a map from
// name to server. Keys Toolwarden has no use for are ignored, with a warning.
func (p *parser) clients(m map[string]any, key string) {
	raw, ok := m[key]
	if !ok || raw == nil {
		p.warn("", key, "is missing: the file lists no servers")
		return
	}
	servers, ok := raw.(map[string]any)
	if !ok {
		p.fail("", key, "must be an object mapping each server's name to its settings")
		return
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		sm, ok := servers[name].(map[string]any)
		if !ok {
			p.fail(name, "", "must be an object with command/args/env or type/url/headers")
			continue
		}
		o := &obj{p: p, server: name, m: sm}
		sc := ServerConfig{Name: name, Env: o.secrets("env"), Headers: o.secrets("headers")}
		sc.Type, sc.Command, sc.Args, sc.URL = o.transport()
		if _, ok := sm["cwd"]; ok {
			sc.WorkingDir = ptr(o.expanded("cwd"))
		}
		if _, ok := sm["disabled"]; ok {
			sc.Enabled = ptr(!o.boolean("disabled", false))
		}
		if _, ok := sm["envFile"]; ok {
			o.used("envFile")
			p.warn(name, "envFile", "is not read by Toolwarden: set those variables in env after import")
		}
		if sc.Type != TypeStdio && sc.Type != "" {
			// The format has no authentication block: Toolwarden's auth settings are
			// kept as stored, unless the server switched to stdio (see patch).
			sc.Auth = nil
		}
		o.finish()
		p.named = append(p.named, namedServer{orig: name, sc: sc})
	}
}

// readInputs remembers the descriptions of VS Code's prompted inputs for warnings.
func (p *parser) readInputs(raw any) {
	p.inputs = map[string]string{}
	list, _ := raw.([]any)
	for _, item := range list {
		m, _ := item.(map[string]any)
		id, _ := m["id"].(string)
		desc, _ := m["description"].(string)
		if id != "" {
			p.inputs[id] = desc
		}
	}
}

// finish turns names into slugs, refuses collisions and sorts the servers.
func (p *parser) finish() {
	bySlug := map[string]string{}
	for _, ns := range p.named {
		if ns.orig == "" {
			continue // already reported
		}
		name := ns.orig
		if !namePattern.MatchString(name) {
			name = Slugify(ns.orig)
			if name == "" {
				p.fail(ns.orig, "name", "cannot be made into a server name: use lower-case letters, digits and '-'")
				continue
			}
			p.warn(ns.orig, "name", fmt.Sprintf("is not a valid server name: %q → %q", ns.orig, name))
		}
		if other, dup := bySlug[name]; dup {
			if other == ns.orig {
				p.fail(ns.orig, "name", "appears twice in the file")
			} else {
				p.fail(ns.orig, "name", fmt.Sprintf("becomes %q, the name of server %q too: rename one of them", name, other))
			}
			continue
		}
		bySlug[name] = ns.orig
		sc := ns.sc
		sc.Name = name
		p.cfg.Servers = append(p.cfg.Servers, sc)
	}
	slices.SortFunc(p.cfg.Servers, func(a, b ServerConfig) int { return strings.Compare(a.Name, b.Name) })
}

// slugReplaced become '-' in Slugify; other characters outside [a-z0-9-] are dropped.
var slugReplaced = strings.NewReplacer(" ", "-", "_", "-", ".", "-")

// Slugify turns a name from another tool's configuration into a server name: lower case,
// spaces, underscores and dots become '-', other characters are dropped, leading and
// trailing '-' are trimmed, and the result is cut to 48 characters. It returns "" when
// nothing is left.
func Slugify(name string) string {
	s := slugReplaced.Replace(strings.ToLower(name))
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return -1
	}, s)
	s = strings.Trim(s, "-")
	if len(s) > 48 {
		s = strings.TrimRight(s[:48], "-")
	}
	return s
}

// obj reads the fields of one mapping, reporting problems against its server and field.
type obj struct {
	p      *parser
	server string
	prefix string // field path of the mapping, e.g. "auth."
	m      map[string]any
	strict bool // unknown keys are errors (native format) rather than warnings
	seen   map[string]bool
	env    map[string]bool // the server's env names: args refer to them, see ExpandArgs
}

func (o *obj) used(key string) {
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[key] = true
}

func (o *obj) finish() {
	for _, k := range slices.Sorted(maps.Keys(o.m)) {
		if o.seen[k] {
			continue
		}
		if o.strict {
			o.p.fail(o.server, o.prefix+k, "is not a field Toolwarden knows (check the spelling)")
		} else {
			o.p.warn(o.server, o.prefix+k, "is not used by Toolwarden and was ignored")
		}
	}
}

// str returns a plain (unexpanded) string field; absent and null are "".
func (o *obj) str(key string) string {
	o.used(key)
	v, ok := o.m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := scalarString(v)
	if !ok {
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a string, not %s", describe(v)))
	}
	return s
}

// expanded returns a string field with ${...} references resolved; a value that cannot
// be resolved is "".
func (o *obj) expanded(key string) string {
	s := o.str(key)
	v, keep := o.p.expand(o.server, o.prefix+key, s, nil)
	if !keep {
		return ""
	}
	return v
}

func (o *obj) list(key string) []string {
	o.used(key)
	v, ok := o.m[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a list of strings, not %s", describe(v)))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, item := range l {
		field := fmt.Sprintf("%s%s[%d]", o.prefix, key, i)
		s, ok := scalarString(item)
		if !ok || item == nil {
			o.p.fail(o.server, field, fmt.Sprintf("must be a string, not %s", describe(item)))
			continue
		}
		if s, keep := o.p.expand(o.server, field, s, o.env); keep {
			out = append(out, s)
		}
	}
	return out
}

// secrets reads a map of secret values; null values stay nil ("keep the stored value").
func (o *obj) secrets(key string) map[string]*string {
	o.used(key)
	v, ok := o.m[key]
	if !ok || v == nil {
		return map[string]*string{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a mapping from names to values, not %s", describe(v)))
		return map[string]*string{}
	}
	out := make(map[string]*string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = o.secretValue(o.prefix+key+"."+k, m[k])
	}
	if key == "env" {
		o.env = map[string]bool{}
		for k := range out {
			o.env[k] = true
		}
	}
	return out
}

func (o *obj) secret(key string) *string {
	o.used(key)
	return o.secretValue(o.prefix+key, o.m[key])
}

func (o *obj) secretValue(field string, v any) *string {
	if v == nil {
		return nil
	}
	s, ok := scalarString(v)
	if !ok {
		o.p.fail(o.server, field, fmt.Sprintf("must be a string or null, not %s", describe(v)))
		return nil
	}
	s, keep := o.p.expand(o.server, field, s, nil)
	if !keep {
		return nil
	}
	return &s
}

func (o *obj) integer(key string, def int) int {
	o.used(key)
	v, ok := o.m[key]
	if !ok || v == nil {
		return def
	}
	n, isNum := v.(json.Number)
	i, err := strconv.Atoi(string(n))
	if !isNum || err != nil {
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a whole number, not %s", describe(v)))
		return def
	}
	return i
}

func (o *obj) boolean(key string, def bool) bool {
	o.used(key)
	v, ok := o.m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be true or false, not %s", describe(v)))
		return def
	}
	return b
}

// transport reads type, command, args and url. Without a type, a command means stdio
// and a url means streamable HTTP, as the MCP clients assume.
func (o *obj) transport() (typ, command string, args []string, url string) {
	raw := o.str("type")
	command = o.expanded("command")
	args = o.list("args")
	url = o.expanded("url")
	_, hasCommand := o.m["command"]
	_, hasURL := o.m["url"]
	switch strings.ToLower(raw) {
	case "stdio":
		typ = TypeStdio
	case "sse":
		typ = TypeSSE
	case "http", "streamable-http", "streamable_http", "streamablehttp":
		typ = TypeStreamableHTTP
	case "":
		switch {
		case hasCommand:
			typ = TypeStdio
		case hasURL:
			typ = TypeStreamableHTTP
		default:
			o.p.fail(o.server, o.prefix+"type", "is missing and neither command nor url says it: use stdio, sse or streamable_http")
		}
	default:
		o.p.fail(o.server, o.prefix+"type", fmt.Sprintf("%q is not a server type: use stdio, sse or streamable_http (http)", raw))
	}
	return typ, command, args, url
}

// scalarString returns a scalar's text: strings as they are, numbers and booleans as
// written (an env value `PORT: 3000` is the string "3000").
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

func ptr[T any](v T) *T { return &v }

// refPattern finds ${...} references.
var refPattern = regexp.MustCompile(`\$\{([^{}]*)\}`)

// envRef parses the inside of a ${...} that names an environment variable:
// "env:NAME" in every format, "NAME" and "NAME:-default" in all but VS Code's, where
// a bare name is one of VS Code's own variables (${workspaceFolder}).
func (p *parser) envRef(inner string) (name, def string, hasDef, ok bool) {
	rest, isEnv := strings.CutPrefix(inner, "env:")
	if !isEnv && p.cfg.Format == FormatVSCode {
		return "", "", false, false
	}
	name, def, hasDef = strings.Cut(rest, ":-")
	return name, def, hasDef, envNamePattern.MatchString(name)
}

// expand resolves the ${...} references in v. References to a name in local (the
// server's own env, for args) stay, written ${NAME}: Toolwarden substitutes them from the
// encrypted env when it starts the server. It reports false when the value must be
// dropped: a VS Code ${input:...} prompt has no answer outside VS Code.
func (p *parser) expand(server, field, v string, local map[string]bool) (string, bool) {
	v = refPattern.ReplaceAllStringFunc(v, func(m string) string {
		if name, _, hasDef, ok := p.envRef(m[2 : len(m)-1]); ok && !hasDef && local[name] {
			return "${" + name + "}"
		}
		return m
	})
	refs := refPattern.FindAllStringSubmatch(v, -1)
	for i := 0; i < len(refs); i++ {
		if local[refs[i][1]] {
			refs = slices.Delete(refs, i, i+1)
			i--
		}
	}
	if len(refs) == 0 {
		return v, true
	}
	for _, r := range refs {
		if id, ok := strings.CutPrefix(r[1], "input:"); ok {
			what := ""
			if d := p.inputs[id]; d != "" {
				what = fmt.Sprintf(" (%q)", d)
			}
			p.warn(server, field, fmt.Sprintf("%s%s is a VS Code input prompt that Toolwarden cannot answer: the value was dropped; set %s after import",
				r[0], what, strings.Replace(field, ".", " ", 1)))
			return "", false
		}
	}
	env := 0
	for _, r := range refs {
		if _, _, _, ok := p.envRef(r[1]); ok {
			env++
		} else {
			p.warn(server, field, fmt.Sprintf("%s cannot be resolved outside the client that wrote the file: kept literally", r[0]))
		}
	}
	if env == 0 {
		return v, true
	}
	if !p.opts.ExpandEnv {
		p.warn(server, field, "environment references such as "+refs[0][0]+" are kept literally: only 'toolwarden import' on the command line expands them")
		return v, true
	}
	var missing []string
	out := refPattern.ReplaceAllStringFunc(v, func(m string) string {
		name, def, hasDef, ok := p.envRef(m[2 : len(m)-1])
		if !ok || local[m[2:len(m)-1]] {
			return m
		}
		if val, found := p.opts.LookupEnv(name); found {
			return val
		}
		if hasDef {
			return def
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		p.fail(server, field, fmt.Sprintf("environment variable %s is not set (write ${%s:-default} for a default)", strings.Join(missing, ", "), missing[0]))
		return "", false
	}
	return out, true
}

// ─── Planning ────────────────────────────────────────────────────────────────────────

// ImportOptions tunes PlanImport.
type ImportOptions struct {
	// Prune deletes registered servers the file does not list; without it they are kept.
	Prune bool
	// CompareSecrets lets the plan say that a secret value in the file equals the stored
	// one (and leave it alone). Without it every value given counts as replaced, so the
	// plan cannot be used to check a guess of a stored secret: only callers who could
	// read the secrets anyway (the command line, administrators) set it.
	CompareSecrets bool
}

// Plan actions.
const (
	PlanCreate    = "create"
	PlanUpdate    = "update"
	PlanUnchanged = "unchanged"
	PlanKeep      = "keep"   // registered, not in the file, kept
	PlanDelete    = "delete" // registered, not in the file, pruned
)

// Plan is what importing a configuration would do, computed against the database
// without changing it. Apply it with ApplyImport; a plan with Errors cannot be applied.
type Plan struct {
	File     string     `json:"file"`
	Format   string     `json:"format"`
	Items    []PlanItem `json:"items"` // by server name
	Warnings []Problem  `json:"warnings"`
	Errors   []Problem  `json:"errors"`
}

// PlanItem is what happens to one server.
type PlanItem struct {
	Action  string        `json:"action"` // PlanCreate, PlanUpdate, PlanUnchanged, PlanKeep or PlanDelete
	Name    string        `json:"name"`
	Type    string        `json:"type"`
	ID      string        `json:"id,omitempty"`      // "" for a server to create
	Changes []FieldChange `json:"changes,omitempty"` // PlanUpdate: what changes; PlanCreate: what is set

	d   draft  // the registration to store (create, update)
	cur Server // the registration as planned against (update, delete)
}

// FieldChange is one changed field. Secrets never carry values: From is empty and To
// says what happens ("set", "replaced" or "removed").
type FieldChange struct {
	Field  string `json:"field"`          // "url", "env API_KEY", "auth token"
	From   string `json:"from,omitempty"` // the old value, formatted; "" for secrets and new servers
	To     string `json:"to"`
	Secret bool   `json:"secret,omitempty"`
}

func (c FieldChange) String() string {
	if c.Secret || c.From == "" {
		return c.Field + ": " + c.To
	}
	return c.Field + ": " + c.From + " → " + c.To
}

// HasErrors reports whether the plan cannot be applied.
func (p *Plan) HasErrors() bool { return len(p.Errors) > 0 }

// CommandChanges names the servers whose stdio command, args, working directory or env
// the plan sets (see ChangesCommand): applying it needs auth.PermServerCommand.
func (p *Plan) CommandChanges() []string {
	var names []string
	for _, it := range p.Items {
		var cur *draft
		switch it.Action {
		case PlanCreate:
		case PlanUpdate:
			d := draftOf(it.cur)
			cur = &d
		default:
			continue
		}
		if commandChanged(cur, it.d) {
			names = append(names, it.Name)
		}
	}
	return names
}

// TrustChanges names the servers the plan would mark trusted (new ones), whose trust it
// changes, or that are trusted and whose target it changes: only administrators may
// import those (ErrTrustChange, ErrTrustedTargetChange).
func (p *Plan) TrustChanges() []string {
	var names []string
	for _, it := range p.Items {
		switch {
		case it.Action == PlanCreate && it.d.trusted,
			it.Action == PlanUpdate && it.d.trusted != it.cur.Trusted,
			it.Action == PlanUpdate && it.cur.Trusted && targetChanged(ptr(draftOf(it.cur)), it.d):
			names = append(names, it.Name)
		}
	}
	return names
}

// Digest identifies what the plan does: the same file planned against the same
// registrations gives the same digest. The import page shows a plan and applies it
// only while the digest of a fresh plan still matches, so nobody applies a plan they
// did not see.
func (p *Plan) Digest() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, it := range p.Items {
		_ = enc.Encode([]any{it.Action, it.Name, it.ID, it.Changes, it.cur.UpdatedAt.UnixNano()})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Count returns how many servers get action.
func (p *Plan) Count(action string) int {
	n := 0
	for _, it := range p.Items {
		if it.Action == action {
			n++
		}
	}
	return n
}

// PlanImport computes what importing cfg would change. Servers are matched by name.
// Every resulting registration is validated as CreateServer and UpdateServer would, and
// every problem is reported at once in Plan.Errors. Stored secrets are decrypted to be
// compared, never shown.
func (s *Service) PlanImport(ctx context.Context, cfg *Config, opts ImportOptions) (*Plan, error) {
	if cfg == nil {
		return nil, errors.New("registry: plan import: no configuration")
	}
	stored, err := allServers(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]Server, len(stored))
	for _, sv := range stored {
		byName[sv.Name] = sv
	}
	plan := &Plan{File: cfg.File, Format: cfg.Format, Warnings: slices.Clone(cfg.Warnings)}
	inFile := map[string]bool{}
	for _, sc := range cfg.Servers {
		inFile[sc.Name] = true
		cur, exists := byName[sc.Name]
		it, err := s.planServer(plan, sc, cur, exists, opts.CompareSecrets)
		if err != nil {
			return nil, err
		}
		plan.Items = append(plan.Items, it)
	}
	for _, sv := range stored {
		if inFile[sv.Name] {
			continue
		}
		it := PlanItem{Action: PlanKeep, Name: sv.Name, Type: sv.Type, ID: sv.ID, cur: sv}
		if opts.Prune {
			it.Action = PlanDelete
		}
		plan.Items = append(plan.Items, it)
	}
	slices.SortFunc(plan.Items, func(a, b PlanItem) int { return strings.Compare(a.Name, b.Name) })
	return plan, nil
}

func (s *Service) planServer(plan *Plan, sc ServerConfig, cur Server, exists, compare bool) (PlanItem, error) {
	it := PlanItem{Name: sc.Name, Action: PlanCreate}
	var d, before draft
	if exists {
		it.Action, it.ID, it.cur = PlanUpdate, cur.ID, cur
		d, before = draftOf(cur), draftOf(cur)
	} else {
		d = newDraft(uuid.NewString())
		before = newDraft(d.id)
	}
	warn := func(field, msg string) {
		plan.Warnings = append(plan.Warnings, Problem{File: plan.File, Server: sc.Name, Field: field, Message: msg})
	}
	p := sc.patch(d, warn)
	d.apply(p)
	var prev *draft
	if exists {
		prev = &before
	}
	if err := d.validateChange(prev); err != nil {
		var ve *verr.Error
		if !errors.As(err, &ve) {
			return it, err
		}
		for _, f := range ve.Fields {
			msg := f.Message
			if f.Field == "auth_token" && (sc.Auth == nil || sc.Auth.Token == nil) && !d.authToken.set() {
				msg += "; secret values are not exported, so write it in the file (token: ${env:NAME} is expanded by 'toolwarden import') or add the authentication after import"
			}
			plan.Errors = append(plan.Errors, Problem{File: plan.File, Server: sc.Name, Field: fileField(f.Field), Message: msg})
		}
	}
	it.Type = d.typ
	secretChanges, err := s.compareSecrets(&d, cur, exists, compare)
	if err != nil {
		return it, err
	}
	if exists {
		it.Changes = fieldChanges(before, d)
	} else {
		for _, c := range fieldChanges(before, d) {
			if c.Field != "type" {
				c.From = ""
				it.Changes = append(it.Changes, c)
			}
		}
	}
	it.Changes = append(it.Changes, secretChanges...)
	if exists && len(it.Changes) == 0 {
		it.Action = PlanUnchanged
	}
	it.d = d
	return it, nil
}

// patch is the change that makes a stored registration (d, or a new one) what sc says.
// Secrets named with a null value keep their stored value; on a new server (or a name
// not stored yet) they are skipped, with a warning. Names not in sc are removed.
func (sc ServerConfig) patch(d draft, warn func(field, msg string)) Patch {
	p := Patch{Name: &sc.Name, Type: &sc.Type, Command: &sc.Command, Args: &sc.Args, URL: &sc.URL,
		Description: sc.Description, WorkingDir: sc.WorkingDir, TimeoutMS: sc.TimeoutMS, Retries: sc.Retries,
		HealthIntervalMS: sc.HealthIntervalMS, Enabled: sc.Enabled, Trusted: sc.Trusted,
		AutoEnable: sc.AutoEnable}
	if p.Args == nil || *p.Args == nil {
		p.Args = &[]string{}
	}
	p.Env = secretPatch("env", d.env, sc.Env, warn)
	p.Headers = secretPatch("headers", d.headers, sc.Headers, warn)
	switch {
	case sc.Auth != nil:
		p.AuthType, p.AuthHeader = &sc.Auth.Type, &sc.Auth.Header
		if sc.Auth.Token != nil {
			p.AuthToken = sc.Auth.Token
		}
	case sc.Type == TypeStdio:
		// A format without authentication settings moved the server to stdio, which has none.
		none, empty := AuthNone, ""
		p.AuthType, p.AuthHeader, p.AuthToken = &none, &empty, &empty
	}
	return p
}

func secretPatch(field string, stored map[string]secretValue, file map[string]*string, warn func(field, msg string)) map[string]*string {
	out := map[string]*string{}
	for k := range stored {
		if _, ok := file[k]; !ok {
			out[k] = nil // removed
		}
	}
	for _, k := range slices.Sorted(maps.Keys(file)) {
		v := file[k]
		if v != nil {
			out[k] = v
			continue
		}
		if _, ok := stored[k]; !ok {
			warn(field+"."+k, fmt.Sprintf("has no value in the file and none is stored: it is skipped; set %s %s after import", field, k))
		}
	}
	return out
}

// compareSecrets lists how the secrets of d differ from the stored ones. A new value
// equal to the stored one is not a change: d keeps the stored ciphertext.
func (s *Service) compareSecrets(d *draft, cur Server, exists, compare bool) ([]FieldChange, error) {
	var out []FieldChange
	cmp := func(field, label, name string, v secretValue, storedCipher string, stored bool) (secretValue, error) {
		switch {
		case v.plain == nil:
			return v, nil
		case !stored:
			out = append(out, FieldChange{Field: label, To: "set", Secret: true})
			return v, nil
		case !compare:
			out = append(out, FieldChange{Field: label, To: "replaced", Secret: true})
			return v, nil
		}
		if s.keys == nil {
			return v, errors.New("registry: plan import: a secret key is needed to compare secrets")
		}
		old, err := s.openValue(cur.ID, field, name, secretValue{cipher: storedCipher})
		if err == nil && old == *v.plain {
			return secretValue{cipher: storedCipher}, nil
		}
		out = append(out, FieldChange{Field: label, To: "replaced", Secret: true})
		return v, nil
	}
	for _, spec := range []struct {
		field  string
		now    map[string]secretValue
		stored map[string]string
	}{{"env", d.env, cur.Env}, {"headers", d.headers, cur.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(spec.now)) {
			c, ok := spec.stored[k]
			v, err := cmp(spec.field, spec.field+" "+k, k, spec.now[k], c, ok && exists)
			if err != nil {
				return nil, err
			}
			spec.now[k] = v
		}
		if exists {
			for _, k := range slices.Sorted(maps.Keys(spec.stored)) {
				if _, ok := spec.now[k]; !ok {
					out = append(out, FieldChange{Field: spec.field + " " + k, To: "removed", Secret: true})
				}
			}
		}
	}
	if d.authToken.plain != nil && *d.authToken.plain == "" {
		d.authToken = secretValue{} // an empty token is no token
	}
	stored := exists && cur.AuthToken != ""
	switch {
	case d.authToken.plain != nil:
		v, err := cmp("auth_token", "auth token", "", d.authToken, cur.AuthToken, stored)
		if err != nil {
			return nil, err
		}
		d.authToken = v
	case stored && !d.authToken.set():
		out = append(out, FieldChange{Field: "auth token", To: "removed", Secret: true})
	}
	return out, nil
}

// fieldChanges lists the non-secret fields that differ, in the file's order.
func fieldChanges(a, b draft) []FieldChange {
	var out []FieldChange
	add := func(field string, x, y any) {
		fx, fy := formatValue(x), formatValue(y)
		if fx != fy {
			out = append(out, FieldChange{Field: field, From: fx, To: fy})
		}
	}
	add("type", a.typ, b.typ)
	add("description", a.description, b.description)
	add("command", a.command, b.command)
	add("args", a.args, b.args)
	add("working_dir", a.workingDir, b.workingDir)
	add("url", a.url, b.url)
	add("auth.type", a.authType, b.authType)
	add("auth.header", a.authHeader, b.authHeader)
	add("timeout_ms", a.timeoutMS, b.timeoutMS)
	add("retries", a.retries, b.retries)
	add("health_interval_ms", a.healthIntervalMS, b.healthIntervalMS)
	add("enabled", a.enabled, b.enabled)
	add("trusted", a.trusted, b.trusted)
	add("auto_enable", a.autoEnable, b.autoEnable)
	return out
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// fileField turns a validation field ("auth_token", "env/API_KEY", "args/0") into the
// file's spelling ("auth.token", "env.API_KEY", "args[0]").
func fileField(f string) string {
	switch f {
	case "auth_type":
		return "auth.type"
	case "auth_header":
		return "auth.header"
	case "auth_token":
		return "auth.token"
	}
	if rest, ok := strings.CutPrefix(f, "args/"); ok {
		return "args[" + rest + "]"
	}
	return strings.Replace(f, "/", ".", 1)
}

// String renders the plan for people: one line per server (+ create, ~ update,
// = unchanged, - delete), the changed fields indented below, then warnings, errors and
// a summary. It is deterministic and never holds a secret value.
func (p *Plan) String() string {
	var b strings.Builder
	title := formatTitles[p.Format]
	if title == "" {
		title = p.Format
	}
	fmt.Fprintf(&b, "Import plan for %s (%s)\n", p.File, title)
	if len(p.Items) == 0 {
		b.WriteString("  no servers in the file and none registered\n")
	}
	for _, it := range p.Items {
		switch it.Action {
		case PlanCreate:
			fmt.Fprintf(&b, "+ create %s (%s)\n", it.Name, it.Type)
			for _, c := range it.Changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		case PlanUpdate:
			fmt.Fprintf(&b, "~ update %s (%s)\n", it.Name, it.Type)
			for _, c := range it.Changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		case PlanUnchanged:
			fmt.Fprintf(&b, "= unchanged %s\n", it.Name)
		case PlanKeep:
			fmt.Fprintf(&b, "  kept %s (not in file)\n", it.Name)
		case PlanDelete:
			fmt.Fprintf(&b, "- delete %s (%s)\n", it.Name, it.Type)
		}
	}
	if len(p.Warnings) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, w := range p.Warnings {
			b.WriteString("  ! " + w.String() + "\n")
		}
	}
	if len(p.Errors) > 0 {
		b.WriteString("\nErrors (nothing can be imported until they are fixed):\n")
		for _, e := range p.Errors {
			b.WriteString("  ✗ " + e.String() + "\n")
		}
	}
	fmt.Fprintf(&b, "\n%d to create, %d to update, %d to delete, %d unchanged, %d kept",
		p.Count(PlanCreate), p.Count(PlanUpdate), p.Count(PlanDelete), p.Count(PlanUnchanged), p.Count(PlanKeep))
	if len(p.Errors) > 0 {
		fmt.Fprintf(&b, "; %d errors", len(p.Errors))
	}
	b.WriteString(".\n")
	return b.String()
}

// ─── Applying ────────────────────────────────────────────────────────────────────────

// ServerRef names a server an import touched.
type ServerRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ImportResult is what ApplyImport did.
type ImportResult struct {
	Created   []ServerRef `json:"created"`
	Updated   []ServerRef `json:"updated"`
	Deleted   []ServerRef `json:"deleted"`
	Unchanged int         `json:"unchanged"`
	Kept      int         `json:"kept"`
}

func (r ImportResult) String() string {
	return fmt.Sprintf("%d created, %d updated, %d deleted, %d unchanged, %d kept",
		len(r.Created), len(r.Updated), len(r.Deleted), r.Unchanged, r.Kept)
}

// ApplyImport carries out plan in one transaction: every server changes, or none does.
// Each change writes an audit entry (server.import.create, .update or .delete; names of
// secrets, never values) and the usual server.changed or server.deleted event, so a
// running `toolwarden serve` connects, reconnects or disconnects accordingly. A server
// changed or removed by someone else since the plan was made fails the whole import:
// plan again and review.
func (s *Service) ApplyImport(ctx context.Context, actor audit.Actor, plan *Plan) (ImportResult, error) {
	var res ImportResult
	if plan == nil {
		return res, errors.New("registry: apply import: no plan")
	}
	if plan.HasErrors() {
		return res, fmt.Errorf("%w:\n%s", ErrInvalidPlan, (&ConfigError{Problems: plan.Errors}).Error())
	}
	res.Unchanged, res.Kept = plan.Count(PlanUnchanged), plan.Count(PlanKeep)
	if plan.Count(PlanCreate)+plan.Count(PlanUpdate)+plan.Count(PlanDelete) == 0 {
		return res, nil
	}
	source := map[string]any{"file": filepath.Base(plan.File), "format": plan.Format}
	var created, updated, deleted []ServerRef
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		created, updated, deleted = nil, nil, nil
		for _, it := range plan.Items {
			switch it.Action {
			case PlanCreate:
				out, err := s.insert(ctx, tx, it.d)
				if err != nil {
					return fmt.Errorf("registry: import %s: create server %q: %w", plan.File, it.Name, err)
				}
				payload := it.d.auditView()
				payload["import"] = source
				if err := s.importAudit(ctx, tx, actor, "server.import.create", out, payload); err != nil {
					return err
				}
				if err := publishChanged(ctx, tx, out); err != nil {
					return err
				}
				created = append(created, ServerRef{ID: out.ID, Name: out.Name})
			case PlanUpdate:
				cur, err := lockUnchanged(ctx, tx, plan.File, it)
				if err != nil {
					return err
				}
				out, err := s.update(ctx, tx, cur, it.d)
				if err != nil {
					return fmt.Errorf("registry: import %s: update server %q: %w", plan.File, it.Name, err)
				}
				changes := map[string]any{}
				before, after := draftOf(cur).auditView(), it.d.auditView()
				for k, v := range after {
					if fmt.Sprint(before[k]) != fmt.Sprint(v) {
						changes[k] = map[string]any{"from": before[k], "to": v}
					}
				}
				var secretsChanged []string
				for _, c := range it.Changes {
					if c.Secret {
						secretsChanged = append(secretsChanged, strings.Replace(c.Field, " ", "/", 1)+": "+c.To)
					}
				}
				if len(secretsChanged) > 0 {
					changes["secrets_changed"] = secretsChanged
				}
				if err := s.importAudit(ctx, tx, actor, "server.import.update", out,
					map[string]any{"changes": changes, "import": source}); err != nil {
					return err
				}
				if err := publishChanged(ctx, tx, out); err != nil {
					return err
				}
				updated = append(updated, ServerRef{ID: out.ID, Name: out.Name})
			case PlanDelete:
				cur, err := lockUnchanged(ctx, tx, plan.File, it)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `/* registry.ImportDelete */ DELETE FROM mcp_servers WHERE id = $1`, cur.ID); err != nil {
					return fmt.Errorf("registry: import %s: delete server %q: %w", plan.File, cur.Name, err)
				}
				if err := s.importAudit(ctx, tx, actor, "server.import.delete", cur, map[string]any{"name": cur.Name,
					"type": cur.Type, "tool_count": cur.ToolCount, "import": source}); err != nil {
					return err
				}
				if _, err := events.Publish(ctx, tx, ServersTopic, "server.deleted", map[string]any{"id": cur.ID, "name": cur.Name}); err != nil {
					return err
				}
				deleted = append(deleted, ServerRef{ID: cur.ID, Name: cur.Name})
			}
		}
		return nil
	})
	if err != nil {
		return ImportResult{Unchanged: res.Unchanged, Kept: res.Kept}, err
	}
	res.Created, res.Updated, res.Deleted = created, updated, deleted
	return res, nil
}

func (s *Service) importAudit(ctx context.Context, tx pgx.Tx, actor audit.Actor, action string, sv Server, payload map[string]any) error {
	_, err := audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: action, TargetType: "server",
		TargetID: sv.ID, TargetName: sv.Name, Payload: payload})
	return err
}

// lockUnchanged locks the server a plan item was computed against and refuses it if it
// changed since: applying a plan nobody reviewed against the current state is not safe.
func lockUnchanged(ctx context.Context, tx pgx.Tx, file string, it PlanItem) (Server, error) {
	cur, err := getServer(ctx, tx, it.cur.ID, true)
	if errors.Is(err, ErrNotFound) {
		return Server{}, fmt.Errorf("registry: import %s: server %q was deleted after the plan was made; plan the import again", file, it.Name)
	}
	if err != nil {
		return Server{}, err
	}
	if !cur.UpdatedAt.Equal(it.cur.UpdatedAt) || cur.Name != it.cur.Name {
		return Server{}, fmt.Errorf("registry: import %s: server %q was changed (at %s) after the plan was made; plan the import again",
			file, it.Name, cur.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return cur, nil
}
