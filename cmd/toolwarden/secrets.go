package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
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
	lost := parseLostKeys(lostKeys)
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
	// One change of keys at a time, on this key file and on this database: two rotations
	// at once could each re-encrypt with a key the other's write of the file dropped.
	if changes {
		unlock, err := lockKeyFile(path)
		if err != nil {
			return err
		}
		defer unlock()
	}
	// status, run by a newer binary before an upgrade, must not migrate the database
	// under the servers still running the old one.
	d, err := openDB(ctx, c, changes, stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	if changes {
		release, err := lockSecrets(ctx, d.Pool)
		if err != nil {
			return err
		}
		defer release()
	}
	if sub == "rotate" {
		return rotateSecrets(ctx, d.Pool, path, reencryptOnly, lost, stdout, stderr)
	}
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		return err
	}
	reg := registry.New(d.Pool, keys, nil)
	ts := tools.New(d.Pool, keys, nil)
	// Execution approvals are sealed with a MAC, which names no key: each key of the
	// file is tried, each alone.
	rings, err := fileKeyrings(path)
	if err != nil {
		return err
	}
	keyOf := sealKeyOf(rings)
	if sub == "status" {
		return secretsStatus(ctx, stdout, d.Pool, keys, keyOf, rings, reg, ts)
	}
	// retire-key
	if err := waitKeyFileTakenUp(ctx, path, stdout); err != nil {
		return err
	}
	u, err := keyUsage(ctx, d.Pool)
	if err != nil {
		return err
	}
	if n := u[id]; n > 0 {
		return fmt.Errorf("key %s still seals %d stored values: run 'toolwarden secrets rotate' (or --reencrypt-only) first; nothing was changed", id, n)
	}
	seals, err := executions.SealUsage(ctx, d.Pool, keyOf, 0)
	if err != nil {
		return err
	}
	if n := seals[id]; n > 0 {
		return fmt.Errorf("key %s still seals the approvals of %d executions not yet final (awaiting approval, running, or failed and so open to a rollback), which would look altered without it: run 'toolwarden secrets rotate' (or --reencrypt-only) first; nothing was changed", id, n)
	}
	// A plan's steps pin their servers' connection identities, MACs under the primary key
	// when it was planned, which its approval's hash holds: checked again before each
	// step runs, one only the key verifies is refused as changed settings without it.
	// Reseal does not pin them again (what a person approved would change under them),
	// so the key waits for those executions to end.
	idKeyOf := identityKeyOf(rings, d.Pool, reg, ts)
	pinned, err := executions.IdentityUsage(ctx, d.Pool, idKeyOf)
	if err != nil {
		return err
	}
	if n := pinned[id]; n > 0 {
		return fmt.Errorf("key %s still pins the servers' connection settings that %d executions not yet final (planned, awaiting approval, running or rolling back) "+
			"were approved against: without it their remaining steps would be refused as changed settings, and they would be cancelled. "+
			"Let them end first (approve, reject or cancel those awaiting approval, or let them expire; let the running ones finish), then retire the key; "+
			"plans made since the rotation are pinned under the new key; nothing was changed", id, n)
	}
	if err := secrets.RemoveKeyFromFile(path, id); err != nil {
		return err
	}
	// The key is gone from the file already: the row is written even if the command is
	// interrupted now, and a failure says what was done.
	// An earlier release's seals (v1) are refused whichever key made them, and nothing
	// seals them again: they cannot hold the key back, but from now on they match no key,
	// as an altered record's would not. Said, and counted in the entry.
	earlier := seals[executions.EarlierSeal(id)]
	if err := audit.AppendAlone(context.WithoutCancel(ctx), d.Pool, audit.Entry{Actor: cliActor(), Action: "secrets.retire_key", TargetType: "secret_key",
		TargetID: id, TargetName: id, Payload: map[string]any{"key": id, "earlier_release_seals": earlier}}); err != nil {
		return fmt.Errorf("key %s was removed from %s already, but its retirement could not be written to the audit log: %w", id, path, err)
	}
	// Forgotten by the record too, which keeps the primary: a key file holding only the
	// keys left still fits it.
	if err := recordKeys(ctx, d.Pool, keys, path, nil, id); err != nil {
		return fmt.Errorf("key %s was removed from %s already, but the database's record of the keys could not be updated: %w", id, path, err)
	}
	fmt.Fprintf(stdout, "retired key %s: values sealed with it no longer decrypt\n", id)
	if earlier > 0 {
		fmt.Fprintf(stdout, "%d executions not yet final were sealed with it by an earlier release of Toolwarden: they could not be approved or rolled back "+
			"before (that seal does not cover who asked), and their seals now match no key, so they are refused as altered or sealed with a retired key\n", earlier)
	}
	return nil
}

// rotateSecrets runs `secrets rotate`: a new primary key in the key file (none with
// reencryptOnly), then every stored value and execution seal under the primary key. It
// is audited before the key file changes (secrets.rotate.started, naming the key that
// will encrypt) and again however it ends (secrets.rotate, success or failure), so a
// key added by a rotation that failed or was killed part way is on record.
func rotateSecrets(ctx context.Context, pool *pgxpool.Pool, path string, reencryptOnly bool, lost []string, stdout, stderr io.Writer) error {
	// A key file that lacks a key the database uses (another replica rotated, and its
	// file was not copied here) would re-encrypt and seal under keys the others lack.
	held, err := secrets.LoadKeyring(path)
	if err != nil {
		return err
	}
	if err := keyFileFits(ctx, pool, held, path, lost); err != nil {
		return fmt.Errorf("%w; nothing was changed. If those keys are lost for good (serve started with --lost-keys), name them in --lost-keys (TOOLWARDEN_LOST_KEYS) to leave what they sealed as it is", err)
	}
	var added secrets.Key
	primary := held.PrimaryID()
	if !reencryptOnly {
		// Made here, not by the write of the file, so the entry below can name it.
		for added.ID == "" || slices.Contains(held.IDs(), added.ID) {
			if added, err = secrets.GenerateKey(); err != nil {
				return err
			}
		}
		primary = added.ID
	}
	var started audit.Record
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		started, err = audit.Append(ctx, tx, audit.Entry{Actor: cliActor(), Action: "secrets.rotate.started", TargetType: "secret_key",
			TargetID: primary, TargetName: primary, Payload: map[string]any{"key": primary, "new_key": !reencryptOnly, "keys": held.IDs()}})
		return err
	}); err != nil {
		return fmt.Errorf("record the rotation's start in the audit log: %w; nothing was changed", err)
	}
	var r rotated
	err = rotateKeys(ctx, pool, path, added, lost, stderr, &r)
	// Recorded however it ended: a key added and values re-encrypted before a failure
	// are changes too.
	payload := map[string]any{"key": primary, "new_key": !reencryptOnly, "started_entry": started.ID, "server_values": r.servers, "tool_values": r.tools,
		"execution_seals": r.seals, "keys": r.keys, "left_under_lost_keys": r.left()}
	entry := audit.Entry{Actor: cliActor(), Action: "secrets.rotate", TargetType: "secret_key", TargetID: primary, TargetName: primary, Payload: payload}
	if err != nil {
		entry.Result, payload["error"] = audit.ResultFailure, err.Error()
	}
	if aerr := audit.AppendAlone(context.WithoutCancel(ctx), pool, entry); err == nil && aerr != nil {
		return aerr
	}
	if err != nil {
		if r.reencrypting {
			return fmt.Errorf("%w\nwhat was re-encrypted stays so; run 'toolwarden secrets rotate --reencrypt-only' to finish", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "re-encrypted %d server values and %d tool configuration values with key %s, and sealed the approvals of %d executions again\n",
		r.servers, r.tools, primary, r.seals)
	if n := r.left(); n > 0 {
		fmt.Fprintf(stdout, "left %d values under lost keys (%s) as they are: %d server values and %d tool configuration values, past versions included\n",
			n, strings.Join(lost, ", "), r.leftServers, r.leftTools)
	}
	return nil
}

// rotated is what a rotation did, as far as it got.
type rotated struct {
	keys                   []string // the key file's, once read after the new key
	reencrypting           bool     // it got to re-encrypting
	servers, tools, seals  int
	leftServers, leftTools int
}

func (r *rotated) left() int { return r.leftServers + r.leftTools }

// rotateKeys is rotateSecrets' work after its start is recorded: add the key (unless
// added is zero), record it, re-encrypt and seal again, noting in r what it did.
func rotateKeys(ctx context.Context, pool *pgxpool.Pool, path string, added secrets.Key, lost []string, stderr io.Writer, r *rotated) error {
	if added.ID != "" {
		if err := secrets.PrependKeyToFile(path, added); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "added key %s to %s; it encrypts from now on\n", added.ID, path)
	}
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		return err
	}
	r.keys = keys.IDs()
	if added.ID != "" && keys.PrimaryID() != added.ID {
		return fmt.Errorf("the key file %s changed while key %s was added (its first key is %s): nothing was re-encrypted; run 'toolwarden secrets status', then rotate again", path, added.ID, keys.PrimaryID())
	}
	// Before anything is sealed with it: the key that encrypts from now on is one the
	// database records (keyFileFits).
	if err := recordKeys(ctx, pool, keys, path, lost, ""); err != nil {
		return err
	}
	// Execution approvals are sealed with a MAC, which names no key: each key of the
	// file is tried, each alone.
	rings, err := fileKeyrings(path)
	if err != nil {
		return err
	}
	r.reencrypting = true
	// Values under a lost key cannot be opened: they are left, and counted.
	if r.servers, r.leftServers, err = registry.New(pool, keys, nil).RotateSecretsKeeping(ctx, lost); err != nil {
		return err
	}
	if r.tools, r.leftTools, err = tools.New(pool, keys, nil).RotateSecretsKeeping(ctx, lost); err != nil {
		return err
	}
	// A seal verifies while its key is in the file: sealed again with the new key, the
	// old one can be retired without failed executions' rollbacks being refused as
	// altered.
	r.seals, err = executions.Reseal(ctx, pool, keys, sealKeyOf(rings))
	return err
}

// secretsStatus lists the keys of the key file with what each still seals: stored
// values, the approvals of executions not yet final (SealUsage), and the executions whose
// pinned connection settings were approved under it (IdentityUsage): retire-key refuses
// a key while any of the three is not zero, and this says which and how many.
func secretsStatus(ctx context.Context, stdout io.Writer, pool *pgxpool.Pool, keys *secrets.Keyring, keyOf executions.SealKey, rings []*secrets.Keyring, reg *registry.Service, ts *tools.Service) error {
	u, err := keyUsage(ctx, pool)
	if err != nil {
		return err
	}
	seals, err := executions.SealUsage(ctx, pool, keyOf, 0)
	if err != nil {
		return err
	}
	pinned, err := executions.IdentityUsage(ctx, pool, identityKeyOf(rings, pool, reg, ts))
	if err != nil {
		return err
	}
	for i, id := range keys.IDs() {
		role := "decrypts"
		if i == 0 {
			role = "primary"
		}
		fmt.Fprintf(stdout, "%s\t%s\t%d values\t%d executions sealed\t%d executions pinned\n", id, role, u[id], seals[id], pinned[id])
	}
	for _, id := range slices.Sorted(maps.Keys(u)) {
		if !slices.Contains(keys.IDs(), id) {
			fmt.Fprintf(stdout, "%s\tMISSING from the key file\t%d values\n", id, u[id])
		}
	}
	return nil
}

// identityKeyOf is the executions.IdentityKey of the key file (rings, fileKeyrings): the
// key under which a step's pinned identity is its tool's server's connection identity
// now, read from the database (reg, ts) and tried with each key of the file alone.
func identityKeyOf(rings []*secrets.Keyring, pool *pgxpool.Pool, reg *registry.Service, ts *tools.Service) executions.IdentityKey {
	// A registry per key: IdentityMatches verifies under its own keyring only.
	alone := make([]*registry.Service, len(rings))
	ids := make([]string, len(rings))
	for i, r := range rings {
		alone[i], ids[i] = registry.New(pool, r, nil), r.PrimaryID()
	}
	type conn struct {
		c  registry.Connection
		ok bool
	}
	// Read once each: plans share their tools, and tools their servers.
	seen, servers := map[string]conn{}, map[string]conn{}
	return func(ctx context.Context, toolID, identity string) (string, error) {
		c, done := seen[toolID]
		if !done {
			t, err := ts.Target(ctx, toolID)
			switch {
			case errors.Is(err, tools.ErrNotFound):
			case err != nil:
				return "", err
			default:
				var read bool
				if c, read = servers[t.ServerID]; !read {
					cfg, err := reg.Connection(ctx, t.ServerID)
					switch {
					// Gone, or holding a value under a lost key: its steps are refused
					// whatever the file holds.
					case errors.Is(err, registry.ErrNotFound), errors.Is(err, secrets.ErrUnknownKey):
					case err != nil:
						return "", fmt.Errorf("read the connection settings of server %s: %w", t.Server, err)
					default:
						c = conn{c: cfg, ok: true}
					}
					servers[t.ServerID] = c
				}
			}
			seen[toolID] = c
		}
		if !c.ok {
			return "", nil
		}
		for i, r := range alone {
			if r.IdentityMatches(c.c, identity) {
				return ids[i], nil
			}
		}
		return "", nil
	}
}

// keyTakeUp is how long after a change of the key file every running server has looked
// at it (each looks every secrets.ReloadEvery), with room for a seal made just before
// to commit.
var keyTakeUp = 2 * secrets.ReloadEvery

// waitKeyFileTakenUp waits until every running server has looked at the key file since
// it last changed (each looks every secrets.ReloadEvery): until then one may still seal
// a value with the key a rotation just replaced, and the value would be written after
// retire-key counted it, under a key gone from the file.
func waitKeyFileTakenUp(ctx context.Context, path string, stdout io.Writer) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("secrets: key file: %w", err)
	}
	// The later of its modification and its inode's change: a copy that kept the
	// modification time (rsync -a, scp -p) changed the inode when it was made.
	changed := st.ModTime()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if c := time.Unix(sys.Ctim.Sec, sys.Ctim.Nsec); c.After(changed) {
			changed = c
		}
	}
	wait := min(keyTakeUp-time.Since(changed), keyTakeUp)
	if wait <= 0 {
		return nil
	}
	fmt.Fprintf(stdout, "the key file changed %s ago: waiting %s for running servers to take up its keys\n",
		max(0, time.Since(changed)).Round(time.Second), wait.Round(time.Second))
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockKeyFile takes an exclusive lock beside the key file at path (<file>.lock; the key
// file itself is replaced, not rewritten, so it cannot carry the lock), or says that
// another secrets command holds it.
func lockKeyFile(path string) (func(), error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: key file: %w", err)
	}
	// Opened for writing: NFS emulates flock with a record lock, and an exclusive one
	// needs a writable descriptor. Readable by all, and read-only when writing is denied (or
	// the file system is read-only):
	// a lock file made by a command run with sudo must not keep the service's user from
	// taking the lock later (it holds nothing).
	f, err := os.OpenFile(real+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		f, err = os.OpenFile(real+".lock", os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: lock the key file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another 'toolwarden secrets' command is changing the keys of %s; wait for it to end, then try again", path)
		}
		return nil, fmt.Errorf("secrets: lock the key file: %w", err)
	}
	return func() { f.Close() }, nil
}

// lockSecrets takes the database's lock on key changes (a session advisory lock, held on
// a connection of its own until release), so replicas' key files are not rotated at once.
func lockSecrets(ctx context.Context, pool *pgxpool.Pool) (func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("secrets: lock: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('toolwarden.secrets', 0))`).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, fmt.Errorf("secrets: lock: %w", err)
		}
		return nil, errors.New("another 'toolwarden secrets rotate' or 'retire-key' is running on this database (perhaps on another replica); wait for it to end, then try again")
	}
	return func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended('toolwarden.secrets', 0))`)
		conn.Release()
	}, nil
}
