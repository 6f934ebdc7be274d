package handlers

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/system"
	"github.com/toolwarden/toolwarden/views"
)

// DashboardHandler serves the home page.
type DashboardHandler struct {
	*Shell
	Auth      *auth.Service
	AuditLog  *audit.Log
	Registry  *registry.Service
	System    *system.Service
	Replicas  *replicas.Service
	StartedAt time.Time
	// LiveClients counts open websocket connections.
	LiveClients func() int
}

// Show renders the dashboard.
func (h DashboardHandler) Show(c echo.Context) error {
	ctx := c.Request().Context()
	p := PrincipalOf(c)
	// The cursor is read before the data, so an event that lands in between is replayed
	// rather than lost.
	last, err := h.Events.LatestID(ctx)
	if err != nil {
		return err
	}
	page := views.DashboardPage{Layout: h.layout(c, "Dashboard", auth.SessionsTopic, audit.Topic)}
	page.Live.LastEventID = last
	page.Status = h.status(c)
	// "Signed in now" names people and their roles, and its live updates are the
	// sessions topic's: it is shown, and read, only for those who may follow that topic
	// (TopicPermission), and the page leaves it out for everyone else, count included:
	// a count could not stay current without the names' topic.
	if p.Can(TopicPermission(auth.SessionsTopic)) {
		active, err := h.Auth.ActiveUsers(ctx)
		if err != nil {
			return err
		}
		page.SignedIn = signedInRows(active)
	}
	if p.Can(auth.PermAuditView) {
		page.ShowActivity = true
		recs, err := h.AuditLog.Recent(ctx, views.ActivityKeep)
		if err != nil {
			return err
		}
		for _, r := range recs {
			page.Activity = append(page.Activity, activityRow(r.Summary()))
		}
	}
	return render(c, http.StatusOK, views.Dashboard(page))
}

func (h DashboardHandler) status(c echo.Context) views.SystemStatus {
	ctx := c.Request().Context()
	p := PrincipalOf(c)
	st := views.SystemStatus{Version: h.Version, StartedAt: h.StartedAt, Uptime: humanDuration(time.Since(h.StartedAt)),
		// Versions and host names help whoever looks for a known flaw: for those who run
		// Toolwarden or audit it, not guests and tool users.
		Internals:   p.Can(auth.PermSettings) || p.Can(auth.PermAuditView),
		ShowServers: p.Can(auth.PermServerView)}
	if st.Internals {
		st.GoVersion = runtime.Version()
	}
	if v, err := h.System.ServerVersion(ctx); err == nil {
		st.DatabaseOK = true
		kind := "external"
		if h.System.Embedded() {
			kind = "embedded"
		}
		st.DatabaseDetail = kind
		if st.Internals {
			st.DatabaseDetail = fmt.Sprintf("PostgreSQL %s · %s", v, kind)
		}
	} else {
		// The driver's words name the database's user, host and address: for those who
		// run Toolwarden, not every role; everyone else reads that it cannot be reached.
		st.DatabaseDetail = "unreachable"
		if p.Can(auth.PermSettings) {
			st.DatabaseDetail = err.Error()
		}
	}
	if m, err := h.System.Migration(ctx); err == nil {
		st.MigrationOK = m.Current()
		st.Migration = fmt.Sprintf("version %d of %d", m.Version, m.Latest)
		if m.Dirty {
			st.Migration += " (dirty)"
		}
	}
	// A count that cannot be read is shown as unknown, not as 0: "Audit entries 0" would
	// say the log was emptied.
	var err error
	st.Users, st.ActiveUsers, err = h.Auth.CountUsers(ctx)
	st.UsersUnknown = err != nil
	st.Tokens, err = h.Auth.CountTokens(ctx)
	st.TokensUnknown = err != nil
	// The chain numbers its entries 1, 2, 3…: the newest one's id is the count, read from
	// the primary key where count(*) would scan a log of millions on every visit.
	st.AuditEntries, err = h.AuditLog.HeadID(ctx)
	st.AuditUnknown = err != nil
	if h.Registry != nil && st.ShowServers {
		counts, err := h.Registry.CountServers(ctx)
		st.ServersUnknown = err != nil
		for status, n := range counts {
			st.Servers += n
			if status == registry.StatusConnected {
				st.ServersConnected = n
			}
		}
	}
	if h.LiveClients != nil {
		st.LiveClients = h.LiveClients()
	}
	if h.Replicas != nil && st.Internals {
		st.Replica = h.Replicas.Name()
		if live, err := h.Replicas.Live(ctx); err == nil {
			for _, r := range live {
				st.Replicas = append(st.Replicas, views.ReplicaRow{Name: r.Name, Version: r.Version, Host: r.Host,
					StartedAt: r.StartedAt, SeenAt: r.SeenAt, Self: r.Self, Leaving: r.Leaving})
			}
		}
	}
	return st
}

func signedInRows(active []auth.ActiveUser) []views.SignedInUser {
	out := make([]views.SignedInUser, len(active))
	for i, a := range active {
		name := a.DisplayName
		if name == "" {
			name = a.Username
		}
		out[i] = views.SignedInUser{Username: a.Username, Name: name, RoleLabel: a.Role.Label(), Sessions: a.Sessions, LastSeen: a.LastSeenAt}
	}
	return out
}

func activityRow(s audit.Summary) views.ActivityRow {
	target, name := s.TargetType, s.TargetName
	if name == "" {
		name = s.TargetID
	}
	if name != "" {
		target += " " + name
	}
	actor := s.ActorName
	if actor == "" {
		actor = s.ActorKind
	}
	return views.ActivityRow{ID: s.ID, At: s.At, Actor: actor, Action: s.Action, Target: target,
		Failed: strings.HasSuffix(s.Action, "_failed")}
}

func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
