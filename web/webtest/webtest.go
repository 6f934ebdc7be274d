// Package webtest starts a complete Toolwarden web server on a fresh test database, for
// tests that drive it over HTTP, websockets or a real browser.
package webtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/gctune"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/decide"
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
	// TrustedProxies are the proxies whose X-Forwarded-For is believed (--trusted-proxy).
	TrustedProxies []netip.Prefix
	// Denials tunes how refused requests are recorded; nil uses the defaults.
	Denials *audit.DenialOptions
}

func denialOpts(o *audit.DenialOptions, log *slog.Logger) *audit.DenialOptions {
	out := audit.DenialOptions{}
	if o != nil {
		out = *o
	}
	out.Logger = log
	return &out
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
	dec := decide.New(pool, a)
	ro.Logger, ro.Bus, ro.Decide = log, bus, dec
	rt := router.New(pool, ts, mgr, ro)
	rtDone := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(rtDone) }()
	eo := opts.Executions
	if eo == nil {
		eo = &executions.Options{}
	}
	eo.Logger, eo.Auth, eo.Decide, eo.Keys = log, a, dec, keys
	ex, err := executions.New(pool, rt, ts, eo)
	if err != nil {
		t.Fatal(err)
	}
	// The runner stops before the router, as in serve.
	exCtx, exCancel := context.WithCancel(context.Background())
	exDone := make(chan struct{})
	go func() { _ = ex.Run(exCtx); close(exDone) }()
	deps := &handlers.Deps{Pool: pool, Auth: a, Logger: log, Version: "test", StartedAt: time.Now(), Registry: reg, MCP: mgr,
		Tools: ts, Router: rt, Runs: router.NewRuns(rt), Executions: ex, Decide: dec,
		Denials: audit.NewDenials(pool, denialOpts(opts.Denials, log)), TrustedProxies: opts.TrustedProxies}
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

// WaitFor polls cond every 20 ms until it holds, failing the test with msg when it
// does not within the time given.
func WaitFor(t testing.TB, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RegisterServer registers spec, connects it and enables the named tools once validated.
func (s *Server) RegisterServer(t testing.TB, spec registry.Spec, enable ...string) {
	t.Helper()
	ctx := context.Background()
	sv, err := s.Registry.CreateServer(ctx, audit.System, spec)
	if err != nil {
		t.Fatal(err)
	}
	s.MCP.Refresh(ctx, sv.ID)
	for _, n := range enable {
		var id string
		deadline := time.Now().Add(30 * time.Second)
		for {
			tg, err := s.Tools.Target(ctx, spec.Name+"__"+n)
			if err == nil && tg.Status == "validated" {
				id = tg.ID
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tool %s__%s never validated", spec.Name, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		outs, err := s.Tools.SetEnabled(ctx, audit.System, []string{id}, true, "test", false)
		if err != nil || outs[0].Err() != nil {
			t.Fatalf("enable %s: %v %v", n, err, outs)
		}
	}
}

// LiveServer starts the in-repo MCP test server over streamable HTTP, registers it as
// name and enables the named tools.
func (s *Server) LiveServer(t testing.TB, name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	t.Helper()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: name})
	s.RegisterServer(t, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: trusted}, enable...)
	return hs
}

// Token issues an API token for the user named username.
func (s *Server) Token(t testing.TB, username string) string {
	t.Helper()
	ctx := context.Background()
	u, err := s.Auth.GetUserByName(ctx, username)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := s.Auth.CreateToken(ctx, audit.System, u.ID, auth.NewToken{Name: "test-" + rand.Text()[:8]})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ToolID is the id of the tool with the qualified name given.
func (s *Server) ToolID(t testing.TB, qualified string) string {
	t.Helper()
	tg, err := s.Tools.Target(context.Background(), qualified)
	if err != nil {
		t.Fatal(err)
	}
	return tg.ID
}

// API sends JSON API requests as one caller: a session (C) or an API token (Bearer).
type API struct {
	T      testing.TB
	Srv    *Server
	C      *http.Client // nil: no session
	Bearer string       // "": no token
}

// Do sends body (nil: none; a string: as is; anything else: JSON-encoded) and returns
// the status and the response body.
func (a API) Do(method, path string, body any) (int, []byte) {
	a.T.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			a.T.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.Srv.URL+path, r)
	if err != nil {
		a.T.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+a.Bearer)
	}
	c := a.C
	if c == nil {
		c = a.Srv.Client(a.T)
	}
	res, err := c.Do(req)
	if err != nil {
		a.T.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		a.T.Fatal(err)
	}
	return res.StatusCode, out
}

// JSON sends a request, checks the status and decodes the answer into out (when not nil).
func (a API) JSON(method, path string, body any, want int, out any) {
	a.T.Helper()
	status, raw := a.Do(method, path, body)
	if status != want {
		a.T.Fatalf("%s %s: got %d %s, want %d", method, path, status, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.T.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}
