package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/template"
	"github.com/toolwarden/toolwarden/views"
)

// Show renders the server detail page.
func (h ServersHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	s, err := h.Registry.GetServer(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	v := views.ServerPage{Layout: h.layout(c, s.Name, registry.ServersTopic), Server: serverCard(s),
		IsStdio: s.Type == registry.TypeStdio}
	v.Live.LastEventID = last
	v.Info = serverInfo(s)
	snap := h.MCP.Snapshot(s.ID)
	v.Conn = serverConnection(h.MCP, snap, h.Router, s)
	v.Stderr = snap.Stderr
	if v.Health, err = serverHealth(ctx, h.Registry, s); err != nil {
		return err
	}
	if v.Tools, v.ToolTotal, v.Runs, err = serverToolsAndRuns(ctx, h.Registry, s.ID); err != nil {
		return err
	}
	for _, r := range s.Resources {
		v.Resources = append(v.Resources, views.KV{Key: r.URI, Value: firstNonEmpty(r.Title, r.Name, r.Description)})
	}
	for _, pr := range s.Prompts {
		v.Prompts = append(v.Prompts, views.KV{Key: pr.Name, Value: firstNonEmpty(pr.Description, pr.Title)})
	}
	waiting, err := h.waitingOn(c, s.ID)
	if err != nil {
		return err
	}
	v.Server.Waiting = waiting[s.ID]
	return render(c, http.StatusOK, views.Server(v))
}

// serverConnection is the Connection panel of s's page: the page and the live updates
// (live.go) both render it, from what this replica's session manager (snap, its
// snapshot of s) and router hold.
func serverConnection(mgr *mcpclient.Manager, snap mcpclient.Snapshot, rt *router.Router, s registry.Server) views.ServerConnection {
	v := views.ServerConnection{ServerID: s.ID, KVs: connectionKVs(s), Template: s.Template, BreakerOpen: snap.BreakerOpen}
	if runsCommands(s) {
		v.Confinement = mgr.Confinement()
	}
	if !snap.NextAttempt.IsZero() {
		v.NextAttempt = &snap.NextAttempt
	}
	if rt != nil {
		b := circuitOf(rt, s)
		v.Circuit = views.CircuitView{State: b.State, Since: b.Since, Failures: b.Failures}
		if !b.Until.IsZero() {
			v.Circuit.Until = &b.Until
		}
	}
	return v
}

// serverHealth is the health panel of s's page: its last 20 checks.
func serverHealth(ctx context.Context, reg *registry.Service, s registry.Server) (views.ServerHealth, error) {
	v := views.ServerHealth{ServerID: s.ID}
	health, err := reg.HealthHistory(ctx, s.ID, 20)
	if err != nil {
		return v, err
	}
	okCount := 0
	for _, hc := range health {
		v.Rows = append(v.Rows, views.HealthRow{At: hc.CheckedAt, OK: hc.OK, LatencyMS: hc.LatencyMS, Error: deref(hc.Error)})
		if hc.OK {
			okCount++
		}
	}
	if len(health) > 0 {
		v.Summary = fmt.Sprintf("%d of the last %d checks passed; one every %s.", okCount, len(health), msDuration(s.HealthIntervalMS))
	} else {
		v.Summary = "One check every " + msDuration(s.HealthIntervalMS) + " while connected."
	}
	return v, nil
}

// circuitOf is s's call circuit. One no call has touched is closed since the router
// started, or since s was registered when that came later.
func circuitOf(r *router.Router, s registry.Server) router.BreakerState {
	b := r.Breaker(s.ID)
	if b.Failures == 0 && b.State == router.CircuitClosed && b.Since.Before(s.CreatedAt) {
		b.Since = s.CreatedAt
	}
	return b
}

// serverInfo is what s said about itself at its last connection.
func serverInfo(s registry.Server) views.ServerInfo {
	si := views.ServerInfo{ServerID: s.ID}
	if s.Info.Name != "" || s.Info.ProtocolVersion != "" {
		si.Info = []views.KV{{Key: "Name", Value: firstNonEmpty(s.Info.Title, s.Info.Name)}, {Key: "Version", Value: s.Info.Version},
			{Key: "Protocol", Value: s.Info.ProtocolVersion}, {Key: "Last connected", Value: stampOf(s.LastConnected)}}
		si.Capabilities = capabilityNames(s.Info.Capabilities)
		si.Instructions = s.Info.Instructions
	}
	return si
}

func connectionKVs(s registry.Server) []views.KV {
	var kv []views.KV
	switch s.Type {
	case registry.TypeTemplate:
		kv = append(kv, views.KV{Key: "Template", Value: fmt.Sprintf("%d tools defined in YAML (below)", len(template.ToolNames(s.Template)))})
	case registry.TypeStdio:
		kv = append(kv, views.KV{Key: "Command", Value: s.Command})
		if len(s.Args) > 0 {
			kv = append(kv, views.KV{Key: "Arguments", Value: strings.Join(s.Args, " ")})
		}
		if s.WorkingDir != "" {
			kv = append(kv, views.KV{Key: "Working directory", Value: s.WorkingDir})
		}
		if len(s.EnvNames) > 0 {
			kv = append(kv, views.KV{Key: "Environment", Value: strings.Join(s.EnvNames, ", ") + " (values encrypted)"})
		}
	default:
		kv = append(kv, views.KV{Key: "URL", Value: s.URL})
		if len(s.HeaderNames) > 0 {
			kv = append(kv, views.KV{Key: "Headers", Value: strings.Join(s.HeaderNames, ", ") + " (values encrypted)"})
		}
		switch s.AuthType {
		case registry.AuthBearer:
			kv = append(kv, views.KV{Key: "Authentication", Value: "Bearer token (configured)"})
		case registry.AuthHeader:
			kv = append(kv, views.KV{Key: "Authentication", Value: s.AuthHeader + " header (configured)"})
		}
	}
	kv = append(kv, views.KV{Key: "Timeout", Value: msDuration(s.TimeoutMS)}, views.KV{Key: "Retries", Value: strconv.Itoa(s.Retries)},
		views.KV{Key: "Health check", Value: "every " + msDuration(s.HealthIntervalMS)},
		views.KV{Key: "Auto-enable", Value: onOff(s.AutoEnable)})
	return kv
}

// onOff spells a policy switch.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func msDuration(ms int) string {
	switch {
	case ms%60_000 == 0:
		return fmt.Sprintf("%d min", ms/60_000)
	case ms%1000 == 0:
		return fmt.Sprintf("%d s", ms/1000)
	}
	return fmt.Sprintf("%d ms", ms)
}

func capabilityNames(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var out []string
	for k, v := range m {
		var sub map[string]any
		_ = json.Unmarshal(v, &sub)
		name := k
		if sub["listChanged"] == true {
			name += " (list changes)"
		}
		if sub["subscribe"] == true {
			name += " (subscribe)"
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// serverToolsAndRuns loads the tool table (its first maxLiveServerTools rows, as the live
// fragment bounds it, and how many tools there are) and the latest discovery runs of a
// server, for the detail page.
func serverToolsAndRuns(ctx context.Context, reg *registry.Service, id string) ([]views.ToolRow, int, []views.RunRow, error) {
	page, err := reg.ServerToolsPage(ctx, id, maxLiveServerTools, "")
	if err != nil {
		return nil, 0, nil, err
	}
	runs, err := serverRuns(ctx, reg, id)
	if err != nil {
		return nil, 0, nil, err
	}
	return toolRows(page.Tools), page.Total, runs, nil
}

// toolRows are the rows of a server's tool table.
func toolRows(tools []registry.Tool) []views.ToolRow {
	var tr []views.ToolRow
	for _, t := range tools {
		var ann struct {
			ReadOnly    bool  `json:"readOnlyHint"`
			Destructive *bool `json:"destructiveHint"`
		}
		_ = json.Unmarshal(t.Annotations, &ann)
		tr = append(tr, views.ToolRow{ID: t.ID, Name: t.Name, Title: t.Title, Description: t.Description, Status: t.Status,
			Version: t.Version(), Available: t.Available, ReadOnly: ann.ReadOnly,
			Destructive: !ann.ReadOnly && ann.Destructive != nil && *ann.Destructive})
	}
	return tr
}

// serverRuns are the latest discovery runs of a server.
func serverRuns(ctx context.Context, reg *registry.Service, id string) ([]views.RunRow, error) {
	runs, err := reg.DiscoveryRuns(ctx, id, 10)
	if err != nil {
		return nil, err
	}
	var rr []views.RunRow
	for _, r := range runs {
		rr = append(rr, views.RunRow{ID: r.ID, Trigger: r.Trigger, Actor: r.Actor, OK: r.Status == "succeeded", Error: deref(r.Error),
			Added: r.Added, Updated: r.Updated, Unchanged: r.Unchanged, Removed: r.Removed, Pages: r.Pages,
			DurationMS: float64(r.Duration().Microseconds()) / 1000, At: r.FinishedAt, LeftOut: r.LeftOut, LeftOutNames: r.LeftOutNames})
	}
	return rr, nil
}

func stampOf(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
