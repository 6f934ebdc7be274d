package secretkeys

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
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

// Rotation is what Rotate did, as far as it got.
type Rotation struct {
	Key                    string   // the key that encrypts from now on
	Keys                   []string // the key file's, once read after the new key
	Servers, Tools, Seals  int      // values re-encrypted and executions sealed again
	LeftServers, LeftTools int      // values left under lost keys
	reencrypting           bool     // it got to re-encrypting
}

// Left is how many values were left under lost keys.
func (r *Rotation) Left() int { return r.LeftServers + r.LeftTools }

// Rotate runs `secrets rotate` on the key file at path: a new primary key in it (none
// with reencryptOnly), then every stored value and execution seal under the primary
// key, leaving the values under a key in lost. It is audited (as actor) before the key
// file changes (secrets.rotate.started, naming the key that will encrypt) and again
// however it ends (secrets.rotate, success or failure), so a key added by a rotation
// that failed or was killed part way is on record. progress hears of the key added.
// The caller holds LockFile and Lock.
func Rotate(ctx context.Context, pool *pgxpool.Pool, path string, reencryptOnly bool, lost []string, actor audit.Actor, progress io.Writer) (Rotation, error) {
	var r Rotation
	// A key file that lacks a key the database uses (another replica rotated, and its
	// file was not copied here) would re-encrypt and seal under keys the others lack.
	held, err := secrets.LoadKeyring(path)
	if err != nil {
		return r, err
	}
	if err := FileFits(ctx, pool, held, path, lost); err != nil {
		return r, fmt.Errorf("%w; nothing was changed. If those keys are lost for good (serve started with --lost-keys), name them in --lost-keys (TOOLWARDEN_LOST_KEYS) to leave what they sealed as it is", err)
	}
	var added secrets.Key
	r.Key = held.PrimaryID()
	if !reencryptOnly {
		// Made here, not by the write of the file, so the entry below can name it.
		for added.ID == "" || slices.Contains(held.IDs(), added.ID) {
			if added, err = secrets.GenerateKey(); err != nil {
				return r, err
			}
		}
		r.Key = added.ID
	}
	var started audit.Record
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		started, err = audit.Append(ctx, tx, audit.Entry{Actor: actor, Action: "secrets.rotate.started", TargetType: "secret_key",
			TargetID: r.Key, TargetName: r.Key, Payload: map[string]any{"key": r.Key, "new_key": !reencryptOnly, "keys": held.IDs()}})
		return err
	}); err != nil {
		return r, fmt.Errorf("record the rotation's start in the audit log: %w; nothing was changed", err)
	}
	err = rotate(ctx, pool, path, added, lost, progress, &r)
	// Recorded however it ended: a key added and values re-encrypted before a failure
	// are changes too.
	payload := map[string]any{"key": r.Key, "new_key": !reencryptOnly, "started_entry": started.ID, "server_values": r.Servers, "tool_values": r.Tools,
		"execution_seals": r.Seals, "keys": r.Keys, "left_under_lost_keys": r.Left()}
	entry := audit.Entry{Actor: actor, Action: "secrets.rotate", TargetType: "secret_key", TargetID: r.Key, TargetName: r.Key, Payload: payload}
	if err != nil {
		entry.Result, payload["error"] = audit.ResultFailure, err.Error()
	}
	if aerr := audit.AppendAlone(context.WithoutCancel(ctx), pool, entry); err == nil && aerr != nil {
		return r, aerr
	}
	if err != nil && r.reencrypting {
		return r, fmt.Errorf("%w\nwhat was re-encrypted stays so; run 'toolwarden secrets rotate --reencrypt-only' to finish", err)
	}
	return r, err
}

// rotate is Rotate's work after its start is recorded: add the key (unless added is
// zero), record it, re-encrypt and seal again, noting in r what it did.
func rotate(ctx context.Context, pool *pgxpool.Pool, path string, added secrets.Key, lost []string, progress io.Writer, r *Rotation) error {
	if added.ID != "" {
		if err := secrets.PrependKeyToFile(path, added); err != nil {
			return err
		}
		fmt.Fprintf(progress, "added key %s to %s; it encrypts from now on\n", added.ID, path)
	}
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		return err
	}
	r.Keys = keys.IDs()
	if added.ID != "" && keys.PrimaryID() != added.ID {
		return fmt.Errorf("the key file %s changed while key %s was added (its first key is %s): nothing was re-encrypted; run 'toolwarden secrets status', then rotate again", path, added.ID, keys.PrimaryID())
	}
	// Before anything is sealed with it: the key that encrypts from now on is one the
	// database records (FileFits).
	if err := Record(ctx, pool, keys, path, lost, ""); err != nil {
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
	if r.Servers, r.LeftServers, err = registry.New(pool, keys, nil).RotateSecretsKeeping(ctx, lost); err != nil {
		return err
	}
	if r.Tools, r.LeftTools, err = tools.New(pool, keys, nil).RotateSecretsKeeping(ctx, lost); err != nil {
		return err
	}
	// A seal verifies while its key is in the file: sealed again with the new key, the
	// old one can be retired without failed executions' rollbacks being refused as
	// altered.
	r.Seals, err = executions.Reseal(ctx, pool, keys, sealKeyOf(rings))
	return err
}

// Retire runs `secrets retire-key`: once every running server has taken up the key
// file (takeUp after its last change; progress hears of the wait), it removes key id
// from the file at path and from the database's record, if the key seals no stored
// value, no approval of an execution not yet final and no pinned connection identity of
// one. Audited as actor. earlier is how many executions an earlier release sealed (v1
// seals, which now match no key). The caller holds LockFile and Lock.
func Retire(ctx context.Context, pool *pgxpool.Pool, path, id string, actor audit.Actor, takeUp time.Duration, progress io.Writer) (earlier int, err error) {
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		return 0, err
	}
	rings, err := fileKeyrings(path)
	if err != nil {
		return 0, err
	}
	if err := waitTakenUp(ctx, path, takeUp, progress); err != nil {
		return 0, err
	}
	u, err := Usage(ctx, pool)
	if err != nil {
		return 0, err
	}
	if n := u[id]; n > 0 {
		return 0, fmt.Errorf("key %s still seals %d stored values: run 'toolwarden secrets rotate' (or --reencrypt-only) first; nothing was changed", id, n)
	}
	seals, err := executions.SealUsage(ctx, pool, sealKeyOf(rings), 0)
	if err != nil {
		return 0, err
	}
	if n := seals[id]; n > 0 {
		return 0, fmt.Errorf("key %s still seals the approvals of %d executions not yet final (awaiting approval, running, or failed and so open to a rollback), which would look altered without it: run 'toolwarden secrets rotate' (or --reencrypt-only) first; nothing was changed", id, n)
	}
	// A plan's steps pin their servers' connection identities, MACs under the primary key
	// when it was planned, which its approval's hash holds: checked again before each
	// step runs, one only the key verifies is refused as changed settings without it.
	// Reseal does not pin them again (what a person approved would change under them),
	// so the key waits for those executions to end.
	idKeyOf := identityKeyOf(rings, pool, registry.New(pool, keys, nil), tools.New(pool, keys, nil))
	pinned, err := executions.IdentityUsage(ctx, pool, idKeyOf)
	if err != nil {
		return 0, err
	}
	if n := pinned[id]; n > 0 {
		return 0, fmt.Errorf("key %s still pins the servers' connection settings that %d executions not yet final (planned, awaiting approval, running or rolling back) "+
			"were approved against: without it their remaining steps would be refused as changed settings, and they would be cancelled. "+
			"Let them end first (approve, reject or cancel those awaiting approval, or let them expire; let the running ones finish), then retire the key; "+
			"plans made since the rotation are pinned under the new key; nothing was changed", id, n)
	}
	if err := secrets.RemoveKeyFromFile(path, id); err != nil {
		return 0, err
	}
	// The key is gone from the file already: the row is written even if the command is
	// interrupted now, and a failure says what was done.
	// An earlier release's seals (v1) are refused whichever key made them, and nothing
	// seals them again: they cannot hold the key back, but from now on they match no key,
	// as an altered record's would not. Said, and counted in the entry.
	earlier = seals[executions.EarlierSeal(id)]
	if err := audit.AppendAlone(context.WithoutCancel(ctx), pool, audit.Entry{Actor: actor, Action: "secrets.retire_key", TargetType: "secret_key",
		TargetID: id, TargetName: id, Payload: map[string]any{"key": id, "earlier_release_seals": earlier}}); err != nil {
		return earlier, fmt.Errorf("key %s was removed from %s already, but its retirement could not be written to the audit log: %w", id, path, err)
	}
	// Forgotten by the record too, which keeps the primary: a key file holding only the
	// keys left still fits it.
	if err := Record(ctx, pool, keys, path, nil, id); err != nil {
		return earlier, fmt.Errorf("key %s was removed from %s already, but the database's record of the keys could not be updated: %w", id, path, err)
	}
	return earlier, nil
}

// KeyStatus is what one key still seals.
type KeyStatus struct {
	ID string
	// Primary: it encrypts; Missing: the database uses it but the key file lacks it.
	Primary, Missing bool
	// Values, Sealed, Pinned: stored values, approvals of executions not yet final
	// (executions.SealUsage), executions whose pinned connection settings were approved
	// under it (executions.IdentityUsage). retire-key refuses a key while any is not zero.
	Values, Sealed, Pinned int
}

// Status lists the keys of the key file at path, then the keys the database uses that
// the file lacks, with what each still seals.
func Status(ctx context.Context, pool *pgxpool.Pool, path string) ([]KeyStatus, error) {
	keys, err := secrets.LoadKeyring(path)
	if err != nil {
		return nil, err
	}
	rings, err := fileKeyrings(path)
	if err != nil {
		return nil, err
	}
	u, err := Usage(ctx, pool)
	if err != nil {
		return nil, err
	}
	seals, err := executions.SealUsage(ctx, pool, sealKeyOf(rings), 0)
	if err != nil {
		return nil, err
	}
	pinned, err := executions.IdentityUsage(ctx, pool, identityKeyOf(rings, pool, registry.New(pool, keys, nil), tools.New(pool, keys, nil)))
	if err != nil {
		return nil, err
	}
	var out []KeyStatus
	for i, id := range keys.IDs() {
		out = append(out, KeyStatus{ID: id, Primary: i == 0, Values: u[id], Sealed: seals[id], Pinned: pinned[id]})
	}
	for _, id := range slices.Sorted(maps.Keys(u)) {
		if !slices.Contains(keys.IDs(), id) {
			out = append(out, KeyStatus{ID: id, Missing: true, Values: u[id]})
		}
	}
	return out, nil
}

// waitTakenUp waits until every running server has looked at the key file since it
// last changed (takeUp after the change; each looks every secrets.ReloadEvery): until
// then one may still seal a value with the key a rotation just replaced, and the value
// would be written after retire-key counted it, under a key gone from the file.
func waitTakenUp(ctx context.Context, path string, takeUp time.Duration, progress io.Writer) error {
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
	wait := min(takeUp-time.Since(changed), takeUp)
	if wait <= 0 {
		return nil
	}
	fmt.Fprintf(progress, "the key file changed %s ago: waiting %s for running servers to take up its keys\n",
		max(0, time.Since(changed)).Round(time.Second), wait.Round(time.Second))
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
