package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/secretkeys"
	"github.com/toolwarden/toolwarden/services/secrets"
)

const secretsUsage = "usage: toolwarden secrets rotate [--reencrypt-only] [--lost-keys IDS] | retire-key KEY_ID | status"

// cmdSecrets runs `toolwarden secrets rotate|retire-key|status` (docs/security.md, Key
// rotation). It works beside a running server: each row is re-encrypted in its own
// transaction with the row locked, and the server follows the key file.
func cmdSecrets(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, secretsUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	var c config
	fs := newFlagSet("secrets "+sub, stderr)
	commonFlags(fs, &c)
	fs.StringVar(&c.SecretKeyFile, "secret-key-file", envOr("TOOLWARDEN_SECRET_KEY_FILE", ""), "encryption key file; default <data-dir>/secret.key (env TOOLWARDEN_SECRET_KEY_FILE)")
	reencryptOnly, lostKeys := false, ""
	if sub == "rotate" {
		fs.BoolVar(&reencryptOnly, "reencrypt-only", false, "add no key: only re-encrypt the values still under an older key (after an interrupted rotation)")
		fs.StringVar(&lostKeys, "lost-keys", envOr("TOOLWARDEN_LOST_KEYS", ""), "ids of secret keys lost for good, as serve's --lost-keys: the values still under them (past versions of tools' configurations, say) are left as they are (env TOOLWARDEN_LOST_KEYS)")
	}
	// The key id may come before or after the flags.
	id := ""
	if sub == "retire-key" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, rest = rest[0], rest[1:]
	}
	if err := parse(fs, rest); err != nil {
		return err
	}
	extra := fs.Args()
	if id == "" && sub == "retire-key" && len(extra) > 0 {
		id, extra = extra[0], extra[1:]
	}
	if len(extra) > 0 {
		fmt.Fprintf(stderr, "toolwarden secrets %s: unexpected argument %q\n%s\n", sub, extra[0], secretsUsage)
		return errUsage
	}
	path := secretKeyPath(c)
	switch sub {
	case "rotate", "status":
	case "retire-key":
		if id == "" {
			fmt.Fprintln(stderr, secretsUsage)
			return errUsage
		}
	default:
		fmt.Fprintln(stderr, secretsUsage)
		return errUsage
	}
	changes := sub != "status" // status only reads
	// Every subcommand works on the key file serve uses: without it, a bare "lstat ...:
	// no such file" said nothing of where the file was looked for, or how to name another.
	// status checks it once it has found a database with a schema (what it says first
	// of a mistyped --data-dir).
	keyThere := func() error {
		if err := keyFileThere(path, c.SecretKeyFile != ""); err != nil {
			return fmt.Errorf("toolwarden secrets %s: %w", sub, err)
		}
		return nil
	}
	if changes {
		if err := keyThere(); err != nil {
			return err
		}
	}
	// One change of keys at a time, on this key file and on this database: two rotations
	// at once could each re-encrypt with a key the other's write of the file dropped.
	if changes {
		unlock, err := secretkeys.LockFile(path)
		if err != nil {
			return err
		}
		defer unlock()
	}
	// status, run by a newer binary before an upgrade, must not migrate the database
	// under the servers still running the old one, nor create a cluster in a mistyped
	// --data-dir.
	if !changes {
		if err := clusterExists(c, "secrets status"); err != nil {
			return err
		}
	}
	d, err := openDB(ctx, c, changes, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	if !changes {
		if st, err := db.CurrentMigration(ctx, d.Pool); err != nil {
			return err
		} else if st.Version == 0 {
			return errors.New("toolwarden secrets status: this database has no Toolwarden schema yet: no secrets to report on")
		}
		if err := keyThere(); err != nil {
			return err
		}
	}
	if changes {
		release, err := secretkeys.Lock(ctx, d.Pool)
		if err != nil {
			return err
		}
		defer release()
	}
	switch sub {
	case "rotate":
		lost := parseLostKeys(lostKeys)
		r, err := secretkeys.Rotate(ctx, d.Pool, path, reencryptOnly, lost, cliActor(), stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "re-encrypted %d server values and %d tool configuration values with key %s, and sealed the approvals of %d executions again\n",
			r.Servers, r.Tools, r.Key, r.Seals)
		if n := r.Left(); n > 0 {
			fmt.Fprintf(stdout, "left %d values under lost keys (%s) as they are: %d server values and %d tool configuration values, past versions included\n",
				n, strings.Join(lost, ", "), r.LeftServers, r.LeftTools)
		}
	case "status":
		st, err := secretkeys.Status(ctx, d.Pool, path)
		if err != nil {
			return err
		}
		for _, k := range st {
			if k.Missing {
				fmt.Fprintf(stdout, "%s\tMISSING from the key file\t%d values\n", k.ID, k.Values)
				continue
			}
			role := "decrypts"
			if k.Primary {
				role = "primary"
			}
			fmt.Fprintf(stdout, "%s\t%s\t%d values\t%d executions sealed\t%d executions pinned\n", k.ID, role, k.Values, k.Sealed, k.Pinned)
		}
	case "retire-key":
		earlier, err := secretkeys.Retire(ctx, d.Pool, path, id, cliActor(), keyTakeUp, stdout)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "retired key %s: values sealed with it no longer decrypt\n", id)
		if earlier > 0 {
			fmt.Fprintf(stdout, "%d executions not yet final were sealed with it by an earlier release of Toolwarden: they could not be approved or rolled back "+
				"before (that seal does not cover who asked), and their seals now match no key, so they are refused as altered or sealed with a retired key\n", earlier)
		}
	}
	return nil
}

// keyFileThere refuses a key file that is not there, saying how to name the one serve
// uses: given is whether --secret-key-file (or its variable) named it.
func keyFileThere(path string, given bool) error {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("secret key file: %w", err)
	case given:
		return fmt.Errorf("no secret key file at %s (--secret-key-file): give the one serve runs with", path)
	}
	return fmt.Errorf("no secret key file at %s: if serve keeps its key elsewhere, give its --secret-key-file "+
		"(or TOOLWARDEN_SECRET_KEY_FILE); if its data dir is elsewhere, give that --data-dir", path)
}

// keyTakeUp is how long after a change of the key file every running server has looked
// at it (each looks every secrets.ReloadEvery), with room for a seal made just before
// to commit: retire-key waits for it (keys.Retire).
var keyTakeUp = 2 * secrets.ReloadEvery
