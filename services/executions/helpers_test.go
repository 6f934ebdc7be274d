package executions_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
)

func TestMain(m *testing.M) {
	mcptest.Main()
	dbtest.Main(m)
}

var admin = audit.Actor{Kind: audit.ActorUser, Name: "admin"}

// clock is a controllable Options.Now: the real time moved by an offset.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// env is a database with a running bus, session manager and router, and an execution
// service on them (its runner started only by run).
type env struct {
	t     testing.TB
	app   *apptest.App
	ctx   context.Context
	url   string
	key   secrets.Key
	pool  *pgxpool.Pool
	reg   *registry.Service
	mgr   *mcpclient.Manager
	tools *tools.Service
	r     *router.Router
	svc   *executions.Service
	clock *clock
	admin executions.Caller // an administrator (a real user row)
}

// start builds an env on a fresh database.
func start(t testing.TB) *env {
	t.Helper()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return startOn(t, dbtest.NewURL(t), key)
}

// startOn builds an env on the database at url (the crash test's child shares the
// parent's database and key).
func startOn(t testing.TB, url string, key secrets.Key) *env {
	t.Helper()
	return startApp(t, url, key, false)
}

// startApp is startOn, with the built-in server when builtin.
func startApp(t testing.TB, url string, key secrets.Key, builtin bool) *env {
	t.Helper()
	// The App's own runner is left out: each test starts the runners it needs (run),
	// on services with the test's clock.
	a := apptest.Start(t, &apptest.Options{URL: url, Key: &key, Builtin: builtin, Config: func(c *app.Config) {
		c.MCP = mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond,
			Debounce: 50 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second}
		c.Skip = []string{"executions", "jobs"}
	}})
	e := &env{t: t, app: a, ctx: context.Background(), url: url, key: key, pool: a.Pool, reg: a.Registry, mgr: a.MCP, tools: a.Tools, r: a.Router, clock: &clock{}}
	e.svc = e.service()
	return e
}

// service returns a new execution service on the env (with the env's clock).
func (e *env) service() *executions.Service {
	e.t.Helper()
	keys, err := secrets.NewKeyring(e.key)
	if err != nil {
		e.t.Fatal(err)
	}
	svc, err := executions.New(e.pool, e.r, e.tools, &executions.Options{Now: e.clock.Now, Workers: 4, Keys: keys,
		Local: e.app.Local, Previewer: e.app.Previewer(), Display: e.app.BuiltinDisplay})
	if err != nil {
		e.t.Fatal(err)
	}
	return svc
}

// run starts svc's runner (the env's service when nil) until the test ends.
func (e *env) run(svc *executions.Service) {
	e.t.Helper()
	if svc == nil {
		svc = e.svc
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("runner: %v", err)
		}
	})
}

// user adds a user with role and returns them as a caller (signed in with a session,
// so they count as someone who could approve).
func (e *env) user(name string, role auth.Role) executions.Caller {
	e.t.Helper()
	var id string
	if err := e.pool.QueryRow(e.ctx, `INSERT INTO users (username, role, password_hash, last_login_at) VALUES ($1, $2, 'x', now()) RETURNING id`,
		name, string(role)).Scan(&id); err != nil {
		e.t.Fatalf("add user %s: %v", name, err)
	}
	return executions.Caller{Actor: audit.Actor{Kind: audit.ActorUser, ID: id, Name: name}, Role: role}
}

// token is c acting through one of their API tokens.
func token(c executions.Caller) executions.Caller {
	c.Actor.Kind = audit.ActorToken
	return c
}

// disable disables user c (as an administrator would).
func (e *env) disable(c executions.Caller) {
	e.t.Helper()
	if _, err := e.pool.Exec(e.ctx, `UPDATE users SET disabled_at = now() WHERE id = $1`, c.Actor.ID); err != nil {
		e.t.Fatal(err)
	}
}

// isInvalid reports whether err is bad input (a *verr.Error).
func isInvalid(err error) bool {
	var ve *verr.Error
	return errors.As(err, &ve)
}

// server registers an mcptest server over streamable HTTP, waits for its tools and
// enables the named ones.
func (e *env) server(name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	e.t.Helper()
	hs := e.app.LiveServer(e.t, name, trusted, enable...)
	if e.admin.Actor.ID == "" {
		e.admin = e.user("boss", auth.RoleAdmin)
	}
	return hs
}

// tool returns a tool by qualified name, waiting for discovery to store it.
func (e *env) tool(qualified string) tools.Target {
	e.t.Helper()
	return e.app.Settled(e.t, qualified)
}

func (e *env) enable(qualified string) tools.Target {
	e.t.Helper()
	return e.app.Enable(e.t, qualified)
}

// prepared is how the router sees a tool now (its snapshot follows changes by events).
func (e *env) prepared(qualified, args string) (*router.Prepared, error) {
	return e.r.Prepare(e.ctx, router.Call{Tool: qualified, Arguments: json.RawMessage(args), Actor: audit.System,
		Source: router.SourceExecution})
}

// sampleArgs are valid arguments for the mcptest tools (and the tests' own, which
// take a path).
func sampleArgs(qualified string) string {
	_, name, _ := strings.Cut(qualified, "__")
	switch name {
	case "echo":
		return `{"message":"x"}`
	case "add":
		return `{"a":1,"b":1}`
	case "sleep":
		return `{"ms":1}`
	case "write-note":
		return `{"text":"x"}`
	case "fail":
		return `{}`
	case "file_operations":
		return `{"operation":"list_dir"}`
	}
	return `{"path":"/tmp/x"}`
}

// setRisk makes an administrator set a tool's risk, and waits until the router sees it.
func (e *env) setRisk(qualified string, level risk.Level) {
	e.t.Helper()
	l := string(level)
	e.update(qualified, tools.Patch{Risk: &l, MayLowerRisk: true})
	testkit.WaitFor(e.t, 10*time.Second, func() bool {
		p, err := e.prepared(qualified, sampleArgs(qualified))
		return err == nil && p.Risk.Level == level
	}, "the router never saw "+qualified+" become "+l)
}

// update changes a tool's configuration (bumping its configuration version) and waits
// until the router sees the new version.
func (e *env) update(qualified string, p tools.Patch) tools.Item {
	e.t.Helper()
	tg := e.tool(qualified)
	it, err := e.tools.Update(e.ctx, admin, tg.ID, p)
	if err != nil {
		e.t.Fatalf("update %s: %v", qualified, err)
	}
	if it.ConfigVersion <= tg.ConfigVersion {
		e.t.Fatalf("configuration version of %s: got %d, want more than %d", qualified, it.ConfigVersion, tg.ConfigVersion)
	}
	testkit.WaitFor(e.t, 10*time.Second, func() bool {
		p, err := e.prepared(qualified, sampleArgs(qualified))
		return err == nil && p.ConfigVersion == it.ConfigVersion
	}, "the router never saw the new configuration of "+qualified)
	return it
}

// step is one step of a plan given to Create.
func step(tool, args string) executions.RequestStep {
	return executions.RequestStep{Tool: tool, Arguments: json.RawMessage(args)}
}

// create submits a plan as c.
func (e *env) create(c executions.Caller, steps ...executions.RequestStep) *executions.Execution {
	e.t.Helper()
	ex, err := e.svc.Create(e.ctx, c, executions.Input{Plan: &executions.Request{Steps: steps}})
	if err != nil {
		e.t.Fatalf("create: %v", err)
	}
	return ex
}

func (e *env) get(id string) *executions.Execution {
	e.t.Helper()
	ex, err := executions.Get(e.ctx, e.svc, id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return ex
}

func (e *env) steps(id string) []executions.Step {
	e.t.Helper()
	sts, err := e.svc.Steps(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return sts
}

// waitStatus waits until execution id is in status want.
func (e *env) waitStatus(id string, want executions.Status, d time.Duration) *executions.Execution {
	e.t.Helper()
	var ex *executions.Execution
	testkit.WaitFor(e.t, d, func() bool {
		ex = e.get(id)
		return ex.Status == want
	}, fmt.Sprintf("execution never became %s", want))
	return ex
}

// stepStatuses lists the run steps' states in order.
func stepStatuses(sts []executions.Step) []string {
	var out []string
	for _, st := range sts {
		if st.Phase == executions.PhaseRun {
			out = append(out, st.Status)
		}
	}
	return out
}

// events counts execution id's events of kind on one topic.
func (e *env) events(topic, id, kind string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM events WHERE topic = $1 AND kind = $2 AND payload->>'execution_id' = $3`, topic, kind, id)
}

// bothTopics checks execution id has want events of kind on its own topic and on the
// executions topic.
func (e *env) bothTopics(id, kind string, want int) {
	e.t.Helper()
	for _, topic := range []string{executions.Topic, executions.TopicOf(id)} {
		if n := e.events(topic, id, kind); n != want {
			e.t.Errorf("%s events on %s: got %d, want %d", kind, topic, n, want)
		}
	}
}

// audits counts execution id's audit rows with action.
func (e *env) audits(id, action string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM audit_log WHERE target_type = 'execution' AND target_id = $1 AND action = $2`, id, action)
}

// wantAudits checks how many audit rows of each action execution id has.
func (e *env) wantAudits(id string, want map[string]int) {
	e.t.Helper()
	for _, action := range slices.Sorted(maps.Keys(want)) {
		if n := e.audits(id, action); n != want[action] {
			e.t.Errorf("%s audit rows of execution %s: got %d, want %d", action, id, n, want[action])
		}
	}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	return testkit.Count(e.t, e.pool, sql, args...)
}

func (e *env) flush() {
	e.t.Helper()
	if err := e.r.Flush(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

func isConflict(err error) bool {
	_, ok := executions.ConflictStatus(err)
	return ok
}

func isForbidden(err error) bool { return fault.Is(err, fault.KindForbidden) }

// isCode reports whether err is a fault with code.
func isCode(err error, code string) bool {
	f, ok := fault.As(err)
	return ok && f.Code == code
}

// conflictIn checks err is a conflict that found the execution in want.
func conflictIn(t testing.TB, err error, want executions.Status) {
	t.Helper()
	current, ok := executions.ConflictStatus(err)
	if !ok {
		t.Fatalf("got %v (%T), want a conflict", err, err)
	}
	if current != want {
		t.Errorf("conflict found the execution %s, want %s", current, want)
	}
}

func keyHex(k secrets.Key) string { return k.ID + ":" + hex.EncodeToString(k.Bytes) }
