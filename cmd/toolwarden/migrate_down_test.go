package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db"
)

// `migrate down N` refuses more migrations than are applied, saying how many can be
// rolled back, and runs none: it rolled the database back to nothing and then failed.
// `migrate down --to V` takes a version (they have gaps: 39 is none); rolling back to
// version 0, either way, takes --drop-all-data.
func TestMigrateDownCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, url, pool := cliDatabase(t)
	cli := func(args ...string) (string, string, error) {
		return runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
	}
	version := func() uint {
		t.Helper()
		st, err := db.CurrentMigration(ctx, pool)
		if err != nil || st.Dirty {
			t.Fatalf("migration state: %+v, %v", st, err)
		}
		return st.Version
	}
	latest := db.LatestMigration()
	all := len(db.MigrationVersions())

	stdout, stderr, err := cli("migrate", "down", "100")
	if err == nil || !strings.Contains(err.Error(), "at most "+strconv.Itoa(all)+" can be rolled back") || version() != latest {
		t.Fatalf("migrate down 100: %v\n%s%s\nat version %d; want a refusal saying at most %d, at version %d still", err, stdout, stderr, version(), all, latest)
	}
	for _, v := range []string{"39", strconv.Itoa(int(latest)), "0x28", "-1"} {
		if _, _, err := cli("migrate", "down", "--to", v); err == nil || version() != latest {
			t.Fatalf("migrate down --to %s: %v, at version %d; want a refusal, at %d still", v, err, version(), latest)
		}
	}
	if stdout, stderr, err := cli("migrate", "down", "--to", "40"); err != nil || !strings.Contains(stdout, "version 40 of ") || version() != 40 {
		t.Fatalf("migrate down --to 40: %v\n%s%s", err, stdout, stderr)
	}
	// Two from 40 are 40 and 38.
	if stdout, stderr, err := cli("migrate", "down", "2"); err != nil || !strings.Contains(stdout, "version 37 of ") {
		t.Fatalf("migrate down 2 from 40: %v\n%s%s; want version 37", err, stdout, stderr)
	}
	applied := 0
	for _, v := range db.MigrationVersions() {
		if v <= 37 {
			applied++
		}
	}
	for _, args := range [][]string{{"migrate", "down", "--to", "0"}, {"migrate", "down", strconv.Itoa(applied)}} {
		if _, _, err := cli(args...); err == nil || !strings.Contains(err.Error(), "--drop-all-data") || version() != 37 {
			t.Fatalf("%v: %v, at version %d; want a refusal naming --drop-all-data, at 37 still", args, err, version())
		}
	}
	if _, _, err := cli("migrate", "up", "--to", "40"); !errors.Is(err, errUsage) {
		t.Fatalf("migrate up --to 40: %v, want a usage error", err)
	}
	if _, _, err := cli("migrate", "down", "2", "--to", "20"); !errors.Is(err, errUsage) {
		t.Fatalf("migrate down 2 --to 20: %v, want a usage error", err)
	}
	if stdout, stderr, err := cli("migrate", "down", "--to", "0", "--drop-all-data"); err != nil || !strings.Contains(stdout, "version 0 of ") {
		t.Fatalf("migrate down --to 0 --drop-all-data: %v\n%s%s", err, stdout, stderr)
	}
	if _, _, err := cli("migrate", "down", "1"); err == nil || !strings.Contains(err.Error(), "nothing to roll back") {
		t.Fatalf("migrate down 1 at version 0: %v, want nothing to roll back", err)
	}
}
