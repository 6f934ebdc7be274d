package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/verr"
)

// openDB opens the configured database for a one-off command: it attaches to the
// embedded cluster when `serve` is running on the same data dir, else starts it for the
// duration of the command.
func openDB(ctx context.Context, c config, migrate bool, stderr io.Writer) (*db.DB, error) {
	log := newLogger(stderr, "warn")
	if c.LogLevel != "info" {
		log = newLogger(stderr, c.LogLevel)
	}
	return db.Open(ctx, db.Config{URL: c.DatabaseURL, MigrateURL: c.MigrateDatabaseURL, DataDir: c.DataDir, Migrate: migrate,
		Cluster: &db.ClusterOptions{Fast: c.fastDB, Logger: log, Template: c.PGTemplate}})
}

// openDBAsOwner is openDB connected as the tables' owner (--migrate-database-url; the
// superuser of the embedded cluster), never migrating.
func openDBAsOwner(ctx context.Context, c config, stderr io.Writer) (*db.DB, error) {
	log := newLogger(stderr, "warn")
	if c.LogLevel != "info" {
		log = newLogger(stderr, c.LogLevel)
	}
	return db.Open(ctx, db.Config{URL: c.DatabaseURL, MigrateURL: c.MigrateDatabaseURL, Owner: true, DataDir: c.DataDir,
		Cluster: &db.ClusterOptions{Fast: c.fastDB, Logger: log, Template: c.PGTemplate}})
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	fs := newFlagSet("migrate", stderr)
	commonFlags(fs, &c)
	var to int
	decimalVar(fs, &to, "to", 0, 0, "a migration's version in decimal, such as 40, or 0 for none",
		"with down: the version to roll back to, one of this release's migrations below the database's (migrate status shows it), instead of N")
	dropAll := fs.Bool("drop-all-data", false, "with down: allow rolling back every migration, to version 0, which drops every Toolwarden table and "+
		"what it holds (the audit log, users, secrets, the job queue)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolwarden migrate up|down N|down --to V|force V|status [flags]")
		fs.PrintDefaults()
	}
	// Accept flags before or after the action: `migrate status --data-dir d` and
	// `migrate --data-dir d status` both work.
	var rest []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		rest, args = append(rest, args[0]), args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	rest = append(rest, fs.Args()...)
	if len(rest) == 0 {
		fs.Usage()
		return errUsage
	}
	steps := 0
	toGiven := flagGiven(fs, "to")
	if rest[0] != "down" && (toGiven || *dropAll) {
		fmt.Fprintf(stderr, "toolwarden migrate %s: --to and --drop-all-data go with down only\n", rest[0])
		return errUsage
	}
	switch rest[0] {
	case "up", "status":
	case "down":
		if len(rest) != 2 && !toGiven || len(rest) != 1 && toGiven {
			fmt.Fprintln(stderr, "usage: toolwarden migrate down N (N = how many migrations to roll back) | down --to V (V = the version to roll back to)")
			return errUsage
		}
		if !toGiven {
			n, err := strconv.Atoi(rest[1])
			if err != nil || n <= 0 {
				fmt.Fprintf(stderr, "toolwarden migrate down: N must be a positive number, got %q\n", rest[1])
				return errUsage
			}
			steps = n
		}
	case "force":
		// After a migration failed half way and the schema was mended by hand: record the
		// version it now matches, running nothing (services/db Migrator.Force).
		if len(rest) != 2 {
			fmt.Fprintln(stderr, "usage: toolwarden migrate force V (V = the last migration the database now holds whole; 0 for none)")
			return errUsage
		}
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "toolwarden migrate force: V must be 0 or a migration's number, got %q\n", rest[1])
			return errUsage
		}
		steps = n
	default:
		fs.Usage()
		return errUsage
	}
	d, err := openDBAsOwner(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	mg, err := db.NewMigrator(d.OwnerURL)
	if err != nil {
		return err
	}
	defer mg.Close()
	var stopped error
	switch rest[0] {
	case "up":
		// ctx ends at SIGINT/SIGTERM (main): MigrateContext then stops between two
		// migrations, never inside one, and says which it applied as it goes.
		log := newLogger(stderr, c.LogLevel)
		if err := db.MigrateContext(ctx, d.OwnerURL, log); err != nil {
			if ctx.Err() == nil {
				return err
			}
			stopped = err
		}
	case "down":
		// Checked before anything runs: Down and DownTo refuse a count or a version the
		// database cannot roll back by, and version 0 takes the confirmation.
		target := uint(to)
		if !toGiven {
			if target, err = mg.DownTarget(steps); err != nil {
				return err
			}
		}
		if target == 0 && !*dropAll {
			return errors.New("toolwarden migrate down: that rolls back every migration, to version 0, dropping every Toolwarden table " +
				"and what it holds (the audit log, users, secrets, the job queue); nothing was rolled back. To go back to an older " +
				"release, roll back to its newest migration (migrate down --to V); to remove Toolwarden's schema for good, add --drop-all-data")
		}
		if toGiven {
			err = mg.DownTo(target)
		} else {
			err = mg.Down(steps)
		}
		if err != nil {
			return err
		}
	case "force":
		if err := mg.Force(uint(steps)); err != nil {
			return err
		}
	}
	st, err := mg.Status()
	if err != nil {
		return err
	}
	state := "current"
	switch {
	case st.Dirty:
		state = "dirty: a migration failed half way; make the schema match one version by hand, then `toolwarden migrate force V`"
	case st.Version < st.Latest:
		state = fmt.Sprintf("%d pending", len(pending(st.Version)))
	case st.Version > st.Latest:
		state = "newer than this binary: a later release migrated it; run that release, or its `migrate down`"
	}
	fmt.Fprintf(stdout, "version %d of %d (%s)\n", st.Version, st.Latest, state)
	if stopped != nil {
		if st.Dirty {
			return stopped
		}
		return fmt.Errorf("migrate up stopped by a signal between two migrations, at version %d of %d (clean); "+
			"`toolwarden migrate up` applies the rest: %w", st.Version, st.Latest, stopped)
	}
	return nil
}

func pending(v uint) []uint {
	var out []uint
	for _, m := range db.MigrationVersions() {
		if m > v {
			out = append(out, m)
		}
	}
	return out
}

func cmdUserCreate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c config
	var name, role, display string
	var pwStdin bool
	fs := newFlagSet("user create", stderr)
	commonFlags(fs, &c)
	fs.StringVar(&name, "name", "", "username (required)")
	fs.StringVar(&role, "role", "", "role: admin, tool_manager, tool_user, auditor, guest (required)")
	fs.StringVar(&display, "display-name", "", "display name")
	fs.BoolVar(&pwStdin, "password-stdin", false, "read the password from the first line of standard input; otherwise a random one is printed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if name == "" || role == "" {
		fmt.Fprintln(stderr, "toolwarden user create: --name and --role are required")
		return errUsage
	}
	var pw string
	if pwStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read password: %w", err)
		}
		pw = strings.TrimRight(line, "\r\n")
		if pw == "" {
			return errors.New("--password-stdin: standard input held no password")
		}
	}
	d, err := openDB(ctx, c, true, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	svc := auth.New(d.Pool, nil)
	u, generated, err := svc.CreateUser(ctx, cliActor(), auth.NewUser{Username: name, DisplayName: display, Role: auth.Role(role), Password: pw})
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(stdout, "created user %s (%s)\n", u.Username, u.Role)
	if generated != "" {
		fmt.Fprintf(stdout, "password: %s\n", generated)
	}
	return nil
}

func cmdTokenCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	var user, name string
	var days int
	fs := newFlagSet("token create", stderr)
	commonFlags(fs, &c)
	fs.StringVar(&user, "user", "", "username the token acts for (required)")
	fs.StringVar(&name, "name", "", "token name (required)")
	// Decimal, and never negative given (-1, the default, takes the default lifetime: a
	// negative count given took it without a word).
	decimalVar(fs, &days, "expires-in-days", -1, 0, "a whole number of days in decimal, such as 30, or 0 for never",
		"days until the token expires; 0 never; default: env TOOLWARDEN_TOKEN_DEFAULT_TTL, 90 days when unset")
	if err := parse(fs, args); err != nil {
		return err
	}
	if user == "" || name == "" {
		fmt.Fprintln(stderr, "toolwarden token create: --user and --name are required")
		return errUsage
	}
	// Before the database: a bad value must not migrate or start anything first.
	ttl, err := tokenDefaultTTL(envOr("TOOLWARDEN_TOKEN_DEFAULT_TTL", ""))
	if err != nil {
		fmt.Fprintln(stderr, "toolwarden token create: TOOLWARDEN_TOKEN_DEFAULT_TTL:", err)
		return errUsage
	}
	d, err := openDB(ctx, c, true, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	svc := auth.New(d.Pool, &auth.Options{TokenDefaultTTL: ttl})
	u, err := svc.GetUserByName(ctx, user)
	if errors.Is(err, auth.ErrNotFound) {
		return fmt.Errorf("no user named %q", user)
	}
	if err != nil {
		return err
	}
	plain, tok, err := svc.CreateToken(ctx, cliActor(), u.ID, auth.NewToken{Name: name, ExpiresInDays: expiresIn(days)})
	if err != nil {
		return explain(err)
	}
	fmt.Fprintf(stderr, "created token %q (%s…) for %s; it is shown only now:\n", tok.Name, tok.Prefix, u.Username)
	// The token is the last line of standard output (docs/api.md).
	fmt.Fprintln(stdout, plain)
	return nil
}

// cliActor is who the audit log records for a command run at the terminal.
func cliActor() audit.Actor {
	name := "cli"
	if u := os.Getenv("USER"); u != "" {
		name = "cli:" + u
	}
	return audit.Actor{Kind: audit.ActorSystem, Name: name}
}

// explain turns field errors into a message that names the flag to fix.
func explain(err error) error {
	var ve *verr.Error
	ce, _ := fault.As(err)
	switch {
	case errors.As(err, &ve):
		parts := make([]string, len(ve.Fields))
		for i, f := range ve.Fields {
			parts[i] = f.Field + " " + f.Message
		}
		return errors.New(strings.Join(parts, "; "))
	case ce != nil && ce.Kind == fault.KindConflict:
		return errors.New(ce.Message)
	}
	return err
}

// openKeyring loads the secret key file, creating it first on a first run; created
// says this call made it.
func openKeyring(c config) (keys *secrets.Keyring, created bool, err error) {
	path := secretKeyPath(c)
	if created, err = ensureSecretKey(path); err != nil {
		return nil, false, err
	}
	keys, err = secrets.LoadKeyring(path)
	return keys, created, err
}

// ensureSecretKey creates the key used to encrypt secrets at rest on first run: 32
// random bytes, base64, in a file only the owner can read. created says it made it.
func ensureSecretKey(path string) (created bool, err error) {
	st, err := os.Stat(path)
	if err == nil {
		if st.Mode().Perm()&0o077 != 0 {
			return false, fmt.Errorf("secret key file %s is readable by others (mode %o): chmod 600 it", path, st.Mode().Perm())
		}
		return false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("secret key file: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	// Whole or not at all, and durable before anything is sealed with it: an empty file
	// left by a crash or a full disk would fail every later start, and a name lost in a
	// power cut would lose the key of values the database kept. Exclusive still: a key
	// made meanwhile by another process is never replaced.
	if err := atomicfile.WriteNew(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n")); err != nil {
		return false, fmt.Errorf("create secret key file: %w", err)
	}
	return true, nil
}

// exitNoPostgres is pg-template's exit code when no PostgreSQL is installed.
const exitNoPostgres = 3

// cmdPGTemplate makes the embedded cluster's template (`make build` runs it): a first
// start then copies a migrated cluster instead of creating one.
func cmdPGTemplate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pg-template", stderr)
	out := fs.String("out", envOr("TOOLWARDEN_PG_TEMPLATE", db.DefaultTemplateDir()), "folder to make the template in (env TOOLWARDEN_PG_TEMPLATE)")
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: toolwarden pg-template [--out DIR]"); fs.PrintDefaults() }
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	start := time.Now()
	made, err := db.MakeTemplate(ctx, *out, newLogger(stderr, "warn"))
	if errors.Is(err, db.ErrNoPostgres) {
		// Its own exit code: make build goes on without a template then, and fails
		// on any other error.
		fmt.Fprintln(stderr, "toolwarden:", err)
		return exitError{exitNoPostgres}
	}
	if err != nil {
		return err
	}
	if made {
		fmt.Fprintf(stdout, "made the cluster template in %s (%s): a first start copies it instead of running initdb\n", *out, time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Fprintf(stdout, "the cluster template in %s is current\n", *out)
	}
	return nil
}
