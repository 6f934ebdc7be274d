package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
	"github.com/toolwarden/toolwarden/services/tools"
)

// pointAtKey is how to mend a key file that does not fit the database.
const pointAtKey = "point --secret-key-file (TOOLWARDEN_SECRET_KEY_FILE) at the key file serve uses"

// keyUsage counts the database's stored secret values (servers' and tools') by the id
// of the key that sealed them.
func keyUsage(ctx context.Context, pool *pgxpool.Pool) (map[string]int, error) {
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

// keyFileFits checks, for serve, import and rotate, that the key file at path holds
// every key a stored secret value names, but those in lost (lost for good: --lost-keys),
// and one of the keys serve recorded on the database (recordKeys), which holds even
// while nothing is sealed yet. keys nil means there is no file at path and a new key
// would be made: then nothing may be sealed yet, the approvals of executions not yet
// final included (their seals name no key), unless keys are declared lost. A process with
// another key could not open the values, sealed values the others cannot open, and
// approvals that look altered to them. The error names the file and the keys; the
// caller adds what it did not do.
func keyFileFits(ctx context.Context, pool *pgxpool.Pool, keys *secrets.Keyring, path string, lost []string) error {
	usage, err := keyUsage(ctx, pool)
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

// recordKeys records keys' primary among the keys used on the database, and forgets
// drop (a retired key), once the key file fits the record (checked again under the
// record's lock, in one transaction with the write). serve calls it once its key file
// fits, rotate for its new key.
func recordKeys(ctx context.Context, pool *pgxpool.Pool, keys *secrets.Keyring, path string, lost []string, drop string) error {
	return secrets.UpdateRecordedKeys(ctx, pool, func(recorded []string) ([]string, error) {
		if len(recordUnheld(recorded, keys.IDs(), lost, nil)) > 0 {
			// Counted only then: serve counted them just before.
			usage, err := keyUsage(ctx, pool)
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

// parseLostKeys reads --lost-keys: key ids separated by commas or spaces.
func parseLostKeys(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}
