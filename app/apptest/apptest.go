// Package apptest starts the same App as `toolwarden serve`, on a fresh test
// database, with settings that make tests quick (short reconnect backoff), and gives
// tests fixture builders for users, tokens, servers and tools.
package apptest

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/internal/gctune"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// AdminPassword is the password of the bootstrap user "admin".
const AdminPassword = "admin-password-for-tests"

// AppRoleEnv, set to 0, starts every test App as the database's owner instead of the
// application's role (Options.Owner), to tell a failure the role causes from another.
// Unset, or any other value, test Apps connect as the role, as serve does: the suite
// then fails at any statement of the product the role may not run.
const AppRoleEnv = "TOOLWARDEN_TEST_APP_ROLE"

// Options tune Start.
type Options struct {
	// URL is the database to use (a test's second server on the first one's database);
	// empty: a fresh one.
	URL string
	// Key is the secret key (a second server must share the first one's); nil: a new one.
	Key *secrets.Key
	// Config changes the configuration before the App is built (after the test defaults).
	Config func(*app.Config)
	// NoStart builds the App without starting it (the test starts it, or drives parts).
	NoStart bool
	// AppRole connects the App as the application's database role (db.AppRole) even
	// when AppRoleEnv=0 says the owner: for tests of what the role may and may not do.
	// Without it, the App connects as the role too, unless Owner or AppRoleEnv=0.
	AppRole bool
	// Owner connects the App as the tables' owner, not as the application's role serve
	// uses: for a test of the product run so. A test's own tampering goes through
	// App.Owner instead, with the App as the role.
	Owner bool
	// Builtin adds the built-in server (services/builtin, workspaces in a temporary
	// directory), as serve always does. Off by default: most tests count the servers
	// they register and the tools they enable.
	Builtin bool
}

// App is a test server: the App and what a test needs around it.
type App struct {
	*app.App
	T testing.TB
	// DBURL is the App's database as its owner (for a second server on it, or a
	// connection of the test's own as the owner).
	DBURL string
	// Owner is a pool on the database as its owner, closed when the test ends: for a
	// test's setup that tampers as a superuser would, which the App's role may not do
	// (CREATE FUNCTION or TRIGGER, ALTER TABLE, UPDATE or DELETE on the append-only
	// tables). Reads and what the product itself does go through App.Pool. It connects
	// on first use; when the App connects as the owner (Options.Owner), it is App.Pool.
	Owner *pgxpool.Pool
	Key   secrets.Key
	// Logs holds everything the server logged, so tests can check what never appears in logs.
	Logs *testkit.SyncBuffer
}

// DefaultMCP are the session manager's settings in tests: quick reconnects and
// debounce, a breaker that opens after the default failures and cools down in 2 s.
func DefaultMCP() mcpclient.Options {
	return mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Debounce: 100 * time.Millisecond, BreakerCooldown: 2 * time.Second}
}

// Start builds and starts an App until the test ends. Its users: admin/AdminPassword.
func Start(t testing.TB, opts *Options) *App {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	gctune.Start(os.Getenv) // as serve does, so benchmarks measure what runs
	url := opts.URL
	if url == "" {
		url = dbtest.NewURL(t)
	}
	if opts.AppRole && opts.Owner {
		t.Fatal("apptest: Options.AppRole and Options.Owner both set")
	}
	// As serve: the application's role, so that the suite fails at any statement the
	// role may not run.
	asOwner := opts.Owner || !opts.AppRole && os.Getenv(AppRoleEnv) == "0"
	poolURL := url
	if !asOwner {
		poolURL = dbtest.AppURL(t, url)
	}
	pool, err := db.NewPool(context.Background(), poolURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	owner := pool
	if !asOwner {
		owner = ownerPool(t, url)
	}
	var key secrets.Key
	if opts.Key != nil {
		key = *opts.Key
	} else if key, err = secrets.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	cfg := app.Config{Pool: pool, Keys: keys, Version: "test", AdminPassword: AdminPassword,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MCP:    DefaultMCP()}
	if opts.Builtin {
		cfg.BuiltinRoot = t.TempDir()
		// The terminals' login shells read their own home, not the host's: a login
		// file there (a pyenv rehash, slow, or stuck behind the lock a killed shell
		// left) would make every test's terminal wait on it.
		cfg.TerminalEnv = []string{"HOME=" + t.TempDir()}
	}
	if opts.Config != nil {
		opts.Config(&cfg)
	}
	cfg.MCP.InheritEnv = mcpclient.InheritedEnv(os.LookupEnv)
	// Confined as users' servers are, away from this test process's database.
	cfg.MCP.Confine.Hide = append(cfg.MCP.Confine.Hide, dbtest.ClusterDir(t))
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	testkit.LogOnFailure(t, logs) // before the stop's own warnings
	if !opts.NoStart {
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return &App{App: a, T: t, DBURL: url, Owner: owner, Key: key, Logs: logs}
}

// ownerPool is a pool on url as the owner it names, closed when the test ends. Unlike
// db.NewPool it does not connect until used: most tests never tamper, and an idle
// connection for each of their Apps would count against the cluster's limit.
func ownerPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "toolwarden test owner"
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// CreateUser adds a user with the given role and password.
func (a *App) CreateUser(t testing.TB, username string, role auth.Role, password string) auth.User {
	t.Helper()
	u, _, err := a.Auth.CreateUser(context.Background(), audit.System, auth.NewUser{Username: username, Role: role, Password: password})
	if err != nil {
		t.Fatalf("create user %s: %v", username, err)
	}
	return u
}

// Token issues an API token for the user named username.
func (a *App) Token(t testing.TB, username string) string {
	t.Helper()
	ctx := context.Background()
	u, err := a.Auth.GetUserByName(ctx, username)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := a.Auth.CreateToken(ctx, audit.System, u.ID, auth.NewToken{Name: "test-" + rand.Text()[:8]})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// RegisterServer registers spec, connects it and enables the named tools once
// validated. It returns the server.
func (a *App) RegisterServer(t testing.TB, spec registry.Spec, enable ...string) registry.Server {
	t.Helper()
	ctx := context.Background()
	sv, err := a.Registry.CreateServer(ctx, audit.System, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range enable {
		a.Enable(t, toolname.Join(spec.Name, n))
	}
	return sv
}

// LiveServer starts the in-repo MCP test server over streamable HTTP, registers it as
// name and enables the named tools.
func (a *App) LiveServer(t testing.TB, name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	t.Helper()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
	a.RegisterServer(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: trusted}, enable...)
	return hs
}

// Settled waits (up to 30 s) until the tool with the qualified name is discovered and
// its validation has ended (validated, or a state it was left in), and returns it.
func (a *App) Settled(t testing.TB, qualified string) tools.Target {
	t.Helper()
	var tg tools.Target
	testkit.WaitFor(t, 30*time.Second, func() bool {
		var err error
		tg, err = a.Tools.Target(context.Background(), qualified)
		return err == nil && tg.Status != "discovered" && tg.Status != "validating"
	}, "tool "+qualified+" never validated")
	return tg
}

// Enable waits for the tool to settle and enables it (overriding validation's
// objections, as an administrator may).
func (a *App) Enable(t testing.TB, qualified string) tools.Target {
	t.Helper()
	tg := a.Settled(t, qualified)
	outs, err := a.Tools.SetEnabled(context.Background(), audit.System, []string{tg.ID}, true, "test", true)
	if err != nil || outs[0].Err() != nil {
		t.Fatalf("enable %s: %v %v", qualified, err, outs)
	}
	return a.Settled(t, qualified)
}

// SetRisk overrides the tool's risk level (as an administrator may, lower included).
// The router forgets the tool's old configuration before Update returns (the bus's
// Local delivers the change first), so the next call sees the new level.
func (a *App) SetRisk(t testing.TB, qualified string, level risk.Level) {
	t.Helper()
	l := string(level)
	if _, err := a.Tools.Update(context.Background(), audit.System, a.ToolID(t, qualified),
		tools.Patch{Risk: &l, MayLowerRisk: true}); err != nil {
		t.Fatalf("set the risk of %s: %v", qualified, err)
	}
}

// ToolID is the id of the tool with the qualified name given.
func (a *App) ToolID(t testing.TB, qualified string) string {
	t.Helper()
	// A server registered a moment ago may still be discovering its tools.
	var tg tools.Target
	var err error
	testkit.WaitFor(t, 30*time.Second, func() bool {
		tg, err = a.Tools.Target(context.Background(), qualified)
		return !errors.Is(err, tools.ErrNotFound)
	}, "tool "+qualified+" was never discovered")
	if err != nil {
		t.Fatal(err)
	}
	return tg.ID
}

// Count runs a query that returns one number on the App's database.
func (a *App) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	return testkit.Count(t, a.Pool, sql, args...)
}
