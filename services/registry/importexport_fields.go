package registry

// Reading one server's fields from a decoded file: each reader checks the value's type
// and reports a problem against the server and field; ${...} references expand here.

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

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
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a string, not %s", Describe(v)))
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
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a list of strings, not %s", Describe(v)))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, item := range l {
		field := fmt.Sprintf("%s%s[%d]", o.prefix, key, i)
		s, ok := scalarString(item)
		if !ok || item == nil {
			o.p.fail(o.server, field, fmt.Sprintf("must be a string, not %s", Describe(item)))
			continue
		}
		if ref := o.p.inputRef(s); ref != "" {
			// Dropped, it would shift the arguments after it: the server would take the
			// next one for this one's value.
			o.p.fail(o.server, field, ref+" is a VS Code input prompt that Toolwarden cannot answer, and leaving the argument out would shift the ones after it: write its value into the file before importing")
			continue
		}
		if s, keep := o.p.expand(o.server, field, s, o.env); keep {
			out = append(out, s)
		}
	}
	return out
}

// inputRef is the first VS Code ${input:...} prompt in v, with its description, or "".
func (p *parser) inputRef(v string) string {
	for _, r := range refPattern.FindAllStringSubmatch(v, -1) {
		if id, ok := strings.CutPrefix(r[1], "input:"); ok {
			if d := p.inputs[id]; d != "" {
				return fmt.Sprintf("%s (%q)", r[0], d)
			}
			return r[0]
		}
	}
	return ""
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
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a mapping from names to values, not %s", Describe(v)))
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
		o.p.fail(o.server, field, fmt.Sprintf("must be a string or null, not %s", Describe(v)))
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
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be a whole number, not %s", Describe(v)))
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
		o.p.fail(o.server, o.prefix+key, fmt.Sprintf("must be true or false, not %s", Describe(v)))
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
	_, hasTemplate := o.m["template"]
	switch strings.ToLower(raw) {
	case "template":
		typ = TypeTemplate
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
		case hasTemplate && o.strict:
			typ = TypeTemplate
		default:
			o.p.fail(o.server, o.prefix+"type", "is missing and neither command nor url says it: use stdio, sse or streamable_http")
		}
	default:
		o.p.fail(o.server, o.prefix+"type", fmt.Sprintf("%q is not a server type: use stdio, sse, streamable_http (http) or template", raw))
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

// Describe names a value of a configuration file for an error: "null", "a list", a
// quoted string.
func Describe(v any) string {
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
// dropped: a VS Code ${input:...} prompt has no answer outside VS Code. A reference to
// Toolwarden's own settings (OwnSetting) fails the file, set or not.
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
	if ref := p.inputRef(v); ref != "" {
		p.warn(server, field, fmt.Sprintf("%s is a VS Code input prompt that Toolwarden cannot answer: the value was dropped; set %s after import",
			ref, strings.Replace(field, ".", " ", 1)))
		return "", false
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
	var missing, own []string
	out := refPattern.ReplaceAllStringFunc(v, func(m string) string {
		name, def, hasDef, ok := p.envRef(m[2 : len(m)-1])
		if !ok || local[m[2:len(m)-1]] {
			return m
		}
		if OwnSetting(name) {
			if !slices.Contains(own, name) {
				own = append(own, name)
			}
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
	for _, name := range own {
		p.fail(server, field, fmt.Sprintf("environment variable %s is Toolwarden's own setting and is never put into a server; set the value in another variable", name))
	}
	if len(own) > 0 {
		return "", false
	}
	if len(missing) > 0 {
		p.fail(server, field, fmt.Sprintf("environment variable %s is not set (write ${%s:-default} for a default)", strings.Join(missing, ", "), missing[0]))
		return "", false
	}
	return out, true
}

// OwnSetting reports whether an environment variable is Toolwarden's own: DATABASE_URL,
// TOOLWARDEN_* and PostgreSQL's PG* client settings. Imports run in the service's
// environment, which holds the database's credentials and the admin's password, so a
// file must not copy them into a server it registers. TOOLWARDEN_SECRET_<...> names,
// which export writes for secrets, stay usable; TOOLWARDEN_SECRET_KEY_FILE is a setting.
func OwnSetting(name string) bool {
	n := strings.ToUpper(name) // Windows' environment ignores case
	switch {
	case n == "DATABASE_URL", n == "TOOLWARDEN_SECRET_KEY_FILE", strings.HasPrefix(n, "PG"):
		return true
	case strings.HasPrefix(n, "TOOLWARDEN_SECRET_"):
		return false
	}
	return strings.HasPrefix(n, "TOOLWARDEN_")
}
