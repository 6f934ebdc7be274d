// Package webtest starts a complete Toolwarden web server on a fresh test database, for
// tests that drive it over HTTP, websockets or a real browser.
package webtest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/gctune"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
)

// AdminPassword is the password of the bootstrap user "admin".
const AdminPassword = "admin-password-for-tests"

// Server is a running test server.
type Server struct {
	*httptest.Server
	Pool     *pgxpool.Pool
	Auth     *auth.Service
	Bus      *events.Bus
	Web      *web.Server
	Keys     *secrets.Keyring
	Registry *registry.Service
	MCP      *mcpclient.Manager
	Tools    *tools.Service
	Router   *router.Router
	// Executions runs plans; its runner works while the server runs.
	Executions *executions.Service
	// Logs holds everything the server logged, so tests can check what never appears in logs.
	Logs *SyncBuffer
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Options tune Start.
type Options struct {
	Auth *auth.Options
	// MCP tunes the session manager; nil uses fast settings for tests (short backoff).
	MCP *mcpclient.Options
	// Router tunes the router; nil uses the defaults.
	Router *router.Options
	// Executions tunes the execution service (planner, clock); nil uses the defaults.
	Executions *executions.Options
}

// Start runs a server until the test ends. Its users: admin/AdminPassword.
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	gctune.Start(os.Getenv) // as serve does, so benchmarks measure what runs
	pool := dbtest.New(t)
	logs := &SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ao := opts.Auth
	if ao == nil {
		ao = &auth.Options{}
	}
	ao.Logger = log
	a := auth.New(pool, ao)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := a.Bootstrap(ctx, AdminPassword); err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(pool, &events.BusOptions{Logger: log})
	a.Follow(bus)
	done := make(chan struct{})
	go func() { _ = bus.Run(ctx); close(done) }()
	select {
	case <-bus.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("event bus not ready")
	}
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(pool, keys, &registry.Options{Logger: log})
	mo := opts.MCP
	if mo == nil {
		mo = &mcpclient.Options{BackoffInitial: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
			Debounce: 100 * time.Millisecond, BreakerCooldown: 2 * time.Second}
	}
	mo.Logger, mo.Bus, mo.InheritEnv = log, bus, mcpclient.InheritedEnv(os.LookupEnv)
	// Confined as users' servers are, away from this test process's database.
	mo.Confine.Hide = append(mo.Confine.Hide, dbtest.ClusterDir(t))
	mgr := mcpclient.New(reg, mo)
	mcpDone := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(mcpDone) }()
	ts := tools.New(pool, keys, log)
	ro := opts.Router
	if ro == nil {
		ro = &router.Options{}
	}
	ro.Logger, ro.Bus = log, bus
	rt := router.New(pool, ts, mgr, ro)
	rtDone := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(rtDone) }()
	eo := opts.Executions
	if eo == nil {
		eo = &executions.Options{}
	}
	eo.Logger = log
	ex, err := executions.New(pool, rt, ts, eo)
	if err != nil {
		t.Fatal(err)
	}
	// The runner stops before the router, as in serve.
	exCtx, exCancel := context.WithCancel(context.Background())
	exDone := make(chan struct{})
	go func() { _ = ex.Run(exCtx); close(exDone) }()
	deps := &handlers.Deps{Pool: pool, Auth: a, Logger: log, Version: "test", StartedAt: time.Now(), Registry: reg, MCP: mgr,
		Tools: ts, Router: rt, Runs: router.NewRuns(rt), Executions: ex}
	w := web.New(deps, bus)
	hs := httptest.NewServer(w)
	t.Cleanup(func() {
		w.Shutdown()
		hs.Close()
		exCancel()
		<-exDone
		cancel()
		<-rtDone
		<-mcpDone
		<-done
	})
	return &Server{Server: hs, Pool: pool, Auth: a, Bus: bus, Web: w, Keys: keys, Registry: reg, MCP: mgr, Tools: deps.Tools, Router: rt,
		Executions: ex, Logs: logs}
}

// CreateUser adds a user with the given role and password.
func (s *Server) CreateUser(t testing.TB, username string, role auth.Role, password string) auth.User {
	t.Helper()
	u, _, err := s.Auth.CreateUser(context.Background(), audit.System, auth.NewUser{Username: username, Role: role, Password: password})
	if err != nil {
		t.Fatalf("create user %s: %v", username, err)
	}
	return u
}

// Client is an HTTP client with a cookie jar that does not follow redirects.
func (s *Server) Client(t testing.TB) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Login signs in through the login form and returns a client holding the session.
func (s *Server) Login(t testing.TB, username, password string) *http.Client {
	t.Helper()
	c := s.Client(t)
	res := s.PostForm(t, c, "/login", url.Values{"username": {username}, "password": {password}})
	defer res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("login as %s: got status %d, want 303: %s", username, res.StatusCode, body)
	}
	return c
}

// PostForm posts a same-origin form (as a browser on this site would).
func (s *Server) PostForm(t testing.TB, c *http.Client, path string, form url.Values) *http.Response {
	t.Helper()
	return s.PostFormHeaders(t, c, path, form, nil)
}

// PostFormHeaders is PostForm with extra request headers (HX-Request, as htmx sends).
func (s *Server) PostFormHeaders(t testing.TB, c *http.Client, path string, form url.Values, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Get fetches path with c.
func (s *Server) Get(t testing.TB, c *http.Client, path string) *http.Response {
	t.Helper()
	res, err := c.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
