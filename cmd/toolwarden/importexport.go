package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// exitNotApplied is import's exit code when it applied the file but named some of it
// under "Not applied": a CI job applying configuration must not take that for success.
const exitNotApplied = 3

// maxImportSize bounds what `import` reads; real configuration files are kilobytes.
const maxImportSize = 4 << 20

// cmdExport writes the whole configuration as YAML (configuration as code, seed 004
// scenario 4; services/configcode): servers, categories, tools' settings, permissions,
// compensations, test cases and settings. It needs no secret key: secret values are
// never exported, so nothing is decrypted.
func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	var out string
	fs := newFlagSet("export", stderr)
	commonFlags(fs, &c)
	fs.StringVar(&out, "out", "", "write to this file instead of standard output: replaced atomically (mode 0600 when new) through a symbolic link, written to directly when it is a pipe or a device")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolwarden export [--out F] [flags]\n\nWrites the whole configuration as YAML (servers, categories, tools' states and\nsettings, permissions, compensations, test cases, settings), without secret values.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil { // a stray word is refused there
		return err
	}
	// Read-only, like `audit verify`: exporting must not migrate the schema.
	if err := clusterExists(c, "export"); err != nil {
		return err
	}
	d, err := openDB(ctx, c, false, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	if st, err := db.CurrentMigration(ctx, d.Pool); err != nil {
		return err
	} else if st.Version == 0 {
		return errors.New("this database has no Toolwarden schema yet: nothing to export")
	}
	data, err := configcode.New(d.Pool, registry.New(d.Pool, nil, nil), tools.New(d.Pool, nil, nil), nil).Export(ctx)
	if err != nil {
		return err
	}
	if out == "" || out == "-" {
		_, err := stdout.Write(data)
		return err
	}
	if err := writeExport(out, data); err != nil {
		return fmt.Errorf("export: write %s: %w", out, err)
	}
	fmt.Fprintf(stderr, "exported the configuration to %s\n", out)
	return nil
}

// writeExport writes data to out: replaced atomically when it is a regular file or
// none (atomicfile.Write, which writes through symbolic links), written to directly when
// it is anything else (/dev/stdout, /dev/fd/N, a pipe, a device): an export is a
// stream there, and such a file cannot be replaced, only written to. os.Stat follows
// /proc's links to pipes, which have no name to resolve to.
func writeExport(out string, data []byte) error {
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().IsRegular() {
		return atomicfile.Write(out, data)
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	f, err := os.OpenFile(out, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// clusterExists refuses a command that only reads when the data dir holds no embedded
// cluster (a new or mistyped --data-dir): opening it would run initdb and create one.
func clusterExists(c config, cmd string) error {
	if c.DatabaseURL != "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.DataDir, "pg", "data", "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("toolwarden %s: %s holds no database (no embedded PostgreSQL cluster), and %s creates nothing: is --data-dir right?", cmd, c.DataDir, cmd)
	}
	return nil
}

// schemaCurrent refuses a database whose schema is not this build's: a dry run does
// not migrate, and plans only against what an import would apply to.
func schemaCurrent(ctx context.Context, d *db.DB) error {
	st, err := db.CurrentMigration(ctx, d.Pool)
	switch {
	case err != nil:
		return fmt.Errorf("%w (a dry run does not create the schema: run toolwarden migrate up first)", err)
	case st.Version == 0:
		return errors.New("this database has no Toolwarden schema yet, and a dry run creates nothing: run toolwarden migrate up first, or import without --dry-run")
	case st.Dirty || st.Version != st.Latest:
		return fmt.Errorf("this database's schema is at version %d (dirty %v), this toolwarden's is %d, and a dry run does not migrate: run toolwarden migrate up first", st.Version, st.Dirty, st.Latest)
	}
	return nil
}

// importKeyring opens the secret key file (creating it on a first run, when the
// database holds nothing sealed yet and records no key serve used; a dry run then uses a
// key it forgets) and checks it holds every key the database's secrets were sealed with
// and one serve recorded (secretkeys.FileFits): run without serve's --secret-key-file, an import
// would otherwise create a new key, fail to compare, and seal new secrets serve cannot
// open. Keys in lost (--lost-keys, as serve's) are not required: after serve started
// without them, the values still under them (tools' past configurations too) would
// otherwise refuse every import.
func importKeyring(ctx context.Context, c config, d *db.DB, keyMissing, dryRun bool, lost []string) (*secrets.Keyring, error) {
	path := secretKeyPath(c)
	if keyMissing {
		if err := secretkeys.FileFits(ctx, d.Pool, nil, path, lost); err != nil {
			return nil, importKeyError(err)
		}
		if dryRun {
			k, err := secrets.GenerateKey()
			if err != nil {
				return nil, err
			}
			return secrets.NewKeyring(k)
		}
	}
	keys, _, err := openKeyring(c)
	if err != nil {
		return nil, err
	}
	if err := secretkeys.FileFits(ctx, d.Pool, keys, path, lost); err != nil {
		return nil, importKeyError(err)
	}
	return keys, nil
}

// importKeyError is import's refusal of a key file that lacks keys: the file may be the
// right one, and the keys lost for good, which only --lost-keys can say.
func importKeyError(err error) error {
	return fmt.Errorf("%w; nothing was imported. If those keys are lost for good (serve started with --lost-keys), name them in --lost-keys (TOOLWARDEN_LOST_KEYS) to import without them", err)
}

// cmdImport reads a configuration file (Toolwarden YAML, claude_desktop_config.json,
// .mcp.json or VS Code's mcp.json), prints the plan (per server, category, tool and
// field, old → new), and applies it in one transaction unless --dry-run. ${env:NAME}
// and ${NAME} in the file's servers are expanded from this process's environment (but
// never Toolwarden's own settings: registry.OwnSetting), and so are the secret
// references of tools' parameters. Servers the file registers are discovered from here
// before their tools' settings apply (a second transaction). It exits exitNotApplied
// when it applied the file but not all of it.
func cmdImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c config
	var dryRun, prune bool
	fs := newFlagSet("import", stderr)
	commonFlags(fs, &c)
	fs.StringVar(&c.SecretKeyFile, "secret-key-file", envOr("TOOLWARDEN_SECRET_KEY_FILE", ""), "encryption key file; default <data-dir>/secret.key, created 0600 if missing (env TOOLWARDEN_SECRET_KEY_FILE)")
	fs.BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing; exits 3, as the import would, when the plan lists items under \"Not applied\"")
	lostKeys := fs.String("lost-keys", envOr("TOOLWARDEN_LOST_KEYS", ""), "ids of secret keys lost for good, as serve's --lost-keys: the import proceeds although the key file lacks them; the values still under them are left as they are (env TOOLWARDEN_LOST_KEYS)")
	fs.BoolVar(&prune, "prune", false, "delete registered servers and categories the file does not list (by default they are kept)")
	egressOf := egressFlags(fs)
	// The stdio servers the file registers are started to discover them: confined as
	// serve confines them, hiding the same files.
	confineMode := confineFlag(fs)
	cpKey := checkpointKeyFlag(fs)
	maxMessage := maxMessageFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolwarden import [--dry-run] [--prune] [flags] F\n\n"+
			"Imports the configuration in F (\"-\" for standard input): Toolwarden YAML from\n"+
			"'toolwarden export' (servers, categories, tools, settings), or the servers of a\n"+
			"claude_desktop_config.json, .mcp.json or VS Code's mcp.json. Prints what would change;\n"+
			"applies it unless --dry-run, and reports what it could not apply. Exit status: 0\n"+
			"all applied (a dry run: all would be), 3 applied except what it lists under\n"+
			"\"Not applied\" (a dry run: the plan lists such items, and nothing was changed),\n"+
			"2 a wrong command line, 1 any other error (the message says whether part was\n"+
			"imported).")
		fs.PrintDefaults()
	}
	// Flags may come before or after the file: `import f --dry-run` works too.
	var files []string
	for {
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return errUsage
	}
	policy, err := egressOf()
	if err != nil {
		fmt.Fprintln(stderr, "toolwarden import:", err)
		return errUsage
	}
	if err := setConfine(&c, *confineMode, "import", stderr); err != nil {
		return err
	}
	if err := envMaxMessage(fs, maxMessage); err != nil {
		return err
	}
	name, data, err := readImport(files[0], stdin)
	if err != nil {
		return err
	}
	file, err := configcode.Parse(name, data, registry.ParseOptions{ExpandEnv: true, LookupEnv: os.LookupEnv})
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, "nothing was imported")
		return exitError{1}
	}

	// Secrets in the file are encrypted, and stored ones decrypted to compare them,
	// with the key `serve` uses; a first run creates it as `serve` would. A dry run
	// creates nothing: no key, no schema, no migration.
	keyPath := secretKeyPath(c)
	_, statErr := os.Stat(keyPath)
	keyMissing := errors.Is(statErr, os.ErrNotExist)
	if !dryRun && (c.DatabaseURL == "" || c.SecretKeyFile == "") {
		if err := os.MkdirAll(c.DataDir, 0o711); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
	}
	if dryRun {
		if err := clusterExists(c, "import --dry-run"); err != nil {
			return err
		}
	}
	d, err := openDB(ctx, c, !dryRun, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	if dryRun {
		if err := schemaCurrent(ctx, d); err != nil {
			return err
		}
	}
	// Before the keyring: a key file in a directory that cannot be hidden is refused
	// before it is created.
	hide, warnings, err := confinement(c, *cpKey)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "toolwarden import: warning:", w)
	}
	keys, err := importKeyring(ctx, c, d, keyMissing, dryRun, parseLostKeys(*lostKeys))
	if err != nil {
		return err
	}
	reg := registry.New(d.Pool, keys, &registry.Options{Egress: policy})
	// Servers the file registers are discovered from here (a throwaway session each),
	// confined as serve confines them, before their tools' settings apply.
	mgr := mcpclient.New(reg, &mcpclient.Options{Version: version, InheritEnv: mcpclient.InheritedEnv(os.LookupEnv), Confine: hide,
		Egress: policy, MaxMessageBytes: int(*maxMessage)})
	cc := configcode.New(d.Pool, reg, tools.New(d.Pool, keys, nil), &configcode.Options{Discoverer: mgr, Logger: newLogger(stderr, "warn")})
	plan, err := cc.Plan(ctx, file, configcode.ImportOptions{Prune: prune, CompareSecrets: true, Actor: cliActor()})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, plan)
	switch {
	case plan.HasErrors():
		fmt.Fprintln(stderr, "toolwarden import: the plan has errors; nothing was imported")
		return exitError{1}
	case dryRun && len(plan.Unapplied) > 0:
		// As the import itself would exit: a CI job gating on a dry run must see it.
		fmt.Fprintln(stdout, "Dry run: nothing was changed.")
		fmt.Fprintf(stderr, "toolwarden import: %d item(s) would not be applied (listed above); exit status %d\n", len(plan.Unapplied), exitNotApplied)
		return exitError{exitNotApplied}
	case dryRun:
		fmt.Fprintln(stdout, "Dry run: nothing was changed.")
		return nil
	}
	if registersStdio(file) {
		// As serve logs it: an operator learns here that servers run unconfined.
		fmt.Fprintf(stderr, "stdio servers this import discovers run with confinement: %s\n", mgr.Confinement())
	}
	res, err := cc.Apply(ctx, cliActor(), plan)
	partial := errors.Is(err, configcode.ErrPartial)
	if err != nil && !partial {
		return fmt.Errorf("%w\nnothing was imported", err)
	}
	if partial {
		// The first transaction committed: all it changed, discovered and left out is
		// reported, as the page and the API report it, not only the servers.
		fmt.Fprintf(stdout, "Imported %s in part: %s.\n", name, res.Servers)
	} else {
		fmt.Fprintf(stdout, "Imported %s: %s.\n", name, res.Servers)
	}
	if len(res.Changed) > 0 {
		fmt.Fprintf(stdout, "Also changed: %s.\n", strings.Join(res.Changed, ", "))
	}
	if len(res.Discovered) > 0 {
		fmt.Fprintf(stdout, "Discovered: %s.\n", strings.Join(res.Discovered, ", "))
	}
	if len(res.Unapplied) > 0 {
		fmt.Fprintf(stdout, "Not applied (%d; everything else was):\n", len(res.Unapplied))
		for _, u := range res.Unapplied {
			fmt.Fprintf(stdout, "  ! %s\n", u)
		}
	}
	switch {
	case partial:
		return fmt.Errorf("%w\nimport the file again to apply the rest", err)
	case len(res.Unapplied) > 0:
		fmt.Fprintf(stderr, "toolwarden import: %d item(s) were not applied (listed above); exit status %d\n", len(res.Unapplied), exitNotApplied)
		return exitError{exitNotApplied}
	}
	return nil
}

// registersStdio reports whether the file registers a stdio server, which the import
// starts to discover its tools.
func registersStdio(f *configcode.File) bool {
	if f.Servers == nil {
		return false
	}
	return slices.ContainsFunc(f.Servers.Servers, func(s registry.ServerConfig) bool { return s.Type == registry.TypeStdio })
}

// readImport reads the file to import, or standard input for "-".
func readImport(path string, stdin io.Reader) (string, []byte, error) {
	r, name := stdin, "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", nil, fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		r, name = f, path
	}
	data, err := io.ReadAll(io.LimitReader(r, maxImportSize+1))
	if err != nil {
		return "", nil, fmt.Errorf("import: read %s: %w", name, err)
	}
	if len(data) > maxImportSize {
		return "", nil, fmt.Errorf("import: %s is larger than %d bytes; is it the right file?", name, maxImportSize)
	}
	return name, data, nil
}
