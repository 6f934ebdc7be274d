// Package webtest starts a complete Toolwarden web server on a fresh test database, for
// tests that drive it over HTTP, websockets or a real browser.
package webtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
)

// AdminPassword is the password of the bootstrap user "admin".
const AdminPassword = apptest.AdminPassword

// Server is a running test server: the App of `toolwarden serve` behind an
// httptest.Server.
type Server struct {
	*httptest.Server
	App *apptest.App
	// Pool is the App's, as the application's role unless Options.Owner (apptest.App).
	Pool *pgxpool.Pool
	// Owner is a pool as the database's owner, for a test's tampering the App's role
	// may not do (apptest.App.Owner).
	Owner    *pgxpool.Pool
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
type SyncBuffer = testkit.SyncBuffer

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
	// Gateway tunes /mcp (how long a call waits for approval, page size); nil uses the defaults.
	Gateway *gateway.Options
	// Builtin adds the built-in server (apptest.Options.Builtin).
	Builtin bool
	// Owner connects the App as the database's owner, not the application's role
	// (apptest.Options.Owner).
	Owner bool
	// Egress is the egress policy for server URLs (nil: the default).
	Egress *egress.Policy
	// Grants tunes grants and user_collaboration (a clock: Now); nil uses the defaults.
	Grants *grants.Options
	// Checkpoints is where the audit chain's checkpoints are and the key that signs
	// them (app.Config.Checkpoints); zero: none.
	Checkpoints app.CheckpointConfig
	// SessionRecheck is how often websockets check their session again (0: 30 s).
	SessionRecheck time.Duration
	// SocketsPerPerson bounds one person's open websockets (0: 64; negative: none).
	SocketsPerPerson int
	// SocketsPerProcess bounds all open websockets together (0: 10,000; negative: none).
	SocketsPerProcess int
	// BodyReadTimeout bounds reading a request's body (0: a minute).
	BodyReadTimeout time.Duration
	// DownloadStall bounds how long a download waits for its client to read on (0: a minute).
	DownloadStall time.Duration
}

// Start runs a server until the test ends. Its users: admin/AdminPassword.
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	a := apptest.Start(t, &apptest.Options{Builtin: opts.Builtin, Owner: opts.Owner, Config: func(c *app.Config) {
		if opts.Auth != nil {
			c.Auth = *opts.Auth
		}
		if opts.MCP != nil {
			c.MCP = *opts.MCP
		}
		if opts.Router != nil {
			c.Router = *opts.Router
		}
		if opts.Executions != nil {
			c.Executions = *opts.Executions
		}
		if opts.Denials != nil {
			c.Denials = *opts.Denials
		}
		if opts.Gateway != nil {
			c.Gateway = *opts.Gateway
		}
		if opts.Grants != nil {
			c.Grants = *opts.Grants
		}
		c.TrustedProxies = opts.TrustedProxies
		c.Checkpoints = opts.Checkpoints
		c.SessionRecheck = opts.SessionRecheck
		c.SocketsPerPerson = opts.SocketsPerPerson
		c.SocketsPerProcess = opts.SocketsPerProcess
		c.BodyReadTimeout = opts.BodyReadTimeout
		c.DownloadStall = opts.DownloadStall
		c.Egress = opts.Egress
	}})
	// The HTTP server serve runs, with its timeouts.
	hs := httptest.NewUnstartedServer(a.Web)
	hs.Config = app.NewHTTPServer(a.Web)
	hs.Start()
	// Before the App stops (cleanups run last-registered first): requests end first.
	t.Cleanup(func() {
		a.Web.Shutdown()
		hs.Close()
	})
	return &Server{Server: hs, App: a, Pool: a.Pool, Owner: a.Owner, Auth: a.Auth, Bus: a.Bus, Web: a.Web, Keys: a.Keys, Registry: a.Registry,
		MCP: a.MCP, Tools: a.Tools, Router: a.Router, Executions: a.Executions, Logs: a.Logs}
}

// CreateUser adds a user with the given role and password.
func (s *Server) CreateUser(t testing.TB, username string, role auth.Role, password string) auth.User {
	t.Helper()
	return s.App.CreateUser(t, username, role, password)
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
	testkit.WaitFor(t, within, cond, msg)
}

// RegisterServer registers spec, connects it and enables the named tools once validated.
func (s *Server) RegisterServer(t testing.TB, spec registry.Spec, enable ...string) {
	t.Helper()
	s.App.RegisterServer(t, spec, enable...)
}

// LiveServer starts the in-repo MCP test server over streamable HTTP, registers it as
// name and enables the named tools.
func (s *Server) LiveServer(t testing.TB, name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	t.Helper()
	return s.App.LiveServer(t, name, trusted, enable...)
}

// Token issues an API token for the user named username.
func (s *Server) Token(t testing.TB, username string) string {
	t.Helper()
	return s.App.Token(t, username)
}

// ToolID is the id of the tool with the qualified name given.
func (s *Server) ToolID(t testing.TB, qualified string) string {
	t.Helper()
	return s.App.ToolID(t, qualified)
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

// ErrorBody is the error body every JSON API answers with (docs/api.md, Errors).
type ErrorBody struct {
	Error struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
}

// Error sends a request that must fail with status and the error code given, and
// returns the error body.
func (a API) Error(method, path string, body any, status int, code string) ErrorBody {
	a.T.Helper()
	got, raw := a.Do(method, path, body)
	var e ErrorBody
	_ = json.Unmarshal(raw, &e)
	if got != status || e.Error.Code != code {
		a.T.Fatalf("%s %s: got %d %s, want %d %s", method, path, got, raw, status, code)
	}
	return e
}

// Case is one request of a table-driven handler test, sent through the real route
// table, and the answer it must get.
type Case struct {
	Name   string
	As     API // who sends it (a session, a token or nobody)
	Method string
	Path   string
	Body   any // as API.Do takes it
	Status int
	// Code is the error code an error answer carries ("" for a success).
	Code string
	// Details are texts the error's details must contain (field paths, keys).
	Details []string
}

// Run sends each case as a subtest of t.
func Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			a := tc.As
			a.T = t
			if tc.Code == "" {
				if got, raw := a.Do(tc.Method, tc.Path, tc.Body); got != tc.Status {
					t.Fatalf("%s %s: got %d %s, want %d", tc.Method, tc.Path, got, raw, tc.Status)
				}
				return
			}
			e := a.Error(tc.Method, tc.Path, tc.Body, tc.Status, tc.Code)
			for _, d := range tc.Details {
				if !strings.Contains(string(e.Error.Details), d) {
					t.Errorf("%s %s: the details %s lack %q", tc.Method, tc.Path, e.Error.Details, d)
				}
			}
		})
	}
}
