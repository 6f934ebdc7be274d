package configcode

// Reading a configuration file: the servers through registry.ParseConfig, the rest here.
// Unknown keys are errors (a misspelt key in a file kept in version control must not be
// silently ignored); every problem names the file, the tool and the field.

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

// sections are the top-level keys this package reads (registry reads version and servers).
var sections = []string{"categories", "tools", "settings"}

// File is a parsed configuration file.
type File struct {
	Servers *registry.Config
	// Categories, Tools and Settings are nil when the file has no such section (a file
	// of servers only, or a client's claude_desktop_config.json): nothing of that kind
	// changes.
	Categories []Category
	Tools      []Tool
	Settings   *Settings
	HasTools   bool
	HasCats    bool
}

// Category is a category as the file states it.
type Category struct {
	Name, Description string
	AutoEnable        bool
}

// Tool is one tool's settings as the file states them: the whole of them.
type Tool struct {
	Name  string // qualified
	State string // "enabled", "disabled" or "" (as the lifecycle leaves it)
	// Override is why an administrator enabled the tool despite critical or error
	// findings or a failed test: with it, the import may do the same.
	Override string
	// DefinitionHash is the definition the file's state and override were decided on
	// (lower-case hex, the whole hash or its start of at least tools.SeenPrefix
	// characters; "" when the file pins none): an enable or override of another
	// definition is not applied (see pinIs).
	DefinitionHash string
	Risk           string
	TimeoutMS      int
	RateLimit      int
	Category       string
	Tags           []string
	Params         map[string]Param
	Permissions    map[string]bool
	Compensation   *Compensation
	TestCases      []tools.TestCase
}

// Param is one configured parameter. A secret one has SecretEnv (the reference) and,
// when the importer's environment holds it, Value.
type Param struct {
	Mode      string
	Value     json.RawMessage
	SecretEnv string
}

// Compensation is how a tool is undone.
type Compensation struct {
	Undo      string
	Arguments map[string]executions.MappedArgument
}

// Settings are the run-time settings.
type Settings struct {
	ApprovalTTLSeconds int64
	HighSeparation     string
}

// Parse reads a configuration file: Toolwarden's YAML (Export), or a client's file that
// only registers servers (registry.ParseConfig). Every problem is reported at once as a
// registry.CodeInvalidConfig fault.
func Parse(filename string, data []byte, opts registry.ParseOptions) (*File, error) {
	opts.Sections = sections
	cfg, err := registry.ParseConfig(filename, data, opts)
	if err != nil {
		return nil, err
	}
	f := &File{Servers: cfg}
	if cfg.Format != registry.FormatToolwarden {
		return f, nil
	}
	tree, err := registry.DecodeTree(filename, data)
	if err != nil {
		return nil, err
	}
	p := &parser{file: filename, opts: opts}
	top, _ := tree.(map[string]any)
	p.read(f, top)
	if len(p.errs) > 0 {
		return nil, registry.ConfigError(p.errs)
	}
	return f, nil
}

type parser struct {
	file string
	opts registry.ParseOptions
	errs []registry.Problem
}

func (p *parser) fail(field, msg string) {
	p.errs = append(p.errs, registry.Problem{File: p.file, Field: field, Message: msg})
}

// fields reads one mapping strictly.
type fields struct {
	p    *parser
	path string
	m    map[string]any
	seen map[string]bool
}

func (p *parser) mapping(path string, v any) (*fields, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(path, fmt.Sprintf("must be a mapping, not %s", registry.Describe(v)))
		return nil, false
	}
	return &fields{p: p, path: path, m: m, seen: map[string]bool{}}, true
}

func (o *fields) field(k string) string { return o.path + "." + k }

func (o *fields) get(k string) (any, bool) {
	o.seen[k] = true
	v, ok := o.m[k]
	return v, ok && v != nil
}

// value is get for a key whose value may be null: `value: null` is the JSON null, not
// a value left out.
func (o *fields) value(k string) (any, bool) {
	o.seen[k] = true
	v, ok := o.m[k]
	return v, ok
}

func (o *fields) finish() {
	for _, k := range slices.Sorted(maps.Keys(o.m)) {
		if !o.seen[k] {
			o.p.fail(o.field(k), "is not a field Toolwarden knows (check the spelling)")
		}
	}
}

func (o *fields) str(k string) string {
	v, ok := o.get(k)
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	o.p.fail(o.field(k), fmt.Sprintf("must be a string, not %s", registry.Describe(v)))
	return ""
}

func (o *fields) integer(k string) int64 {
	v, ok := o.get(k)
	if !ok {
		return 0
	}
	n, isNum := v.(json.Number)
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if !isNum || err != nil {
		o.p.fail(o.field(k), fmt.Sprintf("must be a whole number, not %s", registry.Describe(v)))
		return 0
	}
	return i
}

// boolean reads a flag; left out, it is false. A null is refused, not read as left out:
// the API takes null to mean "remove" (a permission's rule), and a file whose
// `bob: null` silently became a refusal would do the opposite of what it says.
func (o *fields) boolean(k string) bool {
	v, ok := o.value(k)
	if !ok {
		return false
	}
	if v == nil {
		o.p.fail(o.field(k), "must be true or false, not null (leave it out for false)")
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		o.p.fail(o.field(k), fmt.Sprintf("must be true or false, not %s", registry.Describe(v)))
	}
	return b
}

func (o *fields) list(k string) []any {
	v, ok := o.get(k)
	if !ok {
		return nil
	}
	l, isList := v.([]any)
	if !isList {
		o.p.fail(o.field(k), fmt.Sprintf("must be a list, not %s", registry.Describe(v)))
	}
	return l
}

// jsonOf is a value of the file as JSON.
func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

var envRefRE = regexp.MustCompile(`^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$`)

func (p *parser) read(f *File, top map[string]any) {
	if v, ok := top["categories"]; ok && v != nil {
		f.HasCats = true
		l, isList := v.([]any)
		if !isList {
			p.fail("categories", "must be a list of categories (name, description, auto_enable)")
		}
		seen := map[string]bool{}
		for i, item := range l {
			o, ok := p.mapping(fmt.Sprintf("categories[%d]", i), item)
			if !ok {
				continue
			}
			c := tools.CategoryInput{Name: o.str("name"), Description: o.str("description"), AutoEnable: o.boolean("auto_enable")}
			// Checked before it names the category's fields: the path is printed.
			if why := badName(c.Name); why != "" {
				p.fail(o.field("name"), why)
				continue
			}
			o.path = "categories." + c.Name
			o.finish()
			p.text(o.field("description"), c.Description)
			// Its characters are judged by the plan, against the stored description: one
			// stored before the rules on hidden characters comes back in an export.
			if err := tools.CheckCategoryKeeping(&c, &c.Description); err != nil {
				p.fieldErrors(o.path, err)
				continue
			}
			if seen[c.Name] {
				p.fail(o.path, "appears twice in the file")
				continue
			}
			seen[c.Name] = true
			f.Categories = append(f.Categories, Category{Name: c.Name, Description: c.Description, AutoEnable: c.AutoEnable})
		}
	}
	if v, ok := top["settings"]; ok && v != nil {
		if o, ok := p.mapping("settings", v); ok {
			_, hasTTL := o.get("approval_ttl_seconds")
			n := len(p.errs)
			st := &Settings{ApprovalTTLSeconds: o.integer("approval_ttl_seconds")}
			// Left out (or not a number, reported already), the default applies; 0 is
			// checked as any other number, the file's format giving it no meaning.
			if !hasTTL || len(p.errs) > n {
				st.ApprovalTTLSeconds = int64(executions.DefaultApprovalTTL.Seconds())
			}
			st.HighSeparation = o.str("high_separation")
			o.finish()
			if err := executions.CheckSettings(settingsOf(st)); err != nil {
				// Named by the file's keys, not the settings' own.
				var ve *verr.Error
				if errors.As(err, &ve) {
					for i, fe := range ve.Fields {
						if fe.Field == "approval_ttl" {
							ve.Fields[i].Field = "approval_ttl_seconds"
						}
					}
				}
				p.fieldErrors("settings", err)
			}
			f.Settings = st
		}
	}
	if v, ok := top["tools"]; ok && v != nil {
		f.HasTools = true
		l, isList := v.([]any)
		if !isList {
			p.fail("tools", "must be a list of tools, each with tool: server__name")
		}
		seen := map[string]bool{}
		for i, item := range l {
			o, ok := p.mapping(fmt.Sprintf("tools[%d]", i), item)
			if !ok {
				continue
			}
			t := p.tool(o, i)
			if t.Name == "" {
				continue
			}
			if seen[t.Name] {
				p.fail("tools."+t.Name, "appears twice in the file")
				continue
			}
			seen[t.Name] = true
			f.Tools = append(f.Tools, t)
		}
		slices.SortFunc(f.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	}
}

func (p *parser) tool(o *fields, i int) Tool {
	t := Tool{Name: o.str("tool")}
	if why := badName(t.Name); why != "" {
		p.fail(fmt.Sprintf("tools[%d].tool", i), why)
		t.Name = ""
		return t
	}
	if server, name, ok := toolname.Split(t.Name); !ok || server == "" || name == "" {
		p.fail(fmt.Sprintf("tools[%d].tool", i), fmt.Sprintf("%q is not a qualified tool name: write server__tool", t.Name))
		t.Name = ""
		return t
	}
	o.path = "tools." + t.Name
	t.State = o.str("state")
	if t.State != "" && t.State != "enabled" && t.State != "disabled" {
		p.fail(o.field("state"), fmt.Sprintf("%q is not a state an administrator sets: enabled or disabled (or leave it out)", t.State))
	}
	t.Override = strings.TrimSpace(o.str("override"))
	if t.Override != "" && t.State == "" {
		p.fail(o.field("override"), "is the reason an enabled tool was enabled despite its findings: give state too")
	}
	if len(t.Override) > tools.MaxReason {
		p.fail(o.field("override"), fmt.Sprintf("is too long (at most %d characters)", tools.MaxReason))
	} else {
		p.text(o.field("override"), t.Override)
	}
	// An override without definition_hash is read, not refused: every export before
	// definition_hash had one so, and a file with errors changes nothing. Plan reports
	// that tool's state and override as not applied (overrideWithoutHash).
	t.DefinitionHash = p.definitionHash(o)
	t.Risk = strings.ToLower(o.str("risk"))
	if t.Risk != "" && t.Risk != "low" && t.Risk != "medium" && t.Risk != "high" {
		p.fail(o.field("risk"), "must be low, medium or high (or left out to let the annotations decide)")
	}
	t.TimeoutMS = int(o.integer("timeout_ms"))
	if t.TimeoutMS != 0 && (t.TimeoutMS < tools.MinTimeoutMS || t.TimeoutMS > tools.MaxTimeoutMS) {
		p.fail(o.field("timeout_ms"), fmt.Sprintf("must be between %d and %d milliseconds (or 0 for the server's timeout)", tools.MinTimeoutMS, tools.MaxTimeoutMS))
	}
	t.RateLimit = int(o.integer("rate_limit"))
	if t.RateLimit < 0 || t.RateLimit > tools.MaxRateLimit {
		p.fail(o.field("rate_limit"), fmt.Sprintf("must be 0 (no limit of its own) to %d calls a minute", tools.MaxRateLimit))
	}
	// Trimmed as tools.CheckCategory trims a category's name: " ops" is the category ops.
	t.Category = strings.ToLower(strings.TrimSpace(o.str("category")))
	if why := badName(t.Category); why != "" {
		p.fail(o.field("category"), why)
		t.Category = ""
	}
	var tags []string
	for j, v := range o.list("tags") {
		s, ok := v.(string)
		if !ok {
			p.fail(fmt.Sprintf("%s[%d]", o.field("tags"), j), fmt.Sprintf("must be a string, not %s", registry.Describe(v)))
			continue
		}
		tags = append(tags, s)
	}
	norm, err := tools.NormalizeTags(tags)
	if err != nil {
		p.fieldErrors(o.path, err)
	}
	t.Tags = norm
	if v, ok := o.get("config"); ok {
		if co, ok := p.mapping(o.field("config"), v); ok {
			t.Params = map[string]Param{}
			for _, name := range slices.Sorted(maps.Keys(co.m)) {
				co.seen[name] = true
				if why := badName(name); why != "" {
					p.fail(co.path, fmt.Sprintf("parameter %q %s", name, why))
					continue
				}
				po, ok := p.mapping(co.field(name), co.m[name])
				if !ok {
					continue
				}
				pm := Param{Mode: po.str("mode")}
				if pm.Mode != tools.ModeDefault && pm.Mode != tools.ModeFixed {
					p.fail(po.field("mode"), "must be default or fixed")
				}
				value, hasValue := po.value("value")
				ref := po.str("secret")
				po.finish()
				switch {
				case hasValue && ref != "":
					p.fail(po.path, "give a value or a secret reference, not both")
				case ref != "":
					m := envRefRE.FindStringSubmatch(ref)
					if m == nil {
						// Not quoted: what is there may be the secret itself, pasted in.
						p.fail(po.field("secret"), "is not a reference (the value is not shown): write ${env:NAME}; a secret value itself never belongs in the file")
						continue
					}
					if p.opts.ExpandEnv && registry.OwnSetting(m[1]) {
						// Imports run in the service's environment: its database URL and the
						// admin's password must not become a tool's argument.
						p.fail(po.field("secret"), fmt.Sprintf("environment variable %s is Toolwarden's own setting and is never put into a tool; set the value in another variable", m[1]))
						continue
					}
					pm.SecretEnv = m[1]
					if p.opts.ExpandEnv && p.opts.LookupEnv != nil {
						if val, found := p.opts.LookupEnv(m[1]); found {
							pm.Value = jsonOf(val)
						}
					}
				case hasValue:
					pm.Value = jsonOf(value)
					p.jsonText(po.field("value"), pm.Value)
				default:
					p.fail(po.path, "needs a value (or, for a secret, secret: ${env:NAME})")
				}
				t.Params[name] = pm
			}
		}
	}
	if v, ok := o.get("permissions"); ok {
		if po, ok := p.mapping(o.field("permissions"), v); ok {
			t.Permissions = map[string]bool{}
			spelled := map[string]string{}
			for _, user := range slices.Sorted(maps.Keys(po.m)) {
				if why := badName(user); why != "" {
					p.fail(po.path, fmt.Sprintf("user %q %s", user, why))
					continue
				}
				// Usernames are stored as sign-in writes them ("Bob" is bob): a name in
				// another case is that user, not a change on every import.
				name := auth.NormalizeUsername(user)
				if first, ok := spelled[name]; ok {
					p.fail(po.field(user), fmt.Sprintf("%q and %q are the same user (%s): keep one", first, user, name))
					continue
				}
				spelled[name] = user
				if po.m[user] == nil {
					// Said here, not by boolean: left out, the user's role decides.
					po.seen[user] = true
					p.fail(po.field(user), "must be true (may use the tool) or false (may not), not null: to let the user's role decide, leave the user out")
					continue
				}
				t.Permissions[name] = po.boolean(user)
			}
		}
	}
	if v, ok := o.get("compensation"); ok {
		if co, ok := p.mapping(o.field("compensation"), v); ok {
			c := &Compensation{Undo: co.str("undo"), Arguments: map[string]executions.MappedArgument{}}
			if why := badName(c.Undo); why != "" {
				p.fail(co.field("undo"), why)
			} else if s, n, ok := toolname.Split(c.Undo); !ok || s == "" || n == "" {
				p.fail(co.field("undo"), fmt.Sprintf("%q is not a qualified tool name: write server__tool", c.Undo))
			}
			if av, ok := co.get("arguments"); ok {
				if ao, ok := p.mapping(co.field("arguments"), av); ok {
					for _, name := range slices.Sorted(maps.Keys(ao.m)) {
						ao.seen[name] = true
						if why := badName(name); why != "" {
							p.fail(ao.path, fmt.Sprintf("argument %q %s", name, why))
							continue
						}
						mo, ok := p.mapping(ao.field(name), ao.m[name])
						if !ok {
							continue
						}
						a := executions.MappedArgument{From: mo.str("from")}
						p.text(mo.field("from"), a.From)
						if val, ok := mo.value("value"); ok {
							a.Value = jsonOf(val)
							p.jsonText(mo.field("value"), a.Value)
						}
						mo.finish()
						c.Arguments[name] = a
					}
				}
			}
			co.finish()
			if err := executions.CheckArgumentMap(c.Arguments); err != nil {
				p.fieldErrors(co.path, err)
			}
			t.Compensation = c
		}
	}
	names := map[string]bool{}
	cases := o.list("test_cases")
	if len(cases) > tools.MaxTestCases {
		p.fail(o.field("test_cases"), fmt.Sprintf("has %d test cases: a tool keeps at most %d", len(cases), tools.MaxTestCases))
	}
	for j, item := range cases {
		co, ok := p.mapping(fmt.Sprintf("%s[%d]", o.field("test_cases"), j), item)
		if !ok {
			continue
		}
		tc := tools.TestCase{Name: co.str("name"), Expect: co.str("expect"), ExpectText: co.str("expect_text"), Arguments: json.RawMessage("{}")}
		if why := badName(tc.Name); why != "" {
			p.fail(co.field("name"), why)
			continue
		}
		if av, ok := co.get("arguments"); ok {
			tc.Arguments = jsonOf(av)
			p.jsonText(co.field("arguments"), tc.Arguments)
		}
		p.text(co.field("expect_text"), tc.ExpectText)
		co.finish()
		if err := tools.CheckTestCase(&tc); err != nil {
			p.fieldErrors(co.path, err)
			continue
		}
		if names[tc.Name] {
			p.fail(co.path, fmt.Sprintf("a second test case named %q", tc.Name))
			continue
		}
		names[tc.Name] = true
		t.TestCases = append(t.TestCases, tc)
	}
	o.finish()
	return t
}

// hashRE is a definition hash as the file may give it: hex, from tools.SeenPrefix
// characters (the start the tool pages accept for the whole) to the whole SHA-256.
var hashRE = regexp.MustCompile(fmt.Sprintf(`^[0-9a-f]{%d,%d}$`, tools.SeenPrefix, sha256.Size*2))

// definitionHash reads a tool's definition_hash, lower-cased (hex is read either way).
func (p *parser) definitionHash(o *fields) string {
	h := strings.ToLower(strings.TrimSpace(o.str("definition_hash")))
	if h != "" && !hashRE.MatchString(h) {
		p.fail(o.field("definition_hash"), fmt.Sprintf("must be the tool's definition hash: hex, its %d characters or at least their first %d (the tool's page and 'toolwarden export' give it)",
			sha256.Size*2, tools.SeenPrefix))
		return ""
	}
	return h
}

// text reports s, a string of the file stored as text, when PostgreSQL cannot store it
// (a NUL, bytes that are not UTF-8): refused here naming its field, not by the INSERT.
func (p *parser) text(field, s string) {
	if why := textcheck.Bad(s); why != "" {
		p.fail(field, why)
	}
}

// jsonText is text for a value of the file stored as JSON (a NUL is \u0000, which jsonb
// refuses), naming where inside the value.
func (p *parser) jsonText(field string, raw json.RawMessage) {
	if ptr, why, bad := textcheck.JSON(raw); bad {
		p.fail(field, strings.TrimSpace(ptr+" "+why))
	}
}

// fieldErrors reports a validation error's fields under path.
func (p *parser) fieldErrors(path string, err error) {
	var ve *verr.Error
	if errors.As(err, &ve) {
		for _, fe := range ve.Fields {
			p.fail(path+"."+strings.TrimPrefix(fe.Field, "/"), fe.Message)
		}
		return
	}
	p.fail(path, err.Error())
}
