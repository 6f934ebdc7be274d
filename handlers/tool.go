package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/schema"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/usage"
	"github.com/toolwarden/toolwarden/views"
)

// The tool page (/tools/:id): Show renders the head and the selected tab; Configure,
// Reset and Validate are the tab's and the head's actions. Enable and disable live with
// the list (tools.go).

var toolTabLabels = map[string]string{
	views.ToolTabOverview: "Overview", views.ToolTabSchema: "Schema", views.ToolTabConfiguration: "Configuration",
	views.ToolTabUsage: "Usage", views.ToolTabLogs: "Logs", views.ToolTabHistory: "History", views.ToolTabAccess: "Access",
	views.ToolTabCompensation: "Compensation",
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
	case views.ToolTabCompensation:
		return views.ToolCompensationURL(id) // a page of its own (compensation.go)
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
	// MCP masks the server's secrets in stored definitions (the Versions tab).
	MCP *mcpclient.Manager
}

func (h ToolPageHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	// The cursor is read before the tool, so a change that lands in between is replayed
	// rather than lost (dashboard.go).
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
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
	if tab == views.ToolTabUsage && !PrincipalOf(c).Can(auth.PermToolInspect) {
		return errUsageDenied
	}
	v := h.toolPageAt(c, it, tab, last)
	switch tab {
	case views.ToolTabOverview:
		v.Overview, err = h.toolOverview(ctx, it, PrincipalOf(c).Can(auth.PermToolInspect))
	case views.ToolTabSchema:
		v.Schema, err = h.toolSchema(ctx, it, c.QueryParam("from"), c.QueryParam("to"))
	case views.ToolTabConfiguration:
		v.Config, err = h.toolConfig(c, it, nil, nil)
	case views.ToolTabUsage:
		v.Usage, err = h.toolUsage(ctx, it, c.QueryParam("range"))
	case views.ToolTabLogs:
		var only *string
		if p := PrincipalOf(c); it.Server == registry.BuiltinName && !p.Can(auth.PermAuditView) {
			// A built-in tool's calls hold their caller's commands, output, notes and
			// files: others' are for audit.view, as their terminals are (terminals.go).
			only = &p.User.ID
		}
		v.Logs, err = h.toolLogs(ctx, it, only, c.QueryParam("before"))
	case views.ToolTabHistory:
		v.History, err = h.toolHistory(ctx, it, c.QueryParam("before"))
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
	views.ToolTabCompensation: true}

// errUsageDenied: how often and how well a tool is called is for those who may look
// into tools (tool.inspect), as /analytics is for log.view; a guest sees which tools exist.
var errUsageDenied = fault.Forbidden("Your role may not see how tools are used (the tool.inspect permission).")

var errInspectDenied = fault.Forbidden("Your role may not see how tools are configured or who changed them (the tool.inspect permission).")

// toolPageAt is the frame of the page: layout (following the tools topic from last, a
// cursor read before the tool, as Show does), head, tabs.
func (h ToolPageHandler) toolPageAt(c echo.Context, it tools.Item, tab string, last int64) views.ToolPage {
	// The head's back is the live head's, the same on every tab (views.ToolHeadBack);
	// toolsBack returns to the tab from the Referer.
	v := views.ToolPage{Layout: h.layout(c, it.QualifiedName(), tools.Topic), Tool: toolCard(it), Tab: tab,
		Back: views.ToolHeadBack(it.ID)}
	v.Live.LastEventID = last
	if !PrincipalOf(c).Can(auth.PermToolInspect) {
		v.Tool.Override = "" // why an administrator overrode the findings: tool.inspect, as the findings are
	}
	for _, t := range views.ToolTabs {
		if t == views.ToolTabLogs && !PrincipalOf(c).Can(auth.PermLogView) {
			continue // calls carry other people's arguments: log.view only
		}
		if (inspectTabs[t] || t == views.ToolTabUsage) && !PrincipalOf(c).Can(auth.PermToolInspect) {
			continue
		}
		v.Tabs = append(v.Tabs, views.ToolLink{Key: t, Label: toolTabLabels[t], URL: toolTabURL(it.ID, t, nil), Selected: t == tab})
		if t == views.ToolTabOverview {
			v.Tabs = append(v.Tabs, views.ToolLink{Key: views.ToolTabTest, Label: "Test", URL: testURL(it.ID), Selected: tab == views.ToolTabTest})
		}
	}
	return v
}

// Overview.

var toolHints = []struct{ key, label, yes, no, unset string }{
	{"readOnlyHint", "Read-only", "Yes: it only reads", "No: it may change things", "Not stated (MCP assumes it may change things)"},
	{"destructiveHint", "Destructive", "Yes: it may delete or overwrite", "No: its changes only add", "Not stated (MCP assumes it may delete or overwrite)"},
	{"idempotentHint", "Idempotent", "Yes: repeating a call changes nothing more", "No: repeating a call may change more", "Not stated (MCP assumes repeating may change more)"},
	{"openWorldHint", "Open world", "Yes: it reaches outside systems", "No: it works in a closed domain", "Not stated (MCP assumes it reaches outside systems)"},
}

// toolOverview builds the Overview tab; the validation's findings only when inspect
// (tool.inspect, docs/api.md), as the API keeps them from others.
func (h ToolPageHandler) toolOverview(ctx context.Context, it tools.Item, inspect bool) (*views.ToolOverview, error) {
	o := &views.ToolOverview{Description: it.Description, DefinitionHash: it.DefinitionHash, ConfigVersion: it.ConfigVersion,
		LastUsed: it.LastUsed, UpdatedAt: it.UpdatedAt, Timeout: "The server's timeout"}
	if it.TimeoutMS != nil {
		o.Timeout = msDuration(*it.TimeoutMS)
	}
	o.AnnotationsRisk = string(risk.Decide(risk.Input{Annotations: it.Annotations, Trusted: it.ServerTrusted}).Level)
	if it.Server == registry.BuiltinName {
		o.OperationRisk = builtin.OperationRiskNote(it.Name)
	}
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
	if !inspect {
		o.FindingsHidden = true
		return o, nil
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
