// Command toolwarden is the Toolwarden control plane: `toolwarden serve` runs the web
// UI, API and websocket; other subcommands manage the database, users, tokens and the
// audit log (docs/api.md). This is the only package that reads flags or the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolwarden/toolwarden/services/db"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// errUsage means the command line was wrong; the message has been printed.
var errUsage = errors.New("usage")

// exitError carries a specific exit code.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// codedError is an error main prints, as any other, but exits with code: for a command
// whose exit status tells two kinds of failure apart (audit verify's broken chain from
// a check that could not run).
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts an orderly stop; a second one while it runs, a second or
	// more later, ends the process as the signal does by default. Two at once (a
	// terminal's Ctrl-C and a wrapper passing it on) are one request.
	go func() { <-ctx.Done(); time.Sleep(time.Second); stop() }()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var ee exitError
	var ce codedError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case errors.As(err, &ce):
		fmt.Fprintln(os.Stderr, "toolwarden:", err)
		os.Exit(ce.code)
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "toolwarden:", err)
		os.Exit(1)
	}
}

const usage = `Toolwarden — a control plane for MCP tools.

Usage:
  toolwarden serve                        run the web UI, API and websocket
  toolwarden migrate up|status            apply the pending database migrations, or show the version
  toolwarden migrate down N|down --to V   roll back N migrations, or to version V (serve stopped)
  toolwarden migrate force V              mark the database clean at version V after a failed migration
                                          was mended by hand (serve stopped)
  toolwarden user create --name N --role R [--display-name D] [--password-stdin]
  toolwarden token create --user N --name T [--expires-in-days D]
  toolwarden export [--out F]             write the whole configuration as YAML (no secret values)
  toolwarden import [--dry-run] [--prune] F
                                          import Toolwarden YAML (the whole configuration), or the servers
                                          of claude_desktop_config.json, .mcp.json or VS Code mcp.json
                                          (F "-" reads standard input)
  toolwarden audit verify [--checkpoint F] check the audit log's hash chain, and that it still reaches
                                          the newest signed checkpoint (or F; "-" reads standard input);
                                          exits 1 when it does not verify, 3 when it could not check
  toolwarden audit checkpoint [--out F]   sign the chain head (default into <data-dir>/checkpoints)
  toolwarden secrets rotate               add a key and re-encrypt every stored secret with it
  toolwarden secrets retire-key ID        remove an old key once no stored secret needs it
  toolwarden secrets status               the keys and how many stored secrets each seals
  toolwarden pg-template [--out DIR]      make the cluster template a first start copies instead of
                                          running initdb (make build runs it)
  toolwarden version

Every command but pg-template and version takes --data-dir and --database-url; run
'toolwarden <command> -h' for its flags.
`

// run dispatches a command line; main and the tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, rest, stdout, stderr)
	case "user":
		if len(rest) == 0 || rest[0] != "create" {
			fmt.Fprintln(stderr, "usage: toolwarden user create --name N --role R [--display-name D] [--password-stdin]")
			return errUsage
		}
		return cmdUserCreate(ctx, rest[1:], stdin, stdout, stderr)
	case "token":
		if len(rest) == 0 || rest[0] != "create" {
			fmt.Fprintln(stderr, "usage: toolwarden token create --user N --name T [--expires-in-days D]")
			return errUsage
		}
		return cmdTokenCreate(ctx, rest[1:], stdout, stderr)
	case "export":
		return cmdExport(ctx, rest, stdout, stderr)
	case "import":
		return cmdImport(ctx, rest, stdin, stdout, stderr)
	case "audit":
		switch {
		case len(rest) > 0 && rest[0] == "verify":
			return cmdAuditVerify(ctx, rest[1:], stdin, stdout, stderr)
		case len(rest) > 0 && rest[0] == "checkpoint":
			return cmdAuditCheckpoint(ctx, rest[1:], stdout, stderr)
		}
		fmt.Fprintln(stderr, "usage: toolwarden audit verify [--checkpoint F] | toolwarden audit checkpoint [--out F]")
		return errUsage
	case "secrets":
		return cmdSecrets(ctx, rest, stdout, stderr)
	case "pg-template":
		return cmdPGTemplate(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "toolwarden", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "toolwarden: unknown command %q\n\n%s", cmd, usage)
	return errUsage
}

// config is every setting, from flags that default from the environment (flag wins).
type config struct {
	Addr          string
	DatabaseURL   string
	DataDir       string
	SecretKeyFile string
	AdminPassword string
	LLMURL        string
	LLMModel      string
	LLMAPIKey     string
	LogLevel      string
	SecureCookies bool
	RateLimit     int // tool calls a minute per user; negative: none
	// SnapshotBudget bounds the built-in tools' snapshot store (--snapshot-budget).
	SnapshotBudget int64
	// TrustedProxies are the proxies whose X-Forwarded-For is believed (--trusted-proxy).
	TrustedProxies []netip.Prefix
	// TokenDefaultTTL is --token-default-ttl.
	TokenDefaultTTL time.Duration
	// MaxMessageSize caps each message an MCP server sends, in bytes.
	MaxMessageSize int
	// Confine is how stdio servers run: auto, required or off (--confine).
	Confine string
	// TemplateMaxTimeout caps every template tool's timeout (--template-max-timeout).
	TemplateMaxTimeout time.Duration
	// PGTemplate is the embedded cluster's template folder (--pg-template).
	PGTemplate string
	fastDB     bool // tests only: fsync off
	// MigrateDatabaseURL is the external database as the tables' owner (migrations);
	// empty: DatabaseURL.
	MigrateDatabaseURL string
	readyFile          string
}

// parseProxies reads --trusted-proxy: CIDRs (or single addresses) separated by commas
// or spaces.
func parseProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxy: %q is neither a CIDR (10.0.0.0/8) nor an address (10.0.0.1)", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// envOr is environment variable key, or def when it is unset.
func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// commonFlags registers what every command takes.
func commonFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.DatabaseURL, "database-url", envOr("DATABASE_URL", ""), "external PostgreSQL URL (env DATABASE_URL); empty runs the embedded PostgreSQL")
	fs.StringVar(&c.MigrateDatabaseURL, "migrate-database-url", envOr("TOOLWARDEN_MIGRATE_DATABASE_URL", ""), "external PostgreSQL URL as the tables' owner, for migrations; empty: --database-url (env TOOLWARDEN_MIGRATE_DATABASE_URL)")
	fs.StringVar(&c.DataDir, "data-dir", envOr("TOOLWARDEN_DATA_DIR", "./data"), "data directory: embedded database, secret key, workspaces (env TOOLWARDEN_DATA_DIR)")
	fs.StringVar(&c.LogLevel, "log-level", envOr("TOOLWARDEN_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env TOOLWARDEN_LOG_LEVEL)")
	fs.StringVar(&c.PGTemplate, "pg-template", envOr("TOOLWARDEN_PG_TEMPLATE", db.DefaultTemplateDir()), "cluster template a new embedded PostgreSQL is copied from when it fits (made by 'toolwarden pg-template'; empty: always initdb) (env TOOLWARDEN_PG_TEMPLATE)")
	c.fastDB = os.Getenv("TOOLWARDEN_TEST_FAST_DB") == "1"
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// takesArguments are the commands (flag set names) that read words besides flags from
// fs.Args() themselves; parse refuses a leftover word to every other.
var takesArguments = map[string]bool{"migrate": true, "import": true, "secrets retire-key": true}

// parse parses args into fs. A command that takes no arguments (not in takesArguments)
// refuses a leftover word, naming it: Go's parser stops at the first word that is not a
// flag, so every flag after a stray word was dropped in silence (`token create ... ci
// --expires-in-days 0` made a 90-day token).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitError{0}
		}
		return errUsage
	}
	if fs.NArg() > 0 && !takesArguments[fs.Name()] {
		return refuseArgs(fs, fs.Args())
	}
	return checkLogLevel(fs)
}

// refuseArgs is the usage error of a command given words it does not take, printed on
// fs's output.
func refuseArgs(fs *flag.FlagSet, extra []string) error {
	dropped := ""
	if len(extra) > 1 {
		dropped = "; nothing after it was read: " + strings.Join(extra[1:], " ")
	}
	fmt.Fprintf(fs.Output(), "toolwarden %s: unexpected argument %q (toolwarden %s takes flags only%s)\n", fs.Name(), extra[0], fs.Name(), dropped)
	return errUsage
}

// logLevels are the values --log-level takes.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// checkLogLevel refuses a --log-level (or TOOLWARDEN_LOG_LEVEL) that is not a level, as
// a usage error printed on fs's output: such a value was taken for info in silence. It
// sets the flag to its lower-case name, which openDB compares with "info"; empty counts
// as unset (info), as an empty variable does for serve's other flags.
func checkLogLevel(fs *flag.FlagSet) error {
	f := fs.Lookup("log-level")
	if f == nil {
		return nil
	}
	v := strings.ToLower(strings.TrimSpace(f.Value.String()))
	if v == "" {
		v = "info"
	}
	if _, ok := logLevels[v]; !ok {
		fmt.Fprintf(fs.Output(), "toolwarden %s: --log-level: %q is not one of debug, info, warn, error (TOOLWARDEN_LOG_LEVEL too)\n", fs.Name(), f.Value.String())
		return errUsage
	}
	return f.Value.Set(v)
}

// newLogger logs at level, one of logLevels (checkLogLevel); info for any other.
func newLogger(w io.Writer, level string) *slog.Logger {
	l, ok := logLevels[strings.ToLower(level)]
	if !ok {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
