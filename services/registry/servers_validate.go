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
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/template"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ReservedNameMessage is the refusal of a reserved server name (toolname.Reserved).
func ReservedNameMessage(name string) string {
	return fmt.Sprintf("is reserved: the name %s is for Toolwarden's own tools; choose another", name)
}

// namePattern is the server name rule of docs/api.md.
var namePattern = regexp.MustCompile(`^[a-z0-9-]{1,48}$`)

// envNamePattern is what a POSIX shell accepts as a variable name.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Length limits of the fields the secret checks read (a longer value costs them time
// and is no real registration), and of env values, which a process gets in its
// environment.
const (
	MaxURLLength      = 8192
	MaxArgLength      = 8192
	MaxEnvValueLength = 64 << 10
	// MaxEnvVars and MaxHeaders bound a server's env variables and headers, and
	// MaxHeaderValueLength a header's value: every page of servers reads and decrypts
	// them, every upstream request sends them, and every change audits their names.
	MaxEnvVars           = 100
	MaxHeaders           = 100
	MaxHeaderValueLength = 8192
	// MaxArgs bounds a stdio server's arguments for the same reason: every page and API
	// list of servers reads them all, and every change audits them.
	MaxArgs = 256
)

// tooMany reports n names of a field past most, unless the change keeps (or shrinks)
// what was stored (had names).
func tooMany(n, had, most int) bool { return n > most && n > had }

// tooLong is the message for a field over its limit.
func tooLong(limit int) string {
	return fmt.Sprintf("is too long (at most %d characters)", limit)
}

// reservedHeaders are set by the MCP transports themselves; letting a registration
// override them would break the protocol rather than authenticate anything.
var reservedHeaders = []string{"host", "content-length", "content-type", "accept", "connection",
	"transfer-encoding", "mcp-session-id", "mcp-protocol-version", "last-event-id"}

// validate normalizes d and reports every problem, keyed by the API field name. cur is
// the server as it is now (nil for a new one): a server that had a reserved name before
// names were reserved keeps it until it is renamed, and a URL, argument or env value
// longer than the limits that came later stays as long as it is not changed. eg checks
// the URL unless keptOff: a URL the policy refuses now can stay on a server that stays
// disabled.
func (d *draft) validate(cur *draft, eg *egress.Policy, keptOff bool) error {
	was := ""
	if cur != nil {
		was = cur.name
	}
	var ve verr.Error
	d.name = strings.TrimSpace(d.name)
	d.description = strings.TrimSpace(d.description)
	d.command = strings.TrimSpace(d.command)
	d.url = strings.TrimSpace(d.url)
	d.workingDir = strings.TrimSpace(d.workingDir)
	d.authHeader = strings.TrimSpace(d.authHeader)
	d.template = normalizeTemplate(d.template)
	if d.args == nil {
		d.args = []string{} // a JSON array in the row, never NULL
	}
	switch {
	case d.name == "":
		ve.Add("name", "is required: a short slug such as \"github\" or \"files-prod\"")
	case !namePattern.MatchString(d.name):
		ve.Add("name", "must be 1–48 characters of lower-case letters, digits and '-' (for example \"files-prod\")")
	case toolname.Reserved(d.name) && d.name != was:
		ve.Add("name", ReservedNameMessage(d.name))
	}
	// Free text PostgreSQL cannot store as text (a NUL, bytes that are not UTF-8) is
	// refused here, naming its field, rather than failing the INSERT.
	if utf8.RuneCountInString(d.description) > MaxDescription {
		ve.Add("description", fmt.Sprintf("must be at most %d characters", MaxDescription))
	} else if why := textcheck.Bad(d.description); why != "" {
		ve.Add("description", why)
	} else if cur == nil || d.description != cur.description {
		// Shown to everyone on the servers page: no ESC, no U+202E (one stored before
		// this rule stays while it is not changed). Its field is a textarea: line breaks
		// are allowed.
		if why := textcheck.Readable(d.description, "a description", textcheck.AllowTab|textcheck.AllowNewlines|textcheck.AllowJoiners); why != "" {
			ve.Add("description", why)
		}
	}
	switch d.typ {
	case TypeStdio:
		if d.command == "" {
			ve.Add("command", "is required for a stdio server: the program to start, such as \"npx\" or \"/usr/local/bin/my-server\"")
		} else if why := textcheck.Bad(d.command); why != "" {
			ve.Add("command", why)
		}
		hadArgs := 0
		if cur != nil {
			hadArgs = len(cur.args)
		}
		if tooMany(len(d.args), hadArgs, MaxArgs) {
			// One problem for the list: its arguments are not judged one by one (700,000
			// of them could be as many errors).
			ve.Add("args", fmt.Sprintf("has %d arguments, at most %d: put a longer configuration in a file and pass its path", len(d.args), MaxArgs))
		} else {
			for i, a := range d.args {
				// An argument stored already is kept wherever it moves (one added before it).
				if utf8.RuneCountInString(a) > MaxArgLength && (cur == nil || !slices.Contains(cur.args, a)) {
					ve.Add(fmt.Sprintf("args/%d", i), tooLong(MaxArgLength)+": put a long value in a file and pass its path")
				} else if why := textcheck.Bad(a); why != "" {
					ve.Add(fmt.Sprintf("args/%d", i), why)
				}
			}
		}
		if why := textcheck.Bad(d.workingDir); why != "" {
			ve.Add("working_dir", why)
		} else if d.workingDir != "" && !filepath.IsAbs(d.workingDir) {
			ve.Add("working_dir", "must be an absolute path (or empty for Toolwarden's own directory)")
		}
		hadEnv := 0
		if cur != nil {
			hadEnv = len(cur.env)
		}
		if tooMany(len(d.env), hadEnv, MaxEnvVars) {
			ve.Add("env", fmt.Sprintf("has %d variables, at most %d: put a longer configuration in a file and pass its path", len(d.env), MaxEnvVars))
		}
		for _, k := range slices.Sorted(maps.Keys(d.env)) {
			if !envNamePattern.MatchString(k) {
				ve.Add("env/"+k, "is not a valid variable name: use letters, digits and '_', not starting with a digit")
			} else if v := d.env[k].plain; v != nil && len(*v) > MaxEnvValueLength {
				ve.Add("env/"+k, fmt.Sprintf("is too long (at most %d bytes): put a long value in a file and pass its path", MaxEnvValueLength))
			} else if v != nil && strings.ContainsRune(*v, 0) {
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
		} else if utf8.RuneCountInString(d.url) > MaxURLLength && (cur == nil || d.url != cur.url) {
			ve.Add("url", tooLong(MaxURLLength))
		} else if why := textcheck.Bad(d.url); why != "" {
			ve.Add("url", why)
		} else if msg := checkURL(d.url); msg != "" {
			ve.Add("url", msg)
		} else if msg := eg.CheckURL(d.url); msg != "" && !keptOff {
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
		had := 0
		if cur != nil {
			had = len(cur.headers)
		}
		if tooMany(len(d.headers), had, MaxHeaders) {
			ve.Add("headers", fmt.Sprintf("has %d headers, at most %d", len(d.headers), MaxHeaders))
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
			} else if v != nil && len(*v) > MaxHeaderValueLength {
				ve.Add("headers/"+k, fmt.Sprintf("value is too long (at most %d bytes)", MaxHeaderValueLength))
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
	case TypeTemplate:
		// As for an HTTP server's URL: a template the policy refuses now can stay, as it
		// is, on a server that stays disabled.
		d.validateTemplate(&ve, eg, keptOff && cur != nil && d.template == cur.template)
	case "":
		ve.Add("type", "is required: stdio, sse, streamable_http or template")
	default:
		ve.Add("type", fmt.Sprintf("%q is not a server type: use stdio, sse, streamable_http or template", d.typ))
	}
	if d.template != "" && d.typ != TypeTemplate && d.typ != "" {
		ve.Add("template", "applies to template servers only")
	}
	if d.authType == "" || d.typ == TypeStdio || d.typ == TypeTemplate {
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

// validateTemplate checks a template server: its YAML (each problem with its line), the
// origin of each HTTP tool's URL against eg unless keptOff (the egress policy judges a
// template's requests as it does an HTTP server's URL), and no settings of the other
// types.
func (d *draft) validateTemplate(ve *verr.Error, eg *egress.Policy, keptOff bool) {
	if d.template == "" {
		ve.Add("template", "is required for a template server: the YAML that defines its tools, each with a name and a command or an http request")
	} else if tpl, err := template.Parse(d.template); err != nil {
		var te *template.Error
		if !errors.As(err, &te) {
			ve.Add("template", err.Error())
		} else {
			for _, p := range te.Problems {
				ve.Add("template", p.String())
			}
		}
	} else if !keptOff {
		for _, t := range tpl.Tools {
			if t.HTTP == nil {
				continue
			}
			u := t.HTTP.URL
			if msg := eg.CheckURL(u.Scheme + "://" + u.Host); msg != "" {
				ve.Add("template", template.Problem{Line: u.Raw.Line, Message: fmt.Sprintf("tool %s: url %s://%s: %s", t.Name, u.Scheme, u.Host, msg)}.String())
			}
		}
	}
	if d.command != "" || len(d.args) > 0 || d.workingDir != "" {
		ve.Add("command", "applies to stdio servers only: a template's tools name their commands in the YAML")
	}
	if d.url != "" {
		ve.Add("url", "applies to HTTP servers only: a template's tools name their URLs in the YAML")
	}
	if len(d.env) > 0 {
		ve.Add("env", "applies to stdio servers only")
	}
	if len(d.headers) > 0 {
		ve.Add("headers", "apply to HTTP servers only: a template's tools set their headers in the YAML")
	}
	if d.authType != AuthNone && d.authType != "" {
		ve.Add("auth_type", "applies to HTTP servers only")
	}
}

// normalizeTemplate is a template as stored: line breaks as "\n" (a browser sends
// "\r\n"), and nothing at all when it is only white space.
func normalizeTemplate(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return s
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
	return literalSecretAt(a, prev, 0)
}

// maxArgSplits is how many times literalSecret splits a value at "=" (--env=NAME=value):
// splitting at every "=" would judge the rest again each time, quadratic in its length.
const maxArgSplits = 2

// literalSecretAt is literalSecret for a value after depth "="s.
func literalSecretAt(a, prev string, depth int) string {
	a = strings.TrimSpace(a)
	secretFlag := func(f string) bool { return secrets.LooksSecretName(strings.TrimLeft(f, "-")) }
	switch {
	case a == "":
		return ""
	case secrets.LooksSecretValue(a):
		return "it has the shape of a credential"
	}
	if k, v, ok := strings.Cut(a, "="); ok && depth < maxArgSplits && k != "" && !strings.ContainsAny(k, " \t:") {
		if v == "" {
			return ""
		}
		if secretFlag(k) {
			return "the value of " + k
		}
		if why := literalSecretAt(v, "", depth+1); why != "" {
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

// SecretInURL reports whether raw carries a credential, and names the query parameter
// that holds it ("" when it is the path). Besides the query, secrets.LooksSecretValue
// judges the path: a segment shaped like a token (Zapier's /mcp/sk-ak-…/sse) or a
// webhook URL, whose path is the credential.
func SecretInURL(raw string) (param string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	q := u.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[k] {
			if v != "" && (secrets.LooksSecretName(k) || secrets.LooksSecretValue(v)) {
				return k, true
			}
		}
	}
	return "", secrets.LooksSecretValue(raw)
}

// validateChange validates d as the new state of cur (nil for a new server): the rules
// of validate, and stored secrets never follow a server to another origin. Whoever may
// edit a server must not be able to point it at their own host and collect its stored
// header values and token there; after such a move each must be entered again.
func (d *draft) validateChange(cur *draft, eg *egress.Policy) error {
	// Disabling a server whose URL a stricter --egress-allow refuses since must work.
	keptOff := cur != nil && !d.enabled && strings.TrimSpace(d.url) == cur.url
	err := d.validate(cur, eg, keptOff)
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

// movedToolSecrets refuses sending a tool's secret parameter value anywhere but where
// it went when it was set: the router passes that value, as an argument, to whatever
// the server now is, which whoever may edit the server might own. A move is an HTTP
// server's change of origin, a type change to or from stdio or template, or a template
// tool whose request goes to another origin (or that turns from a command into a
// request). Those values are the tools' (a person who may configure them clears them
// first).
func movedToolSecrets(ctx context.Context, q db.Querier, id string, before, d *draft) error {
	if before == nil {
		return nil
	}
	field := "url"
	var moved func(tool string) (from, to string, ok bool)
	switch {
	case before.typ != d.typ && (before.typ == TypeStdio || d.typ == TypeStdio || before.typ == TypeTemplate || d.typ == TypeTemplate):
		field = "type"
		from, to := targetOf(before), targetOf(d)
		moved = func(string) (string, string, bool) { return from, to, true }
	case before.typ == TypeTemplate && d.typ == TypeTemplate:
		if before.template == normalizeTemplate(d.template) {
			return nil
		}
		field = "template"
		was, now := templateTargets(before.template), templateTargets(normalizeTemplate(d.template))
		moved = func(tool string) (string, string, bool) {
			to, ok := now[tool]
			from := was[tool]
			if from == "" {
				from = "a tool of that name the template no longer had"
			}
			return from, to, ok && to != was[tool] // a tool gone sends nothing
		}
	case before.typ == TypeStdio || d.typ == TypeStdio || origin(before.url) == origin(d.url):
		// What a stdio server runs is for administrators alone (server.command).
		return nil
	default:
		from, to := origin(before.url), origin(d.url)
		moved = func(string) (string, string, bool) { return from, to, true }
	}
	names, err := db.Column[string](ctx, q, "registry: tools with secret values", `/* registry.movedToolSecrets */
		SELECT name FROM mcp_tools t WHERE server_id = $1::uuid AND jsonb_typeof(configuration->'params') = 'object'
		  AND EXISTS (SELECT 1 FROM jsonb_each(t.configuration->'params') AS p WHERE jsonb_typeof(p.value) = 'object' AND p.value ? 'secret')
		ORDER BY name`, id)
	if err != nil {
		return err
	}
	var which []string
	var from, to string
	for _, n := range names {
		if f, t, ok := moved(n); ok {
			which = append(which, n)
			from, to = f, t
		}
	}
	if len(which) == 0 {
		return nil
	}
	list := strings.Join(which, ", ")
	if len(which) > 5 {
		list = strings.Join(which[:5], ", ") + fmt.Sprintf(" and %d more", len(which)-5)
	}
	where := fmt.Sprintf("are stored for %s and would be sent to %s", from, to)
	if field == "template" && len(which) > 1 {
		where = "are stored for where each tool sends its request, and the template sends them elsewhere"
	}
	return verr.New(field, fmt.Sprintf("the secret parameter values of its tools (%s) %s: "+
		"clear them on each tool's Configuration tab first, then move the server", list, where))
}

// targetOf names where a server's tools send their arguments, for movedToolSecrets.
func targetOf(d *draft) string {
	switch d.typ {
	case TypeStdio:
		return "its stdio command"
	case TypeTemplate:
		return "its template's tools"
	case TypeBuiltin:
		return "Toolwarden's built-in tools"
	}
	return origin(d.url)
}

// templateTargets maps each tool of a template to where its arguments go: its request's
// origin, or the Toolwarden host for a command. A template that does not parse has none
// (it is refused where it would be stored). The code-safety checks are left out: a
// template stored by an older release that breaks them still says where its tools went,
// so rewriting it keeps the tools' secret values instead of counting every one as moved.
func templateTargets(text string) map[string]string {
	out := map[string]string{}
	t, err := template.ParseWith(text, template.ParseOptions{SkipCodeChecks: true})
	if err != nil {
		return out
	}
	for _, tool := range t.Tools {
		switch {
		case tool.HTTP != nil:
			out[tool.Name] = origin(tool.HTTP.URL.Scheme + "://" + tool.HTTP.URL.Host)
		case tool.Command != nil:
			out[tool.Name] = "a command on the Toolwarden host"
		}
	}
	return out
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
	if d.typ == TypeTemplate && (cur == nil || cur.template != d.template) {
		for _, where := range templateSecrets(d.template) {
			ve.Add("template", where+" looks like a secret, and a template is stored, shown and audited in plain text: "+
				"make it a placeholder ({name}) of an input_schema parameter, and give that parameter a fixed value on the tool's page, where secrets are stored encrypted")
		}
	}
	if (d.typ == TypeSSE || d.typ == TypeStreamableHTTP) && (cur == nil || cur.url != d.url) {
		if k, ok := SecretInURL(d.url); ok {
			where := "its path"
			if k != "" {
				where = "its query (" + k + ")"
			}
			ve.Add("url", "carries a secret in "+where+", and URLs are stored and shown in plain text: "+
				"send it as a header or with Authentication instead, which are stored encrypted")
		}
	}
	return ve.Err()
}

// templateSecrets names each credential written into a template's text: a header's
// value, the URL's query, a command's argument, a value of a tool's input_schema
// ("tool weather: header Authorization", "tool gh: input_schema property token: default").
// Placeholders are the caller's or the tool's configuration, never a secret here.
func templateSecrets(text string) []string {
	t, err := template.Parse(text)
	if err != nil {
		return nil
	}
	var out []string
	for _, tool := range t.Tools {
		if h := tool.HTTP; h != nil {
			for _, hd := range h.Headers {
				if secretText(true, hd.Name, hd.Value) {
					out = append(out, "tool "+tool.Name+": header "+hd.Name)
				}
			}
			if k, ok := SecretInURL(h.URL.Raw.Filled("")); ok {
				if k == "" {
					k = "path"
				}
				out = append(out, "tool "+tool.Name+": the URL's "+k)
			}
			for _, f := range h.BodyFields() {
				if secretText(false, f.Name, f.Value) {
					where := "the body"
					if f.Name != "" {
						where = "the body's " + f.Name
					}
					out = append(out, "tool "+tool.Name+": "+where)
				}
			}
		}
		out = append(out, schemaSecrets(tool)...)
		if c := tool.Command; c != nil {
			if c.Stdin != nil && secretText(false, "", *c.Stdin) {
				out = append(out, "tool "+tool.Name+": stdin")
			}
			args := make([]string, len(c.Argv))
			for i, a := range c.Argv {
				args[i] = a.Filled("")
			}
			for i := range args {
				if secretArg(args, i) != "" {
					out = append(out, fmt.Sprintf("tool %s: argv[%d]", tool.Name, i))
				}
			}
		}
	}
	return out
}

// maxSchemaSecretDepth bounds schemaSecrets' recursion, as the template parser bounds a
// schema's nesting (and schema.maxDepth any other's). The parser also bounds what a
// template stands for with its aliases followed (template.MaxNodes values, 1 MiB of
// text), so the walk reads each value once within those.
const maxSchemaSecretDepth = 64

// Keywords of a schema whose value is a subschema, a list of them, or a map of them by
// name; properties are followed on their own, since they name the argument.
var (
	subschemaOne  = []string{"items", "additionalItems", "contains", "unevaluatedItems", "not", "if", "then", "else"}
	subschemaList = []string{"anyOf", "oneOf", "allOf", "prefixItems", "items"}
	subschemaMap  = []string{"$defs", "definitions", "patternProperties", "dependentSchemas"}
)

// schemaSecrets names each credential written as a value of a template tool's
// input_schema ("tool gh: input_schema property token: default"): the schema is the
// tool's definition, stored, exported, audited and listed to every client and the
// planner as it is written, and a property's default is what the tool sends when the
// argument is left out. A default, const, enum, example or examples value counts when
// it has a credential's shape, and a default or const also when its property's name
// says it holds one (secretParam). Nested properties, items and the other subschemas
// are followed, to maxSchemaSecretDepth.
func schemaSecrets(tool *template.Tool) []string {
	w := &schemaSecretWalk{tool: tool.Name, seen: map[string]bool{}}
	w.schema(tool.InputSchema, "input_schema", "", "", 0)
	return w.out
}

type schemaSecretWalk struct {
	tool string
	seen map[string]bool // places already named (anyOf branches repeat them)
	out  []string
}

// schema reads v, the subschema at prefix (input_schema, or one of its $defs) and
// argument path prop ("auth.token", "tokens[]"; "" for the schema itself), whose nearest
// property is named name.
func (w *schemaSecretWalk) schema(v any, prefix, prop, name string, depth int) {
	m, ok := v.(map[string]any)
	if !ok || depth > maxSchemaSecretDepth {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		val := m[k]
		switch {
		case k == "default" || k == "const":
			if w.value(val, name, depth) {
				w.add(prefix, prop, k)
			}
		case k == "enum" || k == "examples" || k == "example":
			l, ok := val.([]any)
			if !ok {
				l = []any{val}
			}
			if slices.ContainsFunc(l, func(e any) bool { return w.value(e, "", depth) }) {
				w.add(prefix, prop, k)
			}
		case k == "properties":
			if props, ok := val.(map[string]any); ok {
				for _, p := range slices.Sorted(maps.Keys(props)) {
					w.schema(props[p], prefix, joinProp(prop, p), p, depth+1)
				}
			}
		case k == "additionalProperties" || k == "unevaluatedProperties" || k == "propertyNames":
			w.schema(val, prefix, joinProp(prop, "*"), "", depth+1)
		case slices.Contains(subschemaMap, k):
			if subs, ok := val.(map[string]any); ok {
				for _, s := range slices.Sorted(maps.Keys(subs)) {
					if k == "$defs" || k == "definitions" {
						w.schema(subs[s], prefix+" "+k+"/"+s, "", "", depth+1)
					} else {
						w.schema(subs[s], prefix, joinProp(prop, s), "", depth+1)
					}
				}
			}
		case slices.Contains(subschemaList, k) || slices.Contains(subschemaOne, k):
			at := prop
			if strings.HasSuffix(k, "Items") || k == "items" || k == "contains" {
				at = prop + "[]"
			}
			if l, ok := val.([]any); ok && slices.Contains(subschemaList, k) {
				for _, s := range l {
					w.schema(s, prefix, at, name, depth+1)
				}
			} else if slices.Contains(subschemaOne, k) {
				w.schema(val, prefix, at, name, depth+1)
			}
		}
	}
}

// value reports whether v, a literal value of a schema under the property name, holds a
// credential: a string shaped like one anywhere in it, or a value under a name that
// says it holds one (the property's own, or a key of an object value).
func (w *schemaSecretWalk) value(v any, name string, depth int) bool {
	if depth > maxSchemaSecretDepth {
		return false
	}
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		return s != "" && (name != "" && secrets.LooksSecretParam(name) || secrets.LooksSecretValue(s))
	case json.Number:
		return name != "" && secrets.LooksSecretParam(name)
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return w.value(e, name, depth+1) })
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if w.value(x[k], k, depth+1) {
				return true
			}
		}
	}
	return false
}

func (w *schemaSecretWalk) add(prefix, prop, keyword string) {
	where := "tool " + w.tool + ": " + prefix
	if prop != "" {
		where += " property " + prop
	}
	where += ": " + keyword
	if !w.seen[where] {
		w.seen[where] = true
		w.out = append(w.out, where)
	}
}

// joinProp is the argument path of a property named p under the path prop.
func joinProp(prop, p string) string {
	if prop == "" {
		return p
	}
	return prop + "." + p
}

// secretText reports whether a named text of a template (a header, a body's field or a
// form field; name "" for a text body or stdin) holds a credential written as it is. A
// piece of it that holds a placeholder is the caller's or the tool's configuration
// ("SSWS {token}", "session={sid}"); a piece written out counts when its name says it
// is a secret or its value has a credential's shape (api_key=abc123,
// "Authorization: Bearer sk-…", password=hunter2 beside user={u}).
func secretText(header bool, name string, t template.Text) bool {
	const mark = "\x00"
	text := t.Filled(mark)
	if strings.TrimSpace(strings.ReplaceAll(text, mark, "")) == "" {
		return false
	}
	if name != "" && !strings.Contains(text, mark) {
		if header {
			return literalSecret(name+": "+text, "") != ""
		}
		if secrets.LooksSecretField(name) || secrets.LooksSecretValue(strings.TrimSpace(text)) {
			return true
		}
	}
	for _, piece := range strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune("\n;&,", r) }) {
		piece = strings.TrimSpace(piece)
		if k, v, ok := cutPair(piece); ok && !strings.Contains(k, mark) {
			if v = strings.TrimSpace(v); v != "" && !strings.Contains(v, mark) && (secrets.LooksSecretField(k) || secrets.LooksSecretValue(v)) {
				return true
			}
			continue
		}
		for _, w := range strings.Fields(strings.ReplaceAll(piece, mark, " ")) {
			if secrets.LooksSecretValue(strings.Trim(w, `"'`)) {
				return true
			}
		}
	}
	return false
}

// cutPair splits "key=value" or "key: value".
func cutPair(s string) (string, string, bool) {
	if k, v, ok := strings.Cut(s, "="); ok && k != "" && !strings.ContainsAny(k, " \t") {
		return k, v, true
	}
	if k, v, ok := strings.Cut(s, ": "); ok && k != "" && !strings.ContainsAny(k, " \t") {
		return k, v, true
	}
	return "", "", false
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
