package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/internal/gctune"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/builtin"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/gateway"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/replicas"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/template"
	"golang.org/x/net/http/httpproxy"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	start := time.Now()
	var c config
	fs := newFlagSet("serve", stderr)
	commonFlags(fs, &c)
	fs.StringVar(&c.Addr, "addr", envOr("TOOLWARDEN_ADDR", "127.0.0.1:8080"), "listen address (env TOOLWARDEN_ADDR)")
	fs.StringVar(&c.SecretKeyFile, "secret-key-file", envOr("TOOLWARDEN_SECRET_KEY_FILE", ""), "encryption key file; default <data-dir>/secret.key, created 0600 on first run (env TOOLWARDEN_SECRET_KEY_FILE)")
	lostKeys := fs.String("lost-keys", envOr("TOOLWARDEN_LOST_KEYS", ""), "ids of secret keys lost for good (comma-separated; 'unknown' when none is named): serve starts although the key file lacks them, instead of refusing; what they sealed must be entered, or planned, again (env TOOLWARDEN_LOST_KEYS)")
	fs.StringVar(&c.AdminPassword, "admin-password", envOr("TOOLWARDEN_ADMIN_PASSWORD", ""), "password for the first-start admin user; empty: random, printed once (env TOOLWARDEN_ADMIN_PASSWORD)")
	fs.StringVar(&c.LLMURL, "llm-url", envOr("TOOLWARDEN_LLM_URL", ""), "OpenAI-compatible chat completions base URL for the planner (env TOOLWARDEN_LLM_URL)")
	fs.StringVar(&c.LLMModel, "llm-model", envOr("TOOLWARDEN_LLM_MODEL", ""), "model name for --llm-url (env TOOLWARDEN_LLM_MODEL)")
	// These three take their variable after parsing (envFlags), which refuses a value
	// the flag would refuse.
	fs.BoolVar(&c.SecureCookies, "secure-cookies", false, "mark cookies Secure (serve behind HTTPS) (env TOOLWARDEN_SECURE_COOKIES=1)")
	rateLimitFlag(fs, &c.RateLimit)
	maxMessage := maxMessageFlag(fs)
	snapBudget := snapshotBudgetFlag(fs)
	fs.StringVar(&c.readyFile, "ready-file", "", "write the listening address to this file once ready (for scripts and tests)")
	confineMode := confineFlag(fs)
	tplTimeout := fs.String("template-max-timeout", envOr("TOOLWARDEN_TEMPLATE_MAX_TIMEOUT", template.MaxTimeout.String()),
		"the longest a template tool's command or HTTP request may run, whatever its template says; at most "+template.MaxTimeout.String()+" (env TOOLWARDEN_TEMPLATE_MAX_TIMEOUT)")
	builtinRoot := fs.String("builtin-root", envOr("TOOLWARDEN_BUILTIN_ROOT", ""), "where the built-in file and terminal tools keep each conversation's workspace (<root>/<conversation_id>); they never reach outside it. Default <data-dir>/workspaces (env TOOLWARDEN_BUILTIN_ROOT)")
	hold := fs.String("mcp-hold", envOr("TOOLWARDEN_MCP_HOLD", "50s"), "how long a call through /mcp that needs approval waits for the decision before it answers that it is pending; keep it under the client's call timeout, often 60s (env TOOLWARDEN_MCP_HOLD)")
	testTimeout := fs.String("test-connection-timeout", envOr("TOOLWARDEN_TEST_CONNECTION_TIMEOUT", "10s"), "the longest a \"Test connection\" attempt may take, from start to the tool list; a server's own shorter timeout wins (env TOOLWARDEN_TEST_CONNECTION_TIMEOUT)")
	proxies := fs.String("trusted-proxy", envOr("TOOLWARDEN_TRUSTED_PROXIES", ""), "CIDRs of reverse proxies whose X-Forwarded-For names the client (comma-separated); empty: the peer address is the client (env TOOLWARDEN_TRUSTED_PROXIES)")
	advertise := fs.String("advertise-url", envOr("TOOLWARDEN_ADVERTISE_URL", ""), "the base URL the other replicas on this database reach this one at, to forward the requests of a terminal or a test run it holds (docs/deploy.md); default http://<listen address>, or http://<hostname>:<port> when --addr listens on every address (env TOOLWARDEN_ADVERTISE_URL)")
	replicaName := fs.String("replica-name", envOr("TOOLWARDEN_REPLICA_NAME", ""), "what pages and logs call this serve among several on one database (docs/deploy.md); default <host>:<pid> (env TOOLWARDEN_REPLICA_NAME)")
	perPerson := fs.String("terminals-per-person", envOr("TOOLWARDEN_TERMINALS_PER_PERSON", strconv.Itoa(builtin.DefaultMaxTerminalsPerOwner)), "how many built-in terminals (PTY sessions and background commands together) one person may have running on this serve (env TOOLWARDEN_TERMINALS_PER_PERSON)")
	termMax := fs.String("terminals-max", envOr("TOOLWARDEN_TERMINALS_MAX", strconv.Itoa(builtin.DefaultMaxTerminals)), "how many built-in terminals this serve runs in all, whoever owns them (env TOOLWARDEN_TERMINALS_MAX)")
	termIdle := fs.String("terminal-idle", envOr("TOOLWARDEN_TERMINAL_IDLE", "30m"), "how long a terminal session at its shell's prompt may go with no input and no output before it is ended; a job running in its foreground keeps it. 0: never (env TOOLWARDEN_TERMINAL_IDLE)")
	cpKey := checkpointKeyFlag(fs)
	cpPub := fs.String("checkpoint-public-key", envOr("TOOLWARDEN_CHECKPOINT_PUBLIC_KEY", ""), "public key file (PEM) of the key whose checkpoints the audit page's chain check trusts, for checkpoints signed on another machine and copied into <data-dir>/checkpoints (with --checkpoint-every 0); default the .pub beside --checkpoint-key-file (env TOOLWARDEN_CHECKPOINT_PUBLIC_KEY)")
	cpEvery := fs.Duration("checkpoint-every", time.Hour, "how often the server signs the audit chain's head into <data-dir>/checkpoints; 0: never (env TOOLWARDEN_CHECKPOINT_EVERY)")
	egressOf := egressFlags(fs)
	tokenTTL := fs.String("token-default-ttl", envOr("TOOLWARDEN_TOKEN_DEFAULT_TTL", "90d"), "how long an API token lives when its creator names no expiry: days (90d) or a duration (720h); 0: such tokens never expire. An expiry given at creation wins (env TOOLWARDEN_TOKEN_DEFAULT_TTL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := envFlags(fs, os.LookupEnv); err != nil {
		fmt.Fprintln(stderr, "toolwarden serve:", err)
		return errUsage
	}
	// The router would take 0 for its default (1200), and any negative number for no
	// limit, in silence: who sets 0 means no calls or no limit, and -5 no one knows what;
	// both are told how to say no limit (-1).
	if c.RateLimit == 0 || c.RateLimit < -1 {
		fmt.Fprintf(stderr, "toolwarden serve: --rate-limit: %d is not a limit: give how many tool calls a minute one user may make, or -1 for no limit (TOOLWARDEN_RATE_LIMIT too)\n", c.RateLimit)
		return errUsage
	}
	terms, err := terminalLimits(*perPerson, *termMax, *termIdle)
	if err != nil {
		fmt.Fprintln(stderr, "toolwarden serve:", err)
		return errUsage
	}
	if c.TokenDefaultTTL, err = tokenDefaultTTL(*tokenTTL); err != nil {
		fmt.Fprintln(stderr, "toolwarden serve: --token-default-ttl:", err)
		return errUsage
	}
	egressPolicy, err := egressOf()
	if err != nil {
		fmt.Fprintln(stderr, "toolwarden serve:", err)
		return errUsage
	}
	if c.TrustedProxies, err = parseProxies(*proxies); err != nil {
		fmt.Fprintln(stderr, "toolwarden serve:", err)
		return errUsage
	}
	if *advertise != "" {
		if err := checkAdvertiseURL(*advertise); err != nil {
			fmt.Fprintln(stderr, "toolwarden serve: --advertise-url:", err)
			return errUsage
		}
	}
	if *cpEvery != 0 && *cpEvery < time.Second {
		fmt.Fprintf(stderr, "toolwarden serve: --checkpoint-every: %s is not 0 (never) or a duration of at least 1s, such as 1h\n", *cpEvery)
		return errUsage
	}
	if *cpPub != "" {
		if _, err := audit.ReadPublicKey(*cpPub); err != nil {
			fmt.Fprintln(stderr, "toolwarden serve: --checkpoint-public-key:", err)
			return errUsage
		}
	}
	mcpHold, err := time.ParseDuration(*hold)
	if err != nil || mcpHold < time.Second || mcpHold > 10*time.Minute {
		fmt.Fprintf(stderr, "toolwarden serve: --mcp-hold: %q is not a duration between 1s and 10m, such as 50s\n", *hold)
		return errUsage
	}
	testBound, err := time.ParseDuration(*testTimeout)
	if err != nil || testBound < time.Second || testBound > 5*time.Minute {
		fmt.Fprintf(stderr, "toolwarden serve: --test-connection-timeout: %q is not a duration between 1s and 5m, such as 10s\n", *testTimeout)
		return errUsage
	}
	if err := setConfine(&c, *confineMode, "serve", stderr); err != nil {
		return err
	}
	if c.TemplateMaxTimeout, err = time.ParseDuration(*tplTimeout); err != nil || c.TemplateMaxTimeout < time.Second || c.TemplateMaxTimeout > template.MaxTimeout {
		fmt.Fprintf(stderr, "toolwarden serve: --template-max-timeout: %q is not a duration from 1s to %s\n", *tplTimeout, template.MaxTimeout)
		return errUsage
	}
	if err := envMaxMessage(fs, maxMessage); err != nil {
		return err
	}
	c.MaxMessageSize = int(*maxMessage)
	if err := envSize(fs, "snapshot-budget", "TOOLWARDEN_SNAPSHOT_BUDGET", os.LookupEnv, snapBudget); err != nil {
		return err
	}
	c.SnapshotBudget = int64(*snapBudget)
	c.LLMAPIKey = os.Getenv("TOOLWARDEN_LLM_API_KEY")
	log := newLogger(stderr, c.LogLevel)
	if gctune.Start(os.Getenv) {
		log.Debug("garbage collector tuned for a gateway (set GOGC or GOMEMLIMIT to choose yourself)")
	}

	if err := os.MkdirAll(c.DataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	// One serve per data dir, held until this process ends (docs/operations.md).
	lock, err := lockDataDir(c.DataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	// Before the key file is made: a key in a directory that cannot be hidden is refused.
	hide, warnings, err := confinement(c, *cpKey)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn("confinement: " + w)
	}
	keys, madeKey, err := openKeyring(c)
	if err != nil {
		return err
	}
	root := orDefault(*builtinRoot, filepath.Join(c.DataDir, "workspaces"))
	if err := builtinRootApart(root, hide.Hide); err != nil {
		return err
	}
	hide = hideBuiltinRoot(hide, root)
	// Listening comes first: the replica's record says where the others reach it.
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another toolwarden running? set --addr)", c.Addr, err)
	}
	defer ln.Close()
	// The listener answers from now on, not once the App serves: the database's start
	// and migrations (minutes on a large audit log) and the components' start come first,
	// and a liveness probe that timed out meanwhile would have the orchestrator kill serve
	// mid-migration. Until the App serves, /healthz says it is starting (frontHandler).
	front := newFrontHandler(c.DatabaseURL == "")
	srv := app.NewHTTPServer(front)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer srv.Close() // what Serve left after its drain, or a start that failed
	stopWatch := context.AfterFunc(ctx, func() { front.stopping.Store(true) })
	defer stopWatch()
	log.Info("listening; /healthz answers that serve is starting until it is ready", "addr", ln.Addr().String())
	advertiseURL := *advertise
	if advertiseURL == "" {
		advertiseURL = defaultAdvertiseURL(ln.Addr())
	}
	var plan planner.Planner // default: the rule-based planner, no network
	if c.LLMURL != "" {
		plan = planner.NewLLM(c.LLMURL, &planner.LLMOptions{Model: c.LLMModel, APIKey: c.LLMAPIKey})
	}
	a, err := app.New(ctx, app.Config{
		DB: db.Config{URL: c.DatabaseURL, MigrateURL: c.MigrateDatabaseURL, DataDir: c.DataDir, Migrate: true,
			Cluster: &db.ClusterOptions{Fast: c.fastDB, Logger: slog.New(front.watchLog(log.Handler())), Template: c.PGTemplate}},
		Keys: keys, Logger: log, Version: version, StartedAt: start, AdminPassword: c.AdminPassword,
		SecureCookies: c.SecureCookies, TrustedProxies: c.TrustedProxies, Planner: plan,
		Auth: auth.Options{TokenDefaultTTL: c.TokenDefaultTTL}, Egress: egressPolicy,
		MCP: mcpclient.Options{Version: version, InheritEnv: mcpclient.InheritedEnv(os.LookupEnv), Confine: hide,
			MaxMessageBytes: c.MaxMessageSize, TemplateMaxTimeout: c.TemplateMaxTimeout,
			ProcessDir: filepath.Join(c.DataDir, "run", "stdio"), TestTimeout: testBound},
		Router:             router.Options{UserRate: c.RateLimit},
		Gateway:            gateway.Options{Hold: mcpHold},
		BuiltinRoot:        root,
		SnapshotBudget:     c.SnapshotBudget,
		TerminalsPerPerson: terms.perPerson, TerminalsMax: terms.max, TerminalIdle: terms.idle,
		Checkpoints: checkpointConfig(c, *cpKey, *cpPub, *cpEvery),
		Replica:     replicas.Options{Name: *replicaName, Address: advertiseURL},
	})
	if err != nil {
		return err
	}
	// Stops the embedded PostgreSQL on every way out of here (Serve stops it too).
	defer a.Stop()
	front.setPhase("checking the secret keys")
	// Checked once the database is open (New opens it), before anything runs: a key file
	// without the database's keys (deleted, mistyped, another installation's) would seal
	// and encrypt with a key the rest of the installation does not hold.
	held := keys
	if madeKey {
		held = nil // the key file was not there: what the database holds was sealed with another
	}
	lost := parseLostKeys(*lostKeys)
	err = secretkeys.FileFits(ctx, a.Pool, held, secretKeyPath(c), lost)
	if err == nil {
		// Recorded before anything is sealed: a command run later without this key file
		// (or another replica's first start) is refused even while nothing is.
		err = secretkeys.Record(ctx, a.Pool, keys, secretKeyPath(c), lost, "")
	}
	if err != nil {
		if madeKey {
			_ = os.Remove(secretKeyPath(c)) // made for a first start this is not
		}
		return fmt.Errorf("%w; serve did not start. If those keys are lost for good, name them in --lost-keys (TOOLWARDEN_LOST_KEYS; 'unknown' when none is named) to start without them: what they sealed must then be entered, or planned, again", err)
	}
	if warn, err := db.RoleWarning(ctx, a.Pool); err != nil {
		return err
	} else if warn != "" {
		log.Warn("database: " + warn)
	}
	if a.DB.Cluster != nil && !a.DB.Cluster.Owned() {
		log.Warn("database: another toolwarden process started this data dir's PostgreSQL; when it exits, the database stops under this server")
	}
	// The App's start (Serve) creates the first administrator, last: a start that fails before
	// leaves none, and the next one creates it and shows its password.
	front.setPhase("starting components")
	return a.Serve(ctx, srv, serveErr, front.serve, func() {
		if pw := a.FirstAdminPassword; pw != "" && c.AdminPassword != "" {
			log.Info("created the first administrator 'admin' with the password from --admin-password")
		} else if pw != "" {
			fmt.Fprintf(stdout, "\n  Created the first administrator.\n    username: admin\n    password: %s\n  This password is shown only now.\n\n", pw)
		}
		url := "http://" + ln.Addr().String()
		log.Info("toolwarden ready", "url", url, "version", version, "took", time.Since(start).Round(time.Millisecond))
		fmt.Fprintf(stdout, "Toolwarden is ready at %s\n", url)
		if c.readyFile != "" {
			_ = os.WriteFile(c.readyFile, []byte(ln.Addr().String()), 0o600)
		}
	})
}

// frontHandler is serve's HTTP handler: while the App starts (the database, its
// migrations, the components) it answers the probes itself, /healthz 200 "starting"
// (the process is up: restarting it would only start over, and interrupt a migration)
// and /readyz 503, and everything else 503 with Retry-After; once the App serves, every
// request goes to the App's handler.
type frontHandler struct {
	app      atomic.Pointer[http.Handler]
	phase    atomic.Pointer[string]
	stopping atomic.Bool // the start was told to stop: it ends, and serve with it
}

func newFrontHandler(embedded bool) *frontHandler {
	f := &frontHandler{}
	if embedded {
		f.setPhase("starting the database")
	} else {
		f.setPhase("connecting to the database")
	}
	return f
}

func (f *frontHandler) setPhase(p string) { f.phase.Store(&p) }

// serve hands every request from now on to h.
func (f *frontHandler) serve(h http.Handler) { f.app.Store(&h) }

func (f *frontHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := f.app.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	status, phase := "starting", *f.phase.Load()
	doing := "starting (" + phase + ")"
	if f.stopping.Load() {
		status, phase, doing = "stopping", "stopping", "stopping"
	}
	probe := r.Method == http.MethodGet || r.Method == http.MethodHead
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case probe && r.URL.Path == "/healthz":
		// The shape of the App's /healthz ("components" included, empty), with status
		// "starting" and what the start is doing.
		writeStartingJSON(w, http.StatusOK, map[string]any{"status": status, "phase": phase, "components": map[string]any{}})
	case probe && r.URL.Path == "/readyz":
		writeStartingJSON(w, http.StatusServiceUnavailable, map[string]any{"status": status, "phase": phase})
	case strings.HasPrefix(r.URL.Path, "/api/"):
		w.Header().Set("Retry-After", "5")
		writeStartingJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
			"code": "unavailable", "message": "Toolwarden is " + doing + "; try again in a moment"}})
	default:
		w.Header().Set("Retry-After", "5")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "Toolwarden is "+doing+"; try again in a moment.\n")
	}
}

func writeStartingJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// watchLog wraps h, the log of the database's start, to learn the phase from what the
// migrator says (it tells nothing else of its progress): waiting for another process's
// migration, or applying one. Records below h's level still reach the watch.
func (f *frontHandler) watchLog(h slog.Handler) slog.Handler {
	return &phaseWatch{inner: h, front: f}
}

type phaseWatch struct {
	inner slog.Handler
	front *frontHandler
}

func (p *phaseWatch) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || p.inner.Enabled(ctx, l)
}

func (p *phaseWatch) Handle(ctx context.Context, r slog.Record) error {
	if p.front.app.Load() == nil {
		switch m := r.Message; {
		case strings.HasPrefix(m, "database: waiting for another process's migration"):
			p.front.setPhase("waiting for another process's migration")
		case strings.HasPrefix(m, "database: applying migration"),
			strings.HasPrefix(m, "database: migration ") && strings.Contains(m, "still running"):
			p.front.setPhase("migrating")
		}
	}
	if !p.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return p.inner.Handle(ctx, r)
}

func (p *phaseWatch) WithAttrs(as []slog.Attr) slog.Handler {
	return &phaseWatch{inner: p.inner.WithAttrs(as), front: p.front}
}

func (p *phaseWatch) WithGroup(name string) slog.Handler {
	return &phaseWatch{inner: p.inner.WithGroup(name), front: p.front}
}

// confineFlag defines --confine on fs: serve's, and import's, which starts the stdio
// servers a file registers to discover their tools.
func confineFlag(fs *flag.FlagSet) *string {
	return fs.String("confine", envOr("TOOLWARDEN_CONFINE", "auto"), "how stdio servers and the built-in terminals run: auto (confined where this machine allows it, else unconfined with a warning), required (never unconfined: they do not start where confinement is unavailable) or off (env TOOLWARDEN_CONFINE)")
}

// setConfine sets c.Confine from --confine; a value that is not a mode is a usage
// error of command cmd, printed on stderr.
func setConfine(c *config, mode, cmd string, stderr io.Writer) error {
	switch mode {
	case "auto", "required", "off":
		c.Confine = mode
		return nil
	}
	fmt.Fprintf(stderr, "toolwarden %s: --confine: %q is not one of auto, required, off\n", cmd, mode)
	return errUsage
}

// confinement is what stdio servers must not reach (docs/security.md): the data dir (embedded
// database and its socket, secret key, workspaces), the secret key file wherever it is,
// the checkpoint key when it is kept outside the data dir (cpKeyFlag is
// --checkpoint-key-file), and what could connect to an external database: its unix
// socket, client key and certificate and passfile, for the owner's URL too (whoever
// connects as the owner can rewrite audit_log).
//
// A key file outside the data dir is hidden with its whole directory: a mount over the
// file itself is detached, in every namespace, when `secrets rotate` renames a new file
// over it. Links are followed: a key in the data dir may lead outside it. A directory
// confined programs need is refused with --confine=required; otherwise the file alone
// is hidden, as it was, and a warning says what that leaves open. The warnings also
// name other files a key's directory holds, which confined programs will not see.
func confinement(c config, cpKeyFlag string) (confine.Spec, []string, error) {
	var warnings []string
	hide := []string{c.DataDir}
	data := []string{c.DataDir}
	if real, err := filepath.EvalSymlinks(c.DataDir); err == nil && real != c.DataDir {
		hide, data = append(hide, real), append(data, real)
	}
	keys := []struct{ flag, env, path string }{
		{"--secret-key-file", "TOOLWARDEN_SECRET_KEY_FILE", secretKeyPath(c)},
		{"--checkpoint-key-file", "TOOLWARDEN_CHECKPOINT_KEY_FILE", checkpointKeyPath(c, cpKeyFlag)},
	}
	var keyNames []string // the key files' own names, and where their links lead
	for _, k := range keys {
		keyNames = append(keyNames, filepath.Base(k.path), filepath.Base(resolveLinks(k.path)))
	}
	for _, k := range keys {
		paths := []string{k.path}
		abs, _ := filepath.Abs(k.path)
		if real, _ := filepath.Abs(resolveLinks(k.path)); real != abs {
			paths = append(paths, real)
		}
		for _, p := range paths {
			if slices.ContainsFunc(data, func(d string) bool { return within(p, d) }) {
				continue // hidden with the data dir
			}
			if c.Confine == "off" {
				hide = append(hide, p) // nothing is hidden: the list is only shown
				continue
			}
			dir := filepath.Dir(p)
			what := k.path
			if abs, _ := filepath.Abs(k.path); p != k.path && p != abs {
				what += " (a link to " + p + ")"
			}
			if err := keyDirApart(dir); err != nil {
				if c.Confine == "required" {
					return confine.Spec{}, nil, fmt.Errorf("%s %s: %w; put the key in a directory of its own, such as /etc/toolwarden/ (%s too)", k.flag, what, err, k.env)
				}
				warnings = append(warnings, fmt.Sprintf("%s %s: %v, so only the file is hidden, and a new key renamed over it "+
					"(secrets rotate) is readable by the stdio servers and terminals already running; put the key in a directory "+
					"of its own, such as /etc/toolwarden/ (%s too)", k.flag, what, err, k.env))
				hide = append(hide, p)
				continue
			}
			if others := othersBeside(dir, keyNames, data); len(others) > 0 {
				warnings = append(warnings, fmt.Sprintf("%s %s: its directory %s is hidden whole from stdio servers and terminals, "+
					"and with it %s", k.flag, what, dir, strings.Join(others, ", ")))
			}
			hide = append(hide, dir)
		}
	}
	// The migrate URL is used only with an external database (DatabaseURL).
	if c.DatabaseURL != "" {
		for _, u := range []struct{ flag, conn string }{{"--database-url", c.DatabaseURL}, {"--migrate-database-url", c.MigrateDatabaseURL}} {
			if u.conn == "" {
				continue
			}
			socks, err := db.SocketPaths(u.conn)
			if err != nil {
				return confine.Spec{}, nil, fmt.Errorf("%s: %w", u.flag, err)
			}
			files, err := db.CredentialFiles(u.conn)
			if err != nil {
				return confine.Spec{}, nil, fmt.Errorf("%s: %w", u.flag, err)
			}
			hide = append(append(hide, socks...), files...)
		}
	}
	return confine.Spec{Hide: hide, Required: c.Confine == "required", Off: c.Confine == "off"}, warnings, nil
}

// checkpointConfig is where serve signs checkpoints: <data-dir>/checkpoints, every
// `every` (0: none). The directory is set even then: the audit page's check reads the
// newest checkpoint there, as `toolwarden audit verify` does.
func checkpointConfig(c config, keyFlag, pubFlag string, every time.Duration) app.CheckpointConfig {
	return app.CheckpointConfig{Dir: checkpointDir(c), KeyFile: checkpointKeyPath(c, keyFlag), PublicKey: pubFlag, Every: every}
}

// rateLimitFlag defines --rate-limit (1200 by default) on fs, setting n.
func rateLimitFlag(fs *flag.FlagSet, n *int) {
	decimalVar(fs, n, "rate-limit", 1200, math.MinInt, "a whole number of tool calls a minute in decimal, such as 600, or -1 for no limit",
		"tool calls a minute one user may make; -1: no limit (env TOOLWARDEN_RATE_LIMIT)")
}

// decimalVar defines an int flag read in base 10 only, as decimalInt, on fs.
func decimalVar(fs *flag.FlagSet, p *int, name string, value, least int, want, usage string) {
	*p = value
	fs.Var(&decimalInt{p: p, least: least, want: want}, name, usage)
}

// decimalInt is an int flag read in base 10 only: flag.IntVar reads base 0, so a
// leading zero made 0600 octal (384), 090 a bare parse error, and 0x10 was 16. It
// refuses a value below least; want says what a value must be.
type decimalInt struct {
	p     *int
	least int
	want  string
}

func (d *decimalInt) String() string {
	if d.p == nil { // the flag package's zero value, for its help
		return "0"
	}
	return strconv.Itoa(*d.p)
}

func (d *decimalInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < d.least {
		return errors.New("not " + d.want)
	}
	*d.p = n
	return nil
}

// envFlagged are serve's flags that envFlags sets from a variable, with what a value must be.
var envFlagged = []struct{ flag, env, want string }{
	{"secure-cookies", "TOOLWARDEN_SECURE_COOKIES", "true or false (1 or 0)"},
	{"rate-limit", "TOOLWARDEN_RATE_LIMIT", "a whole number of tool calls a minute, such as 600, or -1 for no limit"},
	{"checkpoint-every", "TOOLWARDEN_CHECKPOINT_EVERY", "0 (never) or a duration of at least 1s, such as 1h"},
}

// envFlags sets each flag of envFlagged that fs defines and the command line did not
// give from its variable (read through lookup), parsed as the flag parses a value: one
// it cannot read is an error naming the variable and the value, not the default taken
// in silence. An empty variable counts as unset, as it did.
func envFlags(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	for _, e := range envFlagged {
		f := fs.Lookup(e.flag)
		v, ok := lookup(e.env)
		if f == nil || flagGiven(fs, e.flag) || !ok || v == "" {
			continue
		}
		if err := f.Value.Set(v); err != nil {
			return fmt.Errorf("%s (the default of --%s): %q is not %s", e.env, e.flag, v, e.want)
		}
	}
	return nil
}

// limits are the built-in terminals' (--terminals-per-person, --terminals-max,
// --terminal-idle); a negative idle time never ends an idle session.
type limits struct {
	perPerson, max int
	idle           time.Duration
}

// terminalLimits reads the terminals' limits, naming the flag (and its variable) of a
// value it refuses.
func terminalLimits(perPerson, most, idle string) (limits, error) {
	var l limits
	for _, f := range []struct {
		name, env, value string
		n                *int
	}{{"terminals-per-person", "TOOLWARDEN_TERMINALS_PER_PERSON", perPerson, &l.perPerson}, {"terminals-max", "TOOLWARDEN_TERMINALS_MAX", most, &l.max}} {
		n, err := strconv.Atoi(strings.TrimSpace(f.value))
		if err != nil || n < 1 {
			return l, fmt.Errorf("--%s: %q is not a positive whole number of terminals, such as 16 (%s too)", f.name, f.value, f.env)
		}
		*f.n = n
	}
	d, err := time.ParseDuration(strings.TrimSpace(idle))
	if err != nil || d < 0 || (d > 0 && d < time.Second) {
		return l, fmt.Errorf("--terminal-idle: %q is not 0 (never) or a duration of at least 1s, such as 30m (TOOLWARDEN_TERMINAL_IDLE too)", idle)
	}
	l.idle = d
	if d == 0 {
		l.idle = -1 // never: 0 is the terminals' default
	}
	return l, nil
}

// hideBuiltinRoot hides the built-in tools' root from stdio servers and template tools
// too, not only from terminals: a --builtin-root outside the data dir (hidden whole)
// held every conversation's files and snapshots within their reach.
func hideBuiltinRoot(spec confine.Spec, root string) confine.Spec {
	spec.Hide = append(slices.Clip(spec.Hide), root)
	return spec
}

// builtinRootApart refuses a built-in root that holds what stdio servers and terminals
// must not reach (hidden: the data dir, a key, a database's socket): a terminal is
// shown its conversation's workspace, a folder right below the root, and a
// conversation named after such a folder would be shown it whole.
func builtinRootApart(root string, hidden []string) error {
	forms := func(p string) []string {
		out := []string{p}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, real)
		}
		return out
	}
	for _, h := range hidden {
		for _, hf := range forms(h) {
			for _, rf := range forms(root) {
				if within(hf, rf) {
					return fmt.Errorf("--builtin-root %s holds %s, which the built-in tools and terminals must not reach; "+
						"give it a folder of its own (the default is <data-dir>/workspaces)", root, h)
				}
			}
		}
	}
	return nil
}

// resolveLinks is where path leads through symbolic links, also when the last one leads
// to no file yet (a key made on first use); path when it cannot tell.
func resolveLinks(path string) string {
	for range 40 {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return real
		}
		to, err := os.Readlink(path)
		if err != nil {
			break
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}

// systemDirs are directories a key file may not share, and systemTrees trees it may not
// be in: its directory is hidden from stdio servers and terminals, which need these.
var (
	systemDirs = []string{"/", "/etc", "/home", "/media", "/mnt", "/opt", "/root", "/run", "/run/user", "/srv", "/tmp",
		"/var", "/var/cache", "/var/lib", "/var/log", "/var/run", "/var/spool", "/var/tmp"}
	systemTrees = []string{"/bin", "/boot", "/dev", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr"}
)

// keyDirApart says why dir, a key file's directory, cannot be hidden from stdio servers
// and terminals; nil when it can.
func keyDirApart(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	forms := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		forms = append(forms, real)
	}
	home, _ := os.UserHomeDir()
	for _, d := range forms {
		switch {
		case slices.Contains(systemDirs, d) || d == filepath.Clean(os.TempDir()):
			return fmt.Errorf("its directory %s would be hidden from stdio servers and terminals, and they need it", d)
		case slices.ContainsFunc(systemTrees, func(t string) bool { return within(d, t) }):
			return fmt.Errorf("its directory %s is a system directory, which stdio servers and terminals need and would be hidden from", d)
		case home != "" && within(home, d):
			return fmt.Errorf("its directory %s holds the home directory %s, which stdio servers and terminals need and would be hidden from", d, home)
		}
	}
	return nil
}

// othersBeside names what a key's directory holds that confined programs might miss,
// at most five: not the key files (keys: their names) and what goes with them (a public
// key, a lock, a rotation's temporary file), hidden entries (a mounted secret's
// ..data), Toolwarden's own environment file, the data dir, nor what this process
// cannot read either.
func othersBeside(dir string, keys, data []string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var others []string
	for _, e := range entries {
		n := e.Name()
		own := slices.ContainsFunc(keys, func(k string) bool { return n == k || strings.HasPrefix(n, k+".") })
		if own || strings.HasPrefix(n, ".") || n == "toolwarden.env" ||
			strings.HasSuffix(n, ".key") || strings.HasSuffix(n, ".pub") || strings.Contains(n, ".key.") ||
			slices.ContainsFunc(data, func(d string) bool { return within(filepath.Join(dir, n), d) }) {
			continue
		}
		// Only files and folders (opening a named pipe would wait for a writer), and
		// only what this process can read.
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || !fi.Mode().IsRegular() && !fi.IsDir() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		f.Close()
		if len(others) == 5 {
			others = append(others, "…")
			break
		}
		others = append(others, n)
	}
	return others
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	ap, err1 := filepath.Abs(path)
	ad, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(ad, ap)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func secretKeyPath(c config) string {
	if c.SecretKeyFile != "" {
		return c.SecretKeyFile
	}
	return filepath.Join(c.DataDir, "secret.key")
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// defaultAdvertiseURL is where the other replicas reach a server listening at addr:
// that address when it is a specific one, else this host's name and the port.
func defaultAdvertiseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// checkAdvertiseURL: an http(s) URL with a host and nothing after the path.
func checkAdvertiseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: must start with http:// or https://", s)
	case u.Host == "":
		return fmt.Errorf("%q: names no host", s)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q: must be a base URL (no query, fragment or user)", s)
	case u.Path != "" && u.Path != "/":
		// Replicas sign and send the paths Toolwarden serves, from its root.
		return fmt.Errorf("%q: must be the replica's own address, without a path (Toolwarden serves from /)", s)
	}
	return nil
}

// egressFlags defines --egress-allow and --egress-deny on fs (serve's, and import's,
// which connects to the servers it registers); the function returns their policy, with
// the forward proxies the environment names (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
func egressFlags(fs *flag.FlagSet) func() (*egress.Policy, error) {
	allow := fs.String("egress-allow", envOr("TOOLWARDEN_EGRESS_ALLOW", ""), "CIDRs, addresses and host names (*.example.com) that HTTP servers' URLs may reach (comma-separated); empty: anything not denied (env TOOLWARDEN_EGRESS_ALLOW)")
	deny := fs.String("egress-deny", envOr("TOOLWARDEN_EGRESS_DENY", ""), "CIDRs, addresses and host names that HTTP servers' URLs may not reach; addresses are checked after DNS resolution, a host name rule matches that name only (deny a host's addresses to keep it out); the cloud metadata endpoints are always denied unless allowed by address (env TOOLWARDEN_EGRESS_DENY)")
	return func() (*egress.Policy, error) {
		p, err := egress.Parse(*allow, *deny)
		if err != nil {
			return nil, err
		}
		return p.WithProxy(httpproxy.FromEnvironment()), nil
	}
}
