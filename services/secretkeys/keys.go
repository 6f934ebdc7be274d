// Package secretkeys owns the secret keys' lifecycle across the services that seal with them:
// whether a key file fits the database (every key a stored value or a recorded start
// names), the record of the keys serve used, and `secrets rotate`, `retire-key` and
// `status` (docs/security.md, Key rotation). It sits above registry, tools and
// executions, whose sealed values and seals it counts and re-seals.
package secretkeys

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// pointAtKey is how to mend a key file that does not fit the database.
const pointAtKey = "point --secret-key-file (TOOLWARDEN_SECRET_KEY_FILE) at the key file serve uses"

// Usage counts the database's stored secret values (servers' and tools') by the id
// of the key that sealed them.
func Usage(ctx context.Context, pool *pgxpool.Pool) (map[string]int, error) {
	usage, err := registry.New(pool, nil, nil).KeyUsage(ctx)
	if err != nil {
		return nil, err
	}
	more, err := tools.New(pool, nil, nil).KeyUsage(ctx)
	if err != nil {
		return nil, err
	}
	for k, n := range more {
		usage[k] += n
	}
	return usage, nil
}

// FileFits checks, for serve, import and rotate, that the key file at path holds
// every key a stored secret value names, but those in lost (lost for good: --lost-keys),
// and one of the keys serve recorded on the database (Record), which holds even
// while nothing is sealed yet. keys nil means there is no file at path and a new key
// would be made: then nothing may be sealed yet, the approvals of executions not yet
// final included (their seals name no key), unless keys are declared lost. A process with
// another key could not open the values, sealed values the others cannot open, and
// approvals that look altered to them. The error names the file and the keys; the
// caller adds what it did not do.
func FileFits(ctx context.Context, pool *pgxpool.Pool, keys *secrets.Keyring, path string, lost []string) error {
	usage, err := Usage(ctx, pool)
	if err != nil {
		return err
	}
	recorded, err := secrets.RecordedKeys(ctx, pool)
	if err != nil {
		return err
	}
	var held []string
	if keys != nil {
		held = keys.IDs()
	}
	unheld := recordUnheld(recorded, held, lost, usage)
	var missing []string
	for _, kid := range slices.Sorted(maps.Keys(usage)) {
		if !slices.Contains(held, kid) && !slices.Contains(lost, kid) {
			missing = append(missing, fmt.Sprintf("%d under key %s", usage[kid], kid))
		}
	}
	if keys != nil {
		if len(missing) > 0 {
			return fmt.Errorf("the database holds secret values (%s) which %s does not hold: %s", strings.Join(missing, ", "), path, pointAtKey)
		}
		if len(unheld) > 0 {
			return unheldError(unheld, path)
		}
		return nil
	}
	var what []string
	if len(missing) > 0 {
		what = append(what, "secrets sealed with a key ("+strings.Join(missing, ", ")+")")
	}
	if len(unheld) > 0 {
		what = append(what, "a record that serve used it with key "+strings.Join(unheld, ", "))
	}
	if len(lost) == 0 {
		seals, err := executions.SealUsage(ctx, pool, func(_, _ []byte) string { return "" }, 0)
		if err != nil {
			return err
		}
		if n := seals[""]; n > 0 {
			what = append(what, fmt.Sprintf("the approvals of %d executions not yet final, sealed with a key", n))
		}
	}
	if len(what) > 0 {
		return fmt.Errorf("there is no secret key file at %s, but the database holds %s: %s", path, strings.Join(what, " and "), pointAtKey)
	}
	return nil
}

// recordUnheld is the recorded ids not in lost when the key file (held) holds none of
// them, and nil when it fits: it holds one, all are lost, or a held key seals stored
// values (a file rotated by a toolwarden that did not record its keys).
func recordUnheld(recorded, held, lost []string, usage map[string]int) []string {
	var unheld []string
	for _, id := range recorded {
		if slices.Contains(held, id) {
			return nil
		}
		if !slices.Contains(lost, id) {
			unheld = append(unheld, id)
		}
	}
	for _, id := range held {
		if usage[id] > 0 {
			return nil
		}
	}
	return unheld
}

func unheldError(unheld []string, path string) error {
	return fmt.Errorf("serve used this database with key %s, which %s does not hold: %s", strings.Join(unheld, ", "), path, pointAtKey)
}

// Record records keys' primary among the keys used on the database, and forgets
// drop (a retired key), once the key file fits the record (checked again under the
// record's lock, in one transaction with the write). serve calls it once its key file
// fits, rotate for its new key.
func Record(ctx context.Context, pool *pgxpool.Pool, keys *secrets.Keyring, path string, lost []string, drop string) error {
	return secrets.UpdateRecordedKeys(ctx, pool, func(recorded []string) ([]string, error) {
		if len(recordUnheld(recorded, keys.IDs(), lost, nil)) > 0 {
			// Counted only then: serve counted them just before.
			usage, err := Usage(ctx, pool)
			if err != nil {
				return nil, err
			}
			if unheld := recordUnheld(recorded, keys.IDs(), lost, usage); len(unheld) > 0 {
				return nil, unheldError(unheld, path)
			}
		}
		next := slices.DeleteFunc(recorded, func(id string) bool { return id == drop })
		if !slices.Contains(next, keys.PrimaryID()) {
			next = append(next, keys.PrimaryID())
		}
		return next, nil
	})
}

// fileKeyrings reads the key file at path into a keyring per key (its PrimaryID the
// key's id): a MAC names no key, so each is tried alone.
func fileKeyrings(path string) ([]*secrets.Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: key file: %w", err)
	}
	keys, err := secrets.ParseKeyFile(path, data)
	if err != nil {
		return nil, err
	}
	rings := make([]*secrets.Keyring, len(keys))
	for i, k := range keys {
		if rings[i], err = secrets.NewKeyring(k); err != nil {
			return nil, err
		}
	}
	return rings, nil
}

// sealKeyOf says which key of the key file (rings, fileKeyrings) made an execution's
// seal (a MAC, which names no key, so each key is tried).
func sealKeyOf(rings []*secrets.Keyring) executions.SealKey {
	return func(input, seal []byte) string {
		for _, r := range rings {
			if r.VerifyMAC(input, seal) {
				return r.PrimaryID()
			}
		}
		return ""
	}
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

// LockFile takes an exclusive lock beside the key file at path (<file>.lock; the key
// file itself is replaced, not rewritten, so it cannot carry the lock), or says that
// another secrets command holds it.
func LockFile(path string) (func(), error) {
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

// Lock takes the database's lock on key changes (a session advisory lock, held on
// a connection of its own until release), so replicas' key files are not rotated at once.
func Lock(ctx context.Context, pool *pgxpool.Pool) (func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("secrets: lock: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `/* secretkeys.Lock */ SELECT pg_try_advisory_lock(hashtextextended('toolwarden.secrets', 0))`).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, fmt.Errorf("secrets: lock: %w", err)
		}
		return nil, errors.New("another 'toolwarden secrets rotate' or 'retire-key' is running on this database (perhaps on another replica); wait for it to end, then try again")
	}
	return func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `/* secretkeys.Unlock */ SELECT pg_advisory_unlock(hashtextextended('toolwarden.secrets', 0))`)
		conn.Release()
	}, nil
}
