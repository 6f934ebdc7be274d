package handlers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/views"
)

// A test panel run follows the websocket pattern of an execution's page: its call
// publishes its events (tool.started, tool.output, tool.completed | tool.failed, then
// router.RunEnded) on its own topic, the page's socket subscribes to that topic while
// the running panel is shown, and every event pushes the panel as the run is now: its
// progress, or its result once it ended. The topic is its owner's alone, and the
// socket following it is what keeps the run going (router.Runs.Watch).

const testRunPrefix = "testrun:"

// TestRunTopic is the websocket topic of the test run with call id id, which replica
// holds ("" for none named): a socket on another replica follows it through that one
// (RemoteRuns).
func TestRunTopic(id, replica string) string {
	if replica == "" {
		return testRunPrefix + id
	}
	return testRunPrefix + id + "@" + replica
}

// testRunOf returns the call id of a test run topic and the replica it names.
func testRunOf(topic string) (id, replica string, ok bool) {
	rest, ok := strings.CutPrefix(topic, testRunPrefix)
	id, replica, _ = strings.Cut(rest, "@")
	return id, replica, ok
}

// IsTestRunTopic reports whether topic is a test run's.
func IsTestRunTopic(topic string) bool { return strings.HasPrefix(topic, testRunPrefix) }

// RemoteRuns reaches the test runs another replica holds (app: over the signed
// replica hop), for a page's socket here that follows one.
type RemoteRuns interface {
	// Owner is the owner key (router.OwnerOf) of run id on replica, or an error when
	// that replica does not keep it (or cannot be reached).
	Owner(ctx context.Context, replica, id string) (string, error)
	// Watch tells that replica the run is watched until the returned function is
	// called (router.Runs.Watch).
	Watch(replica, id string) (stop func())
	// Parts is the run's fragment for event eventID as that replica renders it
	// (Live.TestRunFragment); "" when it does not keep the run.
	Parts(ctx context.Context, replica, id string, eventID int64) (string, error)
}

// remote reports whether replica names one other than this one.
func (l Live) remote(replica string) bool {
	return replica != "" && l.Runs != nil && replica != l.Runs.Replica
}

// MayFollow reports whether p may subscribe to topic: a test run's topic only by the
// user who started the run (while it is kept); any other by TopicPermission.
func (l Live) MayFollow(p *auth.Principal, topic string) bool {
	if uid, ok := grants.UserOfTopic(topic); ok {
		// One's own questions only, in a person's session.
		return p != nil && p.User.ID == uid && p.Kind == audit.ActorUser && p.Can(auth.PermCollaborate)
	}
	if uid, ok := grants.GiverOfTopic(topic); ok {
		// The grants one gave (everyone's: grants.Topic, by TopicPermission).
		return p != nil && p.User.ID == uid && p.Can(auth.PermCollaborate)
	}
	if uid, ok := builtin.OwnerOfTopic(topic); ok {
		// One's own terminals (everyone's: builtin.TerminalsTopic).
		return p != nil && p.User.ID == uid && p.Can(auth.PermTerminalView)
	}
	id, replica, ok := testRunOf(topic)
	if !ok {
		return p.Can(TopicPermission(topic))
	}
	if p == nil || l.Runs == nil {
		return false
	}
	if l.remote(replica) {
		// Each check costs the other replica a request: only well-formed ids, and a
		// person's checks bounded as their forwarded polls are.
		if l.RemoteRuns == nil || uuid.Validate(id) != nil || uuid.Validate(replica) != nil ||
			l.RunHops != nil && !l.RunHops.Allow(p.User.ID) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		owner, err := l.RemoteRuns.Owner(ctx, replica, id)
		return err == nil && owner == router.OwnerOf(router.Call{Actor: p.Actor("", "")})
	}
	run, ok := l.Runs.Lookup(id)
	// The topic as its events are published: a page of an older release may name the
	// run without its replica, and would wait for events that never come.
	return ok && run.Topic == topic && run.Owner() == router.OwnerOf(router.Call{Actor: p.Actor("", "")})
}

// Watch tells what topic names that a socket follows it, until the returned function
// is called: a test run is not abandoned while its page's socket follows it.
func (l Live) Watch(topic string) (stop func()) {
	id, replica, ok := testRunOf(topic)
	if !ok || l.Runs == nil {
		return func() {}
	}
	if l.remote(replica) {
		if l.RemoteRuns == nil {
			return func() {}
		}
		return l.RemoteRuns.Watch(replica, id)
	}
	return l.Runs.Watch(id)
}

// testRunParts renders an event of a test run's topic: the panel's progress while the
// run goes on, its result (from the run in memory, as the page's own answers) once it
// ended. Each event's fragment shows the run as it was when the event was first
// rendered (once, for every socket), so in event order nothing goes back; the result
// replaces only that run's running panel (views.LiveTestResult).
func (l Live) testRunParts(ctx context.Context, id, replica string, ev events.Event) ([]templ.Component, error) {
	if l.Runs == nil {
		return nil, nil
	}
	if l.remote(replica) {
		// Rendered where the run is, as it is there now.
		if l.RemoteRuns == nil {
			return nil, nil
		}
		html, err := l.RemoteRuns.Parts(ctx, replica, id, ev.ID)
		if err != nil || html == "" {
			// Not kept there, gone with its replica, or not answered: the page is told
			// the socket does not follow the run, and asks (its polls reach the
			// replica, or say the run is over).
			return []templ.Component{views.LiveRefused(ev.Topic)}, nil
		}
		return []templ.Component{templ.Raw(html)}, nil
	}
	run, ok := l.Runs.Lookup(id)
	if !ok {
		return nil, nil // not kept: the page finds out when it asks (app.js, after a reconnect)
	}
	res := runResult(run.ToolID, run, ev.ID)
	if res.Running {
		return []templ.Component{views.LiveTestProgress(res)}, nil
	}
	it, err := l.Tools.Get(ctx, run.ToolID)
	if errors.Is(err, tools.ErrNotFound) {
		return []templ.Component{views.LiveTestResult(res, views.TestRunButton{CannotRun: "This tool no longer exists."})}, nil
	}
	if err != nil {
		return nil, err
	}
	var b views.TestRunButton
	b.CanRun, b.CannotRun, err = mayRunAs(ctx, l.Router, &auth.Principal{User: auth.User{Role: run.Role}}, run.Actor, it)
	if err != nil {
		return nil, err
	}
	return []templ.Component{views.LiveTestResult(res, b)}, nil
}

// TestRunFragment is the fragment of event eventID of run id, which this replica holds,
// as a page's socket gets it ("" when the run is not kept): what another replica's
// socket that follows the run sends (RemoteRuns.Parts).
func (l Live) TestRunFragment(ctx context.Context, id string, eventID int64) (string, error) {
	parts, err := l.testRunParts(ctx, id, "", events.Event{ID: eventID})
	if err != nil || len(parts) == 0 {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if err := p.Render(ctx, &b); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// PersonLimits keeps a rate limit per person, created on first use: 10 a second, in
// bursts of 20.
type PersonLimits struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// Allow reports whether the person with id may have one more now.
func (l *PersonLimits) Allow(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[id]
	if lim == nil {
		if l.m == nil || len(l.m) >= 100_000 {
			l.m = map[string]*rate.Limiter{} // bounded; a forgotten person starts with a full burst
		}
		lim = rate.NewLimiter(10, 20)
		l.m[id] = lim
	}
	return lim.Allow()
}
