package registry

// Parsing: a configuration file (Toolwarden YAML, Claude Desktop / .mcp.json, VS Code
// mcp.json) decoded and read into a Config.

import (
	"bytes"
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

	"github.com/tidwall/jsonc"
	"go.yaml.in/yaml/v3"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/yamlsize"
)

// ParseOptions tunes ParseConfig.
type ParseOptions struct {
	// ExpandEnv replaces ${env:NAME} and ${NAME} (also ${NAME:-default}) with the
	// variable's value. The command line sets it: its environment is the admin's. The
	// web UI does not: the server's environment is not the uploader's to read.
	// Without it, references are kept literally, with a warning.
	ExpandEnv bool
	// LookupEnv reads a variable (the command line passes os.LookupEnv); nil finds none.
	LookupEnv func(name string) (string, bool)
	// Sections are further top-level keys of the native format that the caller reads
	// itself (services/configcode: tools, categories, settings); without them such a key
	// is an unknown field.
	Sections []string
}

// maxConfigSize bounds what ParseConfig reads; a real file is a few kilobytes.
const maxConfigSize = 4 << 20

// ParseConfig reads a configuration file: Toolwarden's YAML (Export), Claude Desktop's
// claude_desktop_config.json or a .mcp.json ({"mcpServers": {...}}), or VS Code's
// mcp.json ({"servers": {...}, "inputs": [...]}, also nested under "mcp" in a settings
// file). The format is recognized by content; filename names the file in messages and
// breaks a tie only when the content is empty of servers. Server names that are not
// slugs are turned into slugs, with a warning. Every problem is reported at once as a
// CodeInvalidConfig fault (ProblemsOf).
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
	return configError(p.errs)
}

// DecodeTree decodes a configuration file (YAML, or JSON with comments) into the tree
// ParseConfig reads: nil, bool, string, json.Number, []any and map[string]any; YAML
// scalars keep their text, duplicate keys are refused. Problems are a CodeInvalidConfig
// fault naming the file.
func DecodeTree(filename string, data []byte) (any, error) {
	p := &parser{file: filename, cfg: &Config{File: filename}}
	if len(data) > maxConfigSize {
		p.fail("", "", fmt.Sprintf("is larger than %d bytes; is it the right file?", maxConfigSize))
		return nil, p.err()
	}
	v, ok := p.decode(data)
	if !ok {
		return nil, p.err()
	}
	return v, nil
}

// ConfigError is the CodeInvalidConfig fault of problems (see ProblemsOf).
func ConfigError(ps []Problem) error { return configError(ps) }

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
		// As in YAML (and every JSON body): a key twice would make the file's reader and
		// the import disagree on which value counts.
		if ptr, dup := textcheck.DuplicateKey(clean); dup {
			p.fail("", "", fmt.Sprintf("is not valid JSON: the key at %s appears twice", ptr))
			return nil, false
		}
		return v, true
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.fail("", "", "is not valid YAML: "+strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, false
	}
	// fromYAML copies an anchor's value at every alias: a few hundred bytes of nested
	// aliases would stand for billions of values, or one long string for gigabytes.
	if nodes, _, over := yamlsize.Size(&doc, maxConfigNodes, maxConfigExpanded); over {
		if nodes > maxConfigNodes {
			p.fail("", "", fmt.Sprintf("stands for more than %d values once its aliases (*name) are followed: write the repeated parts out, or repeat fewer of them", maxConfigNodes))
		} else {
			p.fail("", "", fmt.Sprintf("stands for more than %d MiB of text once its aliases (*name) are followed: write the repeated parts out, or repeat fewer of them", maxConfigExpanded>>20))
		}
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

// maxConfigNodes bounds the values a configuration file stands for, aliases followed:
// far above any real file, far below what would exhaust memory.
const maxConfigNodes = 1_000_000

// maxConfigExpanded bounds the bytes of text a configuration file stands for, aliases
// followed: a few times what a file may hold written out.
const maxConfigExpanded = 4 * maxConfigSize

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
			// YAML numbers JSON has no form for (0x10, 0o17, 02134, 1_000, .5, +1, .inf)
			// became "no value" further on; quoted they are text.
			if !jsonNumber.MatchString(n.Value) {
				return nil, fmt.Errorf("line %d: %s is a YAML number JSON cannot hold: quote it (\"%s\") for text, or write it as a plain decimal number", n.Line, n.Value, n.Value)
			}
			return json.Number(n.Value), nil
		}
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// jsonNumber is a number as JSON writes it.
var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

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
			p.fail("", "version", fmt.Sprintf("%s is not a version this Toolwarden reads (want %d)", Describe(v), ConfigVersion))
		}
	}
	top.used("version")
	list, ok := m["servers"].([]any)
	if !ok && m["servers"] != nil {
		p.fail("", "servers", "must be a list of servers")
	}
	top.used("servers")
	for _, k := range p.opts.Sections {
		top.used(k)
	}
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
		sc.Template = o.str("template")
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

// nativeShaped reports whether v under key k of a client's file has the shape of
// Toolwarden's own section: other clients' files have keys of these names for their
// own settings (a tools object, say), which stay ignored, with a warning.
func nativeShaped(k string, v any) bool {
	switch k {
	case "version": // a number (JSON's float64, YAML's integers)
		switch v.(type) {
		case string, bool, nil, map[string]any, []any:
			return false
		}
		return true
	case "categories", "tools":
		_, ok := v.([]any)
		return ok
	}
	return true
}

// clients reads the MCP client formats (Claude Desktop, .mcp.json, VS Code): a map from
// name to server. Keys Toolwarden has no use for are ignored, with a warning.
func (p *parser) clients(m map[string]any, key string) {
	// Sections of the native format beside a client's servers were dropped unread.
	native := slices.Compact(slices.Sorted(slices.Values(append([]string{"version", "categories", "tools", "settings"}, p.opts.Sections...))))
	for _, k := range native {
		if v, ok := m[k]; ok && nativeShaped(k, v) {
			p.fail("", k, fmt.Sprintf("is a section of Toolwarden's own format, but this file lists its servers as a client's %s mapping, which does not read it: write servers as a list (version: %d) to import both, or remove %s", key, ConfigVersion, k))
		}
	}
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
