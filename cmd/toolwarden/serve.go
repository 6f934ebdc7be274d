package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/handlers"
	"github.com/toolwarden/toolwarden/internal/confine"
	"github.com/toolwarden/toolwarden/internal/gctune"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/planner"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	start := time.Now()
	var c config
	fs := newFlagSet("serve", stderr)
	commonFlags(fs, &c)
	fs.StringVar(&c.Addr, "addr", envOr("TOOLWARDEN_ADDR", "127.0.0.1:8080"), "listen address (env TOOLWARDEN_ADDR)")
	fs.StringVar(&c.SecretKeyFile, "secret-key-file", envOr("TOOLWARDEN_SECRET_KEY_FILE", ""), "encryption key file; default <data-dir>/secret.key, created 0600 on first run (env TOOLWARDEN_SECRET_KEY_FILE)")
	fs.StringVar(&c.AdminPassword, "admin-password", envOr("TOOLWARDEN_ADMIN_PASSWORD", ""), "password for the first-start admin user; empty: random, printed once (env TOOLWARDEN_ADMIN_PASSWORD)")
	fs.StringVar(&c.LLMURL, "llm-url", envOr("TOOLWARDEN_LLM_URL", ""), "OpenAI-compatible chat completions base URL for the planner (env TOOLWARDEN_LLM_URL)")
	fs.StringVar(&c.LLMModel, "llm-model", envOr("TOOLWARDEN_LLM_MODEL", ""), "model name for --llm-url (env TOOLWARDEN_LLM_MODEL)")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", envOr("TOOLWARDEN_SECURE_COOKIES", "") == "1", "mark cookies Secure (serve behind HTTPS) (env TOOLWARDEN_SECURE_COOKIES=1)")
	fs.IntVar(&c.RateLimit, "rate-limit", envInt("TOOLWARDEN_RATE_LIMIT", 1200), "tool calls a minute one user may make; -1: no limit (env TOOLWARDEN_RATE_LIMIT)")
	maxMessage := byteSize(mcpclient.DefaultMaxMessageBytes)
	fs.Var(&maxMessage, "max-message-size", "the largest message an MCP server may send (a stdio line, an SSE event, a JSON body); "+
		"a larger result answers result_too_large. A byte count or a size like 512KiB, 16MiB or 64MB (env TOOLWARDEN_MAX_MESSAGE_SIZE)")
	fs.StringVar(&c.readyFile, "ready-file", "", "write the listening address to this file once ready (for scripts and tests)")
	confineMode := fs.String("confine", envOr("TOOLWARDEN_CONFINE", "auto"), "how stdio servers run: auto (confined where this machine allows it, else unconfined with a warning), required (never unconfined: they do not start where confinement is unavailable) or off (env TOOLWARDEN_CONFINE)")
	proxies := fs.String("trusted-proxy", envOr("TOOLWARDEN_TRUSTED_PROXIES", ""), "CIDRs of reverse proxies whose X-Forwarded-For names the client (comma-separated); empty: the peer address is the client (env TOOLWARDEN_TRUSTED_PROXIES)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var err error
	if c.TrustedProxies, err = parseProxies(*proxies); err != nil {
		fmt.Fprintln(stderr, "toolwarden serve:", err)
		return errUsage
	}
	switch c.Confine = *confineMode; c.Confine {
	case "auto", "required", "off":
	default:
		fmt.Fprintf(stderr, "toolwarden serve: --confine: %q is not one of auto, required, off\n", c.Confine)
		return errUsage
	}
	if err := envSize(fs, "max-message-size", "TOOLWARDEN_MAX_MESSAGE_SIZE", os.LookupEnv, &maxMessage); err != nil {
		return err
	}
	c.MaxMessageSize = int(maxMessage)
	c.LLMAPIKey = os.Getenv("TOOLWARDEN_LLM_API_KEY")
	log := newLogger(stderr, c.LogLevel)
	if gctune.Start(os.Getenv) {
		log.Debug("garbage collector tuned for a gateway (set GOGC or GOMEMLIMIT to choose yourself)")
	}

	if err := os.MkdirAll(c.DataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	keys, err := openKeyring(c)
	if err != nil {
		return err
	}
	d, err := db.Open(ctx, db.Config{URL: c.DatabaseURL, DataDir: c.DataDir, Migrate: true,
		Cluster: &db.ClusterOptions{Fast: c.fastDB, Logger: log}})
	if err != nil {
		return err
	}
	// Stop the embedded PostgreSQL on every way out of here.
	defer d.Close()

	authSvc := auth.New(d.Pool, &auth.Options{Logger: log})
	pw, err := authSvc.Bootstrap(ctx, c.AdminPassword)
	if err != nil {
		return err
	}
	if pw != "" && c.AdminPassword == "" {
		fmt.Fprintf(stdout, "\n  Created the first administrator.\n    username: admin\n    password: %s\n  This password is shown only now.\n\n", pw)
	} else if pw != "" {
		log.Info("created the first administrator 'admin' with the password from --admin-password")
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	bus := events.NewBus(d.Pool, &events.BusOptions{Logger: log})
	busDone := make(chan struct{})
	go func() { _ = bus.Run(runCtx); close(busDone) }()
	defer func() { cancel(); <-busDone }()
	authSvc.Follow(bus)

	reg := registry.New(d.Pool, keys, &registry.Options{Logger: log})
	hide, err := confinement(c)
	if err != nil {
		return err
	}
	mcp := mcpclient.New(reg, &mcpclient.Options{Logger: log, Bus: bus, Version: version,
		InheritEnv: mcpclient.InheritedEnv(os.LookupEnv), Confine: hide,
		MaxMessageBytes: c.MaxMessageSize})
	// In the background: the check behind it starts a process, and start-up is timed.
	go func() {
		if how := mcp.Confinement(); strings.HasPrefix(how, "none") {
			log.Warn("stdio servers run unconfined: they can read the data dir and reach the database", "confinement", how)
		} else {
			log.Info("stdio servers run confined", "confinement", how)
		}
	}()
	// Sessions stop before the bus and the database (deferred in reverse order), so
	// every server is marked disconnected and every stdio process is gone on exit.
	// Not cancelled by the signal itself: the deferred stops run after the HTTP server
	// has drained, so calls in flight end normally and are recorded.
	mcpCtx, mcpCancel := context.WithCancel(context.WithoutCancel(ctx))
	mcpDone := make(chan struct{})
	go func() { _ = mcp.Run(mcpCtx); close(mcpDone) }()
	defer func() { mcpCancel(); <-mcpDone }()

	toolSvc := tools.New(d.Pool, keys, log)
	dec := decide.New(d.Pool, authSvc)
	rt := router.New(d.Pool, toolSvc, mcp, &router.Options{Logger: log, Bus: bus, UserRate: c.RateLimit, Decide: dec})
	// The router stops before the sessions, writing the records of the last calls.
	rtCtx, rtCancel := context.WithCancel(context.WithoutCancel(ctx))
	rtDone := make(chan struct{})
	go func() { _ = rt.Run(rtCtx); close(rtDone) }()
	defer func() { rtCancel(); <-rtDone }()

	var plan planner.Planner // default: the rule-based planner, no network
	if c.LLMURL != "" {
		plan = planner.NewLLM(c.LLMURL, &planner.LLMOptions{Model: c.LLMModel, APIKey: c.LLMAPIKey})
	}
	execs, err := executions.New(d.Pool, rt, toolSvc, &executions.Options{Logger: log, Planner: plan, Auth: authSvc, Decide: dec, Keys: keys})
	if err != nil {
		return err
	}
	// The runner stops before the router (deferred in reverse order): the step running
	// finishes through a live router, the rest is handed to the next start.
	exCtx, exCancel := context.WithCancel(context.WithoutCancel(ctx))
	exDone := make(chan struct{})
	go func() {
		if err := execs.Run(exCtx); err != nil {
			log.Error("executions runner", "err", err)
		}
		close(exDone)
	}()
	defer func() { exCancel(); <-exDone }()

	deps := &handlers.Deps{Pool: d.Pool, Auth: authSvc, Logger: log, Version: version, StartedAt: start,
		Embedded: d.Cluster != nil, SecureCookies: c.SecureCookies, Registry: reg, MCP: mcp,
		Tools: toolSvc, Router: rt, Runs: router.NewRuns(rt), Executions: execs, Decide: dec,
		Denials: audit.NewDenials(d.Pool, &audit.DenialOptions{Logger: log}), TrustedProxies: c.TrustedProxies}
	srv := web.New(deps, bus)

	if d.Cluster != nil && !d.Cluster.Owned() {
		log.Warn("database: another toolwarden process started this data dir's PostgreSQL; when it exits, the database stops under this server")
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another toolwarden running? set --addr)", c.Addr, err)
	}
	httpSrv := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()

	go pruneLoop(runCtx, d.Pool, authSvc, reg, log)

	select {
	case <-bus.Ready():
	case <-ctx.Done():
	}
	url := "http://" + ln.Addr().String()
	log.Info("toolwarden ready", "url", url, "version", version, "took", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(stdout, "Toolwarden is ready at %s\n", url)
	if c.readyFile != "" {
		_ = os.WriteFile(c.readyFile, []byte(ln.Addr().String()), 0o600)
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
	}
	srv.Shutdown()
	shCtx, shCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer shCancel()
	if err := httpSrv.Shutdown(shCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}

// healthRetention is how long server health checks are kept.
const healthRetention = 7 * 24 * time.Hour

// eventRetention is how long events are kept for websocket clients to catch up on,
// except an execution's own, which are its log.
const eventRetention = 7 * 24 * time.Hour

// pruneLoop removes ended sessions, old sign-in failures and old health checks every
// few minutes.
func pruneLoop(ctx context.Context, pool *pgxpool.Pool, a *auth.Service, reg *registry.Service, log interface{ Warn(string, ...any) }) {
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.Prune(ctx); err != nil && ctx.Err() == nil {
				log.Warn("prune sessions", "err", err)
			}
			if _, err := reg.PruneHealth(ctx, healthRetention); err != nil && ctx.Err() == nil {
				log.Warn("prune health checks", "err", err)
			}
			if _, err := events.Prune(ctx, pool, time.Now().Add(-eventRetention), executions.TopicOf("")); err != nil && ctx.Err() == nil {
				log.Warn("prune events", "err", err)
			}
		}
	}
}

// confinement is what stdio servers must not reach (DESIGN §8): the data dir (embedded
// database and its socket, secret key, workspaces), the secret key file wherever it is,
// and the unix socket of an external database.
func confinement(c config) (confine.Spec, error) {
	hide := []string{c.DataDir, secretKeyPath(c)}
	if c.DatabaseURL != "" {
		socks, err := db.SocketPaths(c.DatabaseURL)
		if err != nil {
			return confine.Spec{}, err
		}
		hide = append(hide, socks...)
	}
	return confine.Spec{Hide: hide, Required: c.Confine == "required", Off: c.Confine == "off"}, nil
}

func secretKeyPath(c config) string {
	if c.SecretKeyFile != "" {
		return c.SecretKeyFile
	}
	return filepath.Join(c.DataDir, "secret.key")
}
