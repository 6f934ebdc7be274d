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
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
		// `migrate up 1` applied every pending migration: up takes no count.
		if len(rest) > 1 {
			fmt.Fprintf(stderr, "toolwarden migrate %s: unexpected argument %q (migrate %s takes flags only)\n", rest[0], rest[1], rest[0])
			return errUsage
		}
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
	changesSchema := rest[0] == "down" || rest[0] == "force"
	if changesSchema && c.DatabaseURL == "" {
		release, err := holdDataDir(c, "migrate "+rest[0])
		if err != nil {
			return err
		}
		defer release()
	}
	// down and force have nothing to act on without a cluster; status on a data dir that
	// does not exist (a mistyped --data-dir) would make one there and call it empty. On
	// an existing dir status does make the cluster (docs/deploy.md's restore uses that).
	if _, err := os.Stat(c.DataDir); rest[0] != "up" && (rest[0] != "status" || errors.Is(err, os.ErrNotExist)) {
		if err := clusterExists(c, "migrate "+rest[0]); err != nil {
			return err
		}
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
	var from db.MigrationStatus
	if changesSchema {
		if from, err = mg.Status(); err != nil {
			return err
		}
	}
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
	if changesSchema {
		if err := auditSchemaChange(ctx, d, rest[0], from, st.Version, stderr); err != nil {
			return err
		}
	}
	if stopped != nil {
		if st.Dirty {
			return stopped
		}
		return fmt.Errorf("migrate up stopped by a signal between two migrations, at version %d of %d (clean); "+
			"`toolwarden migrate up` applies the rest: %w", st.Version, st.Latest, stopped)
	}
	return nil
}

// holdDataDir takes the data dir's serve lock for a migrate down or force on the
// embedded cluster, refusing while a serve holds it: the schema would change under the
// queries and the job queue of a running server (which a down can leave failing, and
// a force's mended schema not match), and a serve started meanwhile would migrate up.
// Held until release, so none starts before the command ends. A data dir without a
// cluster is refused: there is nothing to roll back, and opening would run initdb.
func holdDataDir(c config, cmd string) (release func(), err error) {
	if _, err := os.Stat(c.DataDir); err == nil {
		l, err := lockDataDirAs(c.DataDir, cmd)
		var locked errDataDirLocked
		if errors.As(err, &locked) {
			// The holder as its lock file names it: another migrate down or force is
			// waited for, not stopped.
			if locked.cmd != "" && locked.cmd != "serve" {
				return nil, fmt.Errorf("toolwarden %s: %s is running on the data dir %s: let it finish, then run %s again; nothing was changed",
					cmd, locked.holder(), locked.dir, cmd)
			}
			return nil, fmt.Errorf("toolwarden %s: %s is running on the data dir %s: stop it first, then run %s again "+
				"(changing the schema under a running server breaks what it is doing); nothing was changed", cmd, locked.holder(), locked.dir, cmd)
		}
		if err != nil {
			return nil, err
		}
		release = l.release
	}
	if err := clusterExists(c, cmd); err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	return release, nil
}

// auditSchemaChange records a migrate down or force in the audit log (schema.migrate_down,
// schema.migrate_force), from the version before to the version now, as the tables'
// owner. Below the migration that made the audit log there is none to write to, and
// that is said instead. Not announced on the events topic: no serve runs on this
// database now (embedded) or its replicas answer 503 until migrated (external), and the
// events table may be older than this binary's.
func auditSchemaChange(ctx context.Context, d *db.DB, cmd string, from db.MigrationStatus, to uint, stderr io.Writer) error {
	ctx = context.WithoutCancel(ctx) // the schema has changed: record it even after a signal
	has, err := audit.LogExists(ctx, d.Pool)
	if err != nil {
		return fmt.Errorf("toolwarden migrate %s: the database is at version %d now, but its audit log could not be read: %w", cmd, to, err)
	}
	if !has {
		fmt.Fprintf(stderr, "toolwarden migrate %s: no audit entry: at version %d the database has no audit log\n", cmd, to)
		return nil
	}
	payload := map[string]any{"from": from.Version, "to": to}
	if cmd == "force" {
		payload["from_dirty"] = from.Dirty
	}
	e := audit.Entry{Actor: cliActor(), Action: "schema.migrate_" + cmd, TargetType: "schema", TargetID: strconv.FormatUint(uint64(to), 10),
		TargetName: fmt.Sprintf("version %d", to), Payload: payload}
	err = db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
		_, _, err := audit.AppendBatchQuiet(ctx, tx, []audit.Entry{e})
		return err
	})
	if err != nil {
		return fmt.Errorf("toolwarden migrate %s: the database is at version %d now, but the audit entry saying so could not be written: %w", cmd, to, err)
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
	// user create may be the first command on a new machine (an administrator made
	// before the first serve, which then makes none), so it creates the cluster; but it
	// says so, as a mistyped --data-dir does the same.
	if clusterExists(c, "user create") != nil {
		fmt.Fprintf(stderr, "toolwarden user create: %s holds no database yet: creating one there (is --data-dir right?)\n", c.DataDir)
	}
	d, err := openDB(ctx, c, true, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	svc := auth.New(d.Pool, nil)
	u, generated, err := svc.CreateUser(ctx, cliActor(), auth.NewUser{Username: name, DisplayName: display, Role: auth.Role(role), Password: pw})
	if err != nil {
		return explain(err, userFlags)
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
	// A new cluster holds no user, so a token for one cannot be made there: a mistyped
	// --data-dir is refused before initdb and the migrations run in it.
	if err := clusterExists(c, "token create"); err != nil {
		return err
	}
	d, err := openDB(ctx, c, true, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	svc := auth.New(d.Pool, &auth.Options{TokenDefaultTTL: ttl})
	u, err := svc.GetUserByName(ctx, user)
	if errors.Is(err, auth.ErrNotFound) {
		return fmt.Errorf("no user named %q in %s: is the name right (toolwarden user create makes one), and is that the database serve uses?", user, searched(c))
	}
	if err != nil {
		return err
	}
	plain, tok, err := svc.CreateToken(ctx, cliActor(), u.ID, auth.NewToken{Name: name, ExpiresInDays: expiresIn(days)})
	if err != nil {
		return explain(err, tokenFlags)
	}
	fmt.Fprintf(stderr, "created token %q (%s…) for %s; it is shown only now:\n", tok.Name, tok.Prefix, u.Username)
	// The token is the last line of standard output (docs/api.md).
	fmt.Fprintln(stdout, plain)
	return nil
}

// searched says which database a command looked in: the embedded cluster's data dir, or
// the host and name of --database-url (never its password).
func searched(c config) string {
	if c.DatabaseURL == "" {
		return "the database of the data dir " + c.DataDir
	}
	if pc, err := pgconn.ParseConfig(c.DatabaseURL); err == nil {
		return fmt.Sprintf("the database %s on %s (--database-url)", pc.Database, pc.Host)
	}
	return "the database of --database-url"
}

// cliActor is who the audit log records for a command run at the terminal.
func cliActor() audit.Actor {
	sudoUser := ""
	if startedBySudo(os.Getppid()) {
		sudoUser = os.Getenv("SUDO_USER")
	}
	return audit.Actor{Kind: audit.ActorSystem, Name: cliActorName(os.Getuid(), user.LookupId, sudoUser)}
}

// cliActorName is "cli:<account>", the account the process runs as looked up by its uid:
// $USER is whatever the caller set (USER=alice blamed alice), and user.Current falls
// back to it in a build without cgo when the uid is not in /etc/passwd, so LookupId,
// which does not, names it, or the uid alone when nothing does. Under sudo (-u
// toolwarden, as docs/deploy.md runs the commands) every operator would be the same
// account: who ran sudo (sudoUser, "" when not started by sudo) is added.
func cliActorName(uid int, lookup func(string) (*user.User, error), sudoUser string) string {
	id := strconv.Itoa(uid)
	name := "cli:uid " + id
	if u, err := lookup(id); err == nil && u.Username != "" {
		name = "cli:" + u.Username
	}
	if sudoUser != "" && "cli:"+sudoUser != name {
		name += " (sudo by " + sudoUser + ")"
	}
	return name
}

// startedBySudo reports whether the parent process is sudo: named sudo and running as
// root, as only the setuid sudo (or its use_pty monitor) is; a program an account names
// sudo runs as that account. $SUDO_USER is then sudo's word on who ran it (only a
// sudoer the policy lets set variables or run any command, env included, can change
// it); anywhere else anyone sets it (SUDO_USER=alice blamed alice), so it is left out
// rather than recorded as a fact it is not. A shell started by sudo -s or -i is no
// sudo: commands run from it record the account alone.
func startedBySudo(ppid int) bool {
	if ppid <= 1 {
		return false
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil {
		return false
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/status")
	if err != nil {
		return false
	}
	return isSudoProcess(string(comm), string(status))
}

// isSudoProcess is startedBySudo's test of a process's /proc comm and status: the name
// sudo, and an effective uid of 0 (the status's "Uid:" line: real, effective, saved, fs).
func isSudoProcess(comm, status string) bool {
	if strings.TrimSpace(comm) != "sudo" {
		return false
	}
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			return len(f) >= 2 && f[1] == "0"
		}
	}
	return false
}

// explain turns field errors into a message that names the flag to fix: flags maps the
// API's field names (expires_in_days) to the command's flags (--expires-in-days); a
// field it does not list keeps its name.
func explain(err error, flags map[string]string) error {
	var ve *verr.Error
	ce, _ := fault.As(err)
	switch {
	case errors.As(err, &ve):
		parts := make([]string, len(ve.Fields))
		for i, f := range ve.Fields {
			name := f.Field
			if flag, ok := flags[name]; ok {
				name = flag
			}
			parts[i] = name + ": " + f.Message
		}
		return errors.New(strings.Join(parts, "; "))
	case ce != nil && ce.Kind == fault.KindConflict:
		return errors.New(ce.Message)
	}
	return err
}

// userFlags and tokenFlags are the flags of user create and token create that set
// auth's fields.
var (
	userFlags  = map[string]string{"username": "--name", "role": "--role", "display_name": "--display-name", "password": "--password-stdin"}
	tokenFlags = map[string]string{"name": "--name", "expires_in_days": "--expires-in-days", "user": "--user"}
)

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
