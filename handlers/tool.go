package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// The tool page (/tools/:id): Show renders the head and the selected tab; Configure,
// Reset and Validate are the tab's and the head's actions. Enable and disable live with
// the list (tools.go).

var toolTabLabels = map[string]string{
	views.ToolTabOverview: "Overview", views.ToolTabSchema: "Schema", views.ToolTabConfiguration: "Configuration",
	views.ToolTabUsage: "Usage", views.ToolTabLogs: "Logs", views.ToolTabHistory: "History", views.ToolTabAccess: "Access",
	views.ToolTabRollback: "Rollback",
}

// toolTabOf is the tab a query names; unknown or empty is the overview.
func toolTabOf(s string) string {
	if slices.Contains(views.ToolTabs, s) {
		return s
	}
	return views.ToolTabOverview
}

// toolTabURL is the page of tool id at tab, with extra query parameters.
func toolTabURL(id, tab string, extra url.Values) string {
	switch tab {
	case views.ToolTabAccess:
		return views.ToolAccessURL(id) // a page of its own
	case views.ToolTabRollback:
		return views.ToolRollbackURL(id) // a page of its own (compensation.go)
	}
	q := url.Values{}
	for k, v := range extra {
		q[k] = v
	}
	if tab != views.ToolTabOverview {
		q.Set("tab", tab)
	}
	if len(q) == 0 {
		return "/tools/" + id
	}
	return "/tools/" + id + "?" + q.Encode()
}

// Show renders the tool page with the tab the query asks for; only that tab's data is
// read.
// ToolPageHandler serves the tool page: its tabs (overview, schema, configuration,
// access, compensation, usage, logs, history) and their forms.
type ToolPageHandler struct {
	*Shell
	Auth     *auth.Service
	Tools    *tools.Service
	Registry *registry.Service
	Usage    *usage.Service
}

func (h ToolPageHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	tab := toolTabOf(c.QueryParam("tab"))
	if tab == views.ToolTabLogs && !PrincipalOf(c).Can(auth.PermLogView) {
		return errLogsDenied
	}
	if inspectTabs[tab] && !PrincipalOf(c).Can(auth.PermToolInspect) {
		return errInspectDenied
	}
	v, err := h.toolPage(c, it, tab)
	if err != nil {
		return err
	}
	switch tab {
	case views.ToolTabOverview:
		v.Overview, err = h.toolOverview(ctx, it)
	case views.ToolTabSchema:
		v.Schema, err = h.toolSchema(ctx, it, c.QueryParam("from"), c.QueryParam("to"))
	case views.ToolTabConfiguration:
		v.Config, err = h.toolConfig(c, it, nil, nil)
	case views.ToolTabUsage:
		v.Usage, err = h.toolUsage(ctx, it, c.QueryParam("range"))
	case views.ToolTabLogs:
		v.Logs, err = h.toolLogs(ctx, it, c.QueryParam("before"))
	case views.ToolTabHistory:
		v.History, err = h.toolHistory(ctx, it)
	}
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.Tool(v))
}

// errLogsDenied: the Logs tab shows what callers sent and got back.
var errLogsDenied = fault.Forbidden("Your role may not see the calls made to tools (the log.view permission).")

// inspectTabs show who configured the tool and why: tool.inspect only.
var inspectTabs = map[string]bool{views.ToolTabConfiguration: true, views.ToolTabHistory: true, views.ToolTabAccess: true,
	views.ToolTabRollback: true}

var errInspectDenied = fault.Forbidden("Your role may not see how tools are configured or who changed them (the tool.inspect permission).")

// toolPage is the frame of the page: layout (following the tools topic), head, tabs.
func (h ToolPageHandler) toolPage(c echo.Context, it tools.Item, tab string) (views.ToolPage, error) {
	last, err := h.Events.LatestID(c.Request().Context())
	if err != nil {
		return views.ToolPage{}, err
	}
	v := views.ToolPage{Layout: h.layout(c, it.QualifiedName(), tools.Topic), Tool: toolCard(it), Tab: tab,
		Back: toolTabURL(it.ID, tab, nil)}
	v.Live.LastEventID = last
	for _, t := range views.ToolTabs {
		if t == views.ToolTabLogs && !PrincipalOf(c).Can(auth.PermLogView) {
			continue // calls carry other people's arguments: log.view only
		}
		if inspectTabs[t] && !PrincipalOf(c).Can(auth.PermToolInspect) {
			continue
		}
		v.Tabs = append(v.Tabs, views.ToolLink{Key: t, Label: toolTabLabels[t], URL: toolTabURL(it.ID, t, nil), Selected: t == tab})
		if t == views.ToolTabOverview {
			v.Tabs = append(v.Tabs, views.ToolLink{Key: views.ToolTabTest, Label: "Test", URL: testURL(it.ID), Selected: tab == views.ToolTabTest})
		}
	}
	if tab == views.ToolTabTest {
		v.Back = testURL(it.ID)
	}
	return v, nil
}

// Overview.

var toolHints = []struct{ key, label, yes, no, unset string }{
	{"readOnlyHint", "Read-only", "Yes: it only reads", "No: it may change things", "Not stated (MCP assumes it may change things)"},
	{"destructiveHint", "Destructive", "Yes: it may delete or overwrite", "No: its changes only add", "Not stated (MCP assumes it may delete or overwrite)"},
	{"idempotentHint", "Idempotent", "Yes: repeating a call changes nothing more", "No: repeating a call may change more", "Not stated (MCP assumes repeating may change more)"},
	{"openWorldHint", "Open world", "Yes: it reaches outside systems", "No: it works in a closed domain", "Not stated (MCP assumes it reaches outside systems)"},
}

func (h ToolPageHandler) toolOverview(ctx context.Context, it tools.Item) (*views.ToolOverview, error) {
	o := &views.ToolOverview{Description: it.Description, DefinitionHash: it.DefinitionHash, ConfigVersion: it.ConfigVersion,
		LastUsed: it.LastUsed, UpdatedAt: it.UpdatedAt, Timeout: "The server's timeout"}
	if it.TimeoutMS != nil {
		o.Timeout = msDuration(*it.TimeoutMS)
	}
	o.AnnotationsRisk = string(risk.Decide(risk.Input{Annotations: it.Annotations, Trusted: it.ServerTrusted}).Level)
	var ann map[string]any
	if json.Unmarshal(it.Annotations, &ann) == nil && ann != nil {
		o.HasAnnotations = true
		o.AnnotatedTitle, _ = ann["title"].(string)
	}
	for _, hint := range toolHints {
		row := views.ToolHint{Label: hint.label, Value: hint.unset}
		if b, ok := ann[hint.key].(bool); ok {
			row.Set = true
			row.Value = hint.no
			if b {
				row.Value = hint.yes
			}
		}
		if hint.key == "destructiveHint" && ann["readOnlyHint"] == true {
			row.Note = "(meaningless for a read-only tool)"
		}
		o.Hints = append(o.Hints, row)
	}
	val, ok, err := h.Tools.LatestValidation(ctx, it)
	if err != nil {
		return nil, err
	}
	if ok {
		o.Validated, o.ValidatedAt, o.ValidatedBy = true, val.CreatedAt, val.ValidatedBy
		var fs []schema.Finding
		if len(val.Findings) > 0 {
			if err := json.Unmarshal(val.Findings, &fs); err != nil {
				return nil, fmt.Errorf("handlers: findings of %s: %w", it.ID, err)
			}
		}
		schema.SortFindings(fs)
		o.Blocking = schema.Blocking(fs)
		for _, f := range fs {
			o.Findings = append(o.Findings, views.ToolFinding{Severity: string(f.Severity), Path: f.Path, Code: f.Code, Message: f.Message})
		}
	}
	return o, nil
}

// Schema.

func (h ToolPageHandler) toolSchema(ctx context.Context, it tools.Item, from, to string) (*views.ToolSchema, error) {
	def := schema.Tool{Name: it.Name, Title: it.Title, Description: it.Description, InputSchema: it.InputSchema,
		OutputSchema: it.OutputSchema, Annotations: it.Annotations}
	s := &views.ToolSchema{Params: schemaParamRows(schema.Parameters(it.InputSchema), 0), InputJSON: indentJSON(it.InputSchema),
		Markdown: schema.Markdown(def, it.QualifiedName())}
	if len(bytes.TrimSpace(it.OutputSchema)) > 0 && string(bytes.TrimSpace(it.OutputSchema)) != "null" {
		s.OutputJSON = indentJSON(it.OutputSchema)
	}
	s.Example = exampleCall(it.QualifiedName(), schema.ExampleArguments(it.InputSchema))
	versions, err := h.Registry.ToolVersions(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	byHash := map[string]registry.ToolVersion{}
	label := func(v registry.ToolVersion) string {
		l := fmt.Sprintf("v%d.%d", v.VersionMajor, v.VersionMinor)
		if v.DefinitionHash == it.DefinitionHash {
			l += " (current)"
		}
		return l
	}
	for _, v := range versions {
		if _, dup := byHash[v.DefinitionHash]; dup {
			continue // a definition seen again later: its newest version stands for it
		}
		byHash[v.DefinitionHash] = v
		row := views.ToolVersionRow{Version: fmt.Sprintf("%d.%d", v.VersionMajor, v.VersionMinor), Hash: v.DefinitionHash,
			Current: v.DefinitionHash == it.DefinitionHash, Breaking: v.Breaking, At: v.CreatedAt}
		for _, ch := range v.Changes {
			row.Changes = append(row.Changes, views.ToolChangeRow{Message: ch.Message, Breaking: ch.Breaking})
		}
		if !row.Current {
			row.CompareURL = toolTabURL(it.ID, views.ToolTabSchema, url.Values{"from": {v.DefinitionHash}, "to": {it.DefinitionHash}}) + "#compare-h"
		}
		s.Versions = append(s.Versions, row)
		s.VersionOpts = append(s.VersionOpts, views.Option{Value: v.DefinitionHash, Label: label(v)})
	}
	if len(s.VersionOpts) < 2 {
		return s, nil
	}
	// Without a choice, compare the previous version with the current one.
	if from == "" && to == "" {
		to = it.DefinitionHash
		if _, ok := byHash[to]; !ok {
			to = s.VersionOpts[0].Value
		}
		for _, o := range s.VersionOpts {
			if o.Value != to {
				from = o.Value
				break
			}
		}
	} else {
		s.CompareSelected = true
	}
	s.From, s.To = from, to
	a, okA := byHash[from]
	b, okB := byHash[to]
	if !okA || !okB {
		s.DiffError = "Choose two versions of this tool's definition to compare."
		return s, nil
	}
	s.FromLabel, s.ToLabel = label(a), label(b)
	s.Diff, s.DiffTruncated = views.FoldDiff(views.DiffLines(strings.Split(indentJSON(a.Definition), "\n"),
		strings.Split(indentJSON(b.Definition), "\n")), 3)
	for _, l := range s.Diff {
		switch l.Op {
		case views.ToolDiffAdded:
			s.LinesAdded++
		case views.ToolDiffRemoved:
			s.LinesRemoved++
		}
	}
	return s, nil
}

// schemaParamRows flattens parameters and their nested children, depth first.
func schemaParamRows(ps []schema.Param, depth int) []views.ToolParamRow {
	var out []views.ToolParamRow
	for _, p := range ps {
		out = append(out, views.ToolParamRow{Name: p.Name, Arg: p.Arg, Type: p.Type, Required: p.Required, Deprecated: p.Deprecated,
			Description: p.Description, Constraints: paramConstraintList(p), Depth: depth})
		out = append(out, schemaParamRows(p.Children, depth+1)...)
	}
	return out
}

// paramConstraintList says in words what values a parameter accepts.
func paramConstraintList(p schema.Param) []string {
	var out []string
	if len(p.Enum) == 1 {
		out = append(out, "always "+jsonText(p.Enum[0]))
	} else if len(p.Enum) > 1 {
		vals := make([]string, len(p.Enum))
		for i, e := range p.Enum {
			vals[i] = jsonText(e)
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	if p.Default != nil {
		out = append(out, "default "+jsonText(p.Default))
	}
	if p.Format != "" {
		out = append(out, "format "+p.Format)
	}
	if p.Pattern != "" {
		out = append(out, "matches "+p.Pattern)
	}
	bound := func(v *float64, excl bool, incl, strict string) {
		if v == nil {
			return
		}
		op := incl
		if excl {
			op = strict
		}
		out = append(out, op+" "+strconv.FormatFloat(*v, 'g', -1, 64))
	}
	bound(p.Min, p.ExclusiveMin, "≥", ">")
	bound(p.Max, p.ExclusiveMax, "≤", "<")
	count := func(lo, hi *int, noun string) {
		switch {
		case lo != nil && hi != nil:
			out = append(out, fmt.Sprintf("%d to %d %s", *lo, *hi, noun))
		case lo != nil:
			out = append(out, fmt.Sprintf("at least %d %s", *lo, noun))
		case hi != nil:
			out = append(out, fmt.Sprintf("at most %d %s", *hi, noun))
		}
	}
	count(p.MinLength, p.MaxLength, "characters")
	count(p.MinItems, p.MaxItems, "items")
	return out
}

// jsonText shows a JSON value compactly.
func jsonText(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(buf.String())
}

// indentJSON pretty-prints JSON with sorted keys and exact numbers, so two versions of
// a definition diff line by line; what is not JSON is returned as it is.
func indentJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimRight(buf.String(), "\n")
}

// exampleCall is the body of POST /api/v1/tools/call for the example arguments.
func exampleCall(tool string, args map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}{tool, args})
	return strings.TrimRight(buf.String(), "\n")
}

// Configuration.

// configForm is what a submitted configuration form held, to show it again.
type configForm struct {
	values                  map[string]string // param name → value typed (never a secret)
	modes                   map[string]string
	risk, timeout, category string
	rateLimit               string
	tags, reason            string
	secretsTyped            bool
}

// toolConfig builds the Configuration tab: from the stored settings, or from a
// submitted form that came back with errors.
func (h ToolPageHandler) toolConfig(c echo.Context, it tools.Item, form *configForm, errs views.FormErrors) (*views.ToolConfig, error) {
	ctx := c.Request().Context()
	cfg, err := h.Tools.Configuration(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	cats, err := h.Tools.Categories(ctx)
	if err != nil {
		return nil, err
	}
	versions, err := h.Tools.ConfigVersions(ctx, it.ID, 20)
	if err != nil {
		return nil, err
	}
	v := &views.ToolConfig{CanEdit: PrincipalOf(c).Can(auth.PermToolConfigure), Errors: errs, Version: it.ConfigVersion,
		Risk: deref(it.RiskOverride), Category: deref(it.Category), Tags: strings.Join(it.Tags, ", ")}
	if it.TimeoutMS != nil {
		v.TimeoutMS = strconv.Itoa(*it.TimeoutMS)
	}
	if it.RateLimit != nil {
		v.RateLimit = strconv.Itoa(*it.RateLimit)
	}
	annotated := risk.Decide(risk.Input{Annotations: it.Annotations, Trusted: it.ServerTrusted})
	v.RiskOpts = []views.Option{{Value: "", Label: "Annotations decide (now " + annotated.Level.Label() + ")"}}
	for _, l := range risk.Levels {
		v.RiskOpts = append(v.RiskOpts, views.Option{Value: string(l), Label: l.Label()})
	}
	for _, cat := range cats {
		v.Categories = append(v.Categories, views.Option{Value: cat.Name, Label: cat.Name})
	}
	for _, p := range tools.ConfigParams(it, cfg) {
		f := views.ToolConfigField{Name: p.Name, Type: p.Type, Kind: p.Kind, Mode: p.Mode, Value: p.Text,
			Description: p.Description, Required: p.Required, Secret: p.Secret, Stored: p.Stored}
		if p.Secret {
			f.Value = ""
		}
		for _, e := range p.Enum {
			t := jsonText(e)
			if s, ok := e.(string); ok {
				t = s
			}
			f.Options = append(f.Options, views.Option{Value: t, Label: t})
		}
		if p.Min != nil && !p.ExclusiveMin {
			f.Min = strconv.FormatFloat(*p.Min, 'g', -1, 64)
		}
		if p.Max != nil && !p.ExclusiveMax {
			f.Max = strconv.FormatFloat(*p.Max, 'g', -1, 64)
		}
		if form != nil {
			f.Mode = form.modes[p.Name]
			if !p.Secret {
				f.Value = form.values[p.Name]
			}
		}
		v.Fields = append(v.Fields, f)
	}
	if form != nil {
		v.Risk, v.TimeoutMS, v.Category, v.Tags, v.Reason = form.risk, form.timeout, form.category, form.tags, form.reason
		v.RateLimit = form.rateLimit
		v.SecretsDropped = form.secretsTyped
	}
	for _, cv := range versions {
		v.Versions = append(v.Versions, views.ToolConfigVersion{Version: cv.Version, Actor: cv.Actor, Reason: cv.Reason,
			At: cv.CreatedAt, Detail: indentJSON(cv.Configuration)})
	}
	return v, nil
}

// parseToolConfig reads the configuration form of it into a patch. Field names:
// param.<name>.mode (none, default, fixed) and param.<name>.value per top-level
// parameter; risk, timeout_ms, rate_limit, category, tags (comma-separated) and reason.
func parseToolConfig(c echo.Context, params []tools.ConfigParam) (tools.Patch, configForm, *verr.Error) {
	f := configForm{values: map[string]string{}, modes: map[string]string{}, risk: c.FormValue("risk"),
		timeout: strings.TrimSpace(c.FormValue("timeout_ms")), rateLimit: strings.TrimSpace(c.FormValue("rate_limit")),
		category: c.FormValue("category"), tags: c.FormValue("tags"), reason: strings.TrimSpace(c.FormValue("reason"))}
	e := &verr.Error{}
	p := tools.Patch{Risk: &f.risk, Category: &f.category, SetTags: true, Reason: f.reason, Params: map[string]tools.ParamInput{}}
	p.Tags = strings.Split(f.tags, ",")
	timeout := 0
	if f.timeout != "" {
		n, err := strconv.Atoi(f.timeout)
		if err != nil {
			e.Add("timeout_ms", "must be a whole number of milliseconds (or empty for the server's timeout)")
		}
		timeout = n
	}
	p.TimeoutMS = &timeout
	// Empty (or 0) removes the limit; a form without the field (one rendered before it
	// existed) leaves it as it is rather than removing a limit set through the API.
	if c.Request().Form.Has("rate_limit") {
		limit := 0
		if f.rateLimit != "" {
			n, err := strconv.Atoi(f.rateLimit)
			if err != nil {
				e.Add("rate_limit", "must be a whole number of calls a minute (or empty for no limit of its own)")
			}
			limit = n
		}
		p.RateLimit = &limit
	}
	if v, err := strconv.Atoi(c.FormValue("configuration_version")); err == nil {
		p.ExpectVersion = &v
	}
	p.MayLowerRisk = PrincipalOf(c).Can(auth.PermToolOverride)
	for _, cp := range params {
		mode := c.FormValue("param." + cp.Name + ".mode")
		val := c.FormValue("param." + cp.Name + ".value")
		switch mode {
		case "", "none":
			mode = tools.ModeNone
		case tools.ModeDefault, tools.ModeFixed:
		default:
			e.Add("params."+cp.Name, "choose how the parameter is set: caller decides, default or fixed")
		}
		f.modes[cp.Name] = mode
		if cp.Secret {
			f.secretsTyped = f.secretsTyped || val != ""
		} else {
			f.values[cp.Name] = val
		}
		if mode == tools.ModeNone {
			continue
		}
		text := val
		p.Params[cp.Name] = tools.ParamInput{Mode: mode, Text: &text}
	}
	return p, f, e
}

// Configure saves the configuration form. Bad input changes nothing and shows the tab
// again (422) with each error next to its field.
func (h ToolPageHandler) Configure(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	cfg, err := h.Tools.Configuration(ctx, it.ID)
	if err != nil {
		return err
	}
	patch, form, perr := parseToolConfig(c, tools.ConfigParams(it, cfg))
	err = perr.Err()
	var out tools.Item
	if err == nil {
		out, err = h.Tools.Update(ctx, ActorOf(c), it.ID, patch)
	}
	if err != nil {
		status := http.StatusUnprocessableEntity
		fe, ok := formErrors(err)
		if se, _ := fault.As(err); se != nil && se.Code == tools.CodeStale {
			fe, ok, status = views.FormErrors{"configuration_version": httperr.Sentence(se.Message)}, true, http.StatusConflict
		}
		if !ok {
			return err
		}
		v, perr := h.toolPage(c, it, views.ToolTabConfiguration)
		if perr != nil {
			return perr
		}
		if v.Config, perr = h.toolConfig(c, it, &form, fe); perr != nil {
			return perr
		}
		return render(c, status, views.Tool(v))
	}
	msg := "Nothing changed: the configuration was already like that."
	if out.ConfigVersion != it.ConfigVersion {
		msg = fmt.Sprintf("Configuration of %s saved as version %d.", out.QualifiedName(), out.ConfigVersion)
		if out.Status != it.Status {
			msg += " The tool is now " + out.Status + "."
		}
	}
	setFlash(c, "success", msg, h.SecureCookies)
	return c.Redirect(http.StatusSeeOther, toolTabURL(it.ID, views.ToolTabConfiguration, nil))
}

// Reset returns the tool to its defaults (a new configuration version records it).
func (h ToolPageHandler) Reset(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	out, err := h.Tools.Reset(ctx, ActorOf(c), it.ID)
	return h.redirectWithOutcome(c, err, func() string {
		if out.ConfigVersion == it.ConfigVersion {
			return it.QualifiedName() + " already runs with its defaults."
		}
		return fmt.Sprintf("%s reset to its defaults (configuration version %d).", it.QualifiedName(), out.ConfigVersion)
	}, toolTabURL(it.ID, views.ToolTabConfiguration, nil))
}

// Validate validates the tool's current definition again and says what it found.
func (h ToolPageHandler) Validate(c echo.Context) error {
	ctx := c.Request().Context()
	it, err := h.Tools.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	out, err := h.Tools.Revalidate(ctx, ActorOf(c), it.ID)
	return h.redirectWithOutcome(c, err, func() string {
		found := "no findings"
		if w := deref(out.ValidationWorst); w != "" {
			found = "worst finding: " + w
		}
		return fmt.Sprintf("Validated %s again (%s); it is %s.", out.QualifiedName(), found, out.Status)
	}, toolsBack(c, toolTabURL(it.ID, views.ToolTabOverview, nil)))
}

// Usage.

// usageRanges are the periods of the Usage tab and their bucket sizes.
var usageRanges = []struct {
	key, label, bucket string
	span               time.Duration
	buckets            int
}{
	{"24h", "Last 24 hours", "hour", 24 * time.Hour, 24},
	{"7d", "Last 7 days", "6 hours", 7 * 24 * time.Hour, 28},
	{"30d", "Last 30 days", "day", 30 * 24 * time.Hour, 30},
}

func (h ToolPageHandler) toolUsage(ctx context.Context, it tools.Item, rng string) (*views.ToolUsage, error) {
	r := usageRanges[0]
	for _, x := range usageRanges {
		if x.key == rng {
			r = x
		}
	}
	u := &views.ToolUsage{Range: r.key, RangeLabel: r.label, BucketLabel: r.bucket}
	for _, x := range usageRanges {
		u.Ranges = append(u.Ranges, views.ToolLink{Key: x.key, Label: strings.TrimPrefix(x.label, "Last "),
			URL: toolTabURL(it.ID, views.ToolTabUsage, url.Values{"range": {x.key}}), Selected: x.key == r.key})
	}
	// Whole buckets: the period ends at the next bucket boundary, so bars line up with
	// round hours and days.
	step := r.span / time.Duration(r.buckets)
	to := time.Now().UTC().Truncate(step).Add(step)
	from := to.Add(-r.span)
	st, err := h.Usage.Summary(ctx, it.ID, from, to)
	if err != nil {
		return nil, err
	}
	u.Calls, u.Failures, u.LastUsed = st.Calls, st.Failures, st.LastUsed
	if st.Calls == 0 {
		return u, nil
	}
	u.SuccessRate = percent(st.SuccessRate)
	u.P50, u.P95, u.Avg = msPtr(st.P50MS), msPtr(st.P95MS), msPtr(st.AvgMS)
	buckets, err := h.Usage.Series(ctx, it.ID, from, to, r.buckets)
	if err != nil {
		return nil, err
	}
	ok := views.ChartSeries{Label: "Succeeded", Class: "chart-bar-ok"}
	failed := views.ChartSeries{Label: "Failed", Class: "chart-bar-fail"}
	p50 := views.ChartSeries{Label: "p50", Class: "chart-line-p50"}
	p95 := views.ChartSeries{Label: "p95", Class: "chart-line-p95"}
	for _, b := range buckets {
		ok.Points = append(ok.Points, views.ChartPoint{T: b.Start, V: float64(b.Calls - b.Failures)})
		failed.Points = append(failed.Points, views.ChartPoint{T: b.Start, V: float64(b.Failures)})
		p50.Points = append(p50.Points, latencyPoint(b.Start, b.P50MS))
		p95.Points = append(p95.Points, latencyPoint(b.Start, b.P95MS))
		u.Series = append(u.Series, views.ToolUsagePoint{Label: b.Start.Format("Jan 2 15:04"), Calls: b.Calls, Failures: b.Failures,
			P50: msPtr(b.P50MS), P95: msPtr(b.P95MS)})
	}
	u.CallsChart = views.Chart{ID: "usage-calls", Title: "Calls per " + r.bucket, Unit: "calls", Series: []views.ChartSeries{ok, failed},
		From: from, To: to, Step: step, Stacked: true, Integer: true}
	u.LatencyChart = views.Chart{ID: "usage-latency", Title: "Latency", Unit: "ms", Series: []views.ChartSeries{p50, p95},
		From: from, To: to, Step: step, Empty: "No timed calls in this period"}
	return u, nil
}

func latencyPoint(t time.Time, v *float64) views.ChartPoint {
	if v == nil {
		return views.ChartPoint{T: t, Missing: true}
	}
	return views.ChartPoint{T: t, V: *v}
}

func percent(r float64) string {
	p := r * 100
	if p == math.Trunc(p) {
		return fmt.Sprintf("%.0f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

// msPtr formats a latency in milliseconds; "—" when there is none.
func msPtr(v *float64) string {
	if v == nil {
		return "—"
	}
	switch ms := *v; {
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	default:
		return fmt.Sprintf("%.0f ms", ms)
	}
}

// Logs.

const toolLogsPerPage = 50

func (h ToolPageHandler) toolLogs(ctx context.Context, it tools.Item, before string) (*views.ToolLogs, error) {
	var beforeID int64
	if before != "" {
		n, err := strconv.ParseInt(before, 10, 64)
		if err != nil || n < 0 {
			return nil, verr.New("before", "must be the id of a call (from the Older link)")
		}
		beforeID = n
	}
	logs, next, err := h.Usage.Recent(ctx, it.ID, beforeID, toolLogsPerPage)
	if err != nil {
		return nil, err
	}
	l := &views.ToolLogs{}
	if next > 0 {
		l.OlderURL = toolTabURL(it.ID, views.ToolTabLogs, url.Values{"before": {strconv.FormatInt(next, 10)}})
	}
	if beforeID > 0 {
		l.NewestURL = toolTabURL(it.ID, views.ToolTabLogs, nil)
	}
	for _, g := range logs {
		l.Rows = append(l.Rows, views.ToolLogRow{ID: g.ID, At: g.UsedAt, Actor: g.Actor, Source: g.Source, Duration: msPtr(g.DurationMS),
			Success: g.Success, ErrorCode: g.ErrorCode, Request: indentJSON(g.Request), Response: indentJSON(g.Response),
			Error: indentJSON(g.Error), Truncated: g.RequestTruncated || g.Truncated || g.ErrorTruncated})
	}
	return l, nil
}

// History.

func (h ToolPageHandler) toolHistory(ctx context.Context, it tools.Item) (*views.ToolHistory, error) {
	rows, err := h.Registry.ToolHistory(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	out := &views.ToolHistory{}
	for _, r := range rows {
		hr := views.ToolHistoryRow{From: deref(r.From), To: r.To, Actor: r.Actor, Reason: r.Reason, At: r.CreatedAt}
		var meta map[string]any
		_ = json.Unmarshal(r.Metadata, &meta)
		if meta["override"] == true {
			hr.Notes = append(hr.Notes, "Override: enabled despite its findings or a failed test")
			delete(meta, "override")
		}
		if meta["testing_skipped"] == true {
			hr.Notes = append(hr.Notes, "Testing was skipped")
			delete(meta, "testing_skipped")
		}
		fromHash, _ := meta["from_hash"].(string)
		toHash, _ := meta["to_hash"].(string)
		if fromHash != "" && toHash != "" {
			hr.DiffURL = toolTabURL(it.ID, views.ToolTabSchema, url.Values{"from": {fromHash}, "to": {toHash}}) + "#compare-h"
		}
		if len(meta) > 0 {
			b, _ := json.Marshal(meta)
			hr.Meta = indentJSON(b)
		}
		out.Rows = append(out.Rows, hr)
	}
	return out, nil
}
