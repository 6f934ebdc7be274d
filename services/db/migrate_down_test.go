package db_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A rollback of more migrations than are applied is refused before any runs: golang-
// migrate's Steps(-n) rolled back every one (the audit log, users, secrets) and then
// failed "limit short". DownTo takes a version, which has gaps (39 does not exist), and
// refuses one that is no migration or not below the database's.
func TestMigrateDownBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	versions := db.MigrationVersions()
	latest := db.LatestMigration()
	status := func() db.MigrationStatus {
		t.Helper()
		st, err := mg.Status()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	auditLogThere := func() bool {
		t.Helper()
		conn := connect(t, url)
		defer conn.Close(ctx)
		var there bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass('audit_log') IS NOT NULL`).Scan(&there); err != nil {
			t.Fatal(err)
		}
		return there
	}

	err = mg.Down(len(versions) + 1)
	if err == nil || !strings.Contains(err.Error(), "at most "+strconv.Itoa(len(versions))+" can be rolled back") {
		t.Fatalf("Down(%d) of %d applied: got %v, want a refusal saying at most %d", len(versions)+1, len(versions), err, len(versions))
	}
	if st := status(); st.Version != latest || st.Dirty || !auditLogThere() {
		t.Fatalf("after the refused Down: %+v, audit_log there %v; want version %d untouched", st, auditLogThere(), latest)
	}

	if slices.Contains(versions, 39) {
		t.Fatal("migration 39 exists: pick another gap for this test")
	}
	for _, v := range []uint{39, latest, latest + 1} {
		if err := mg.DownTo(v); err == nil {
			t.Errorf("DownTo(%d) at %d: got nil, want a refusal", v, latest)
		}
	}
	if st := status(); st.Version != latest || st.Dirty {
		t.Fatalf("after the refused DownTo: %+v, want version %d", st, latest)
	}

	if err := mg.DownTo(40); err != nil {
		t.Fatalf("DownTo(40): %v", err)
	}
	if st := status(); st.Version != 40 || st.Dirty {
		t.Fatalf("after DownTo(40): %+v, want version 40 clean", st)
	}
	// One step from 40 is 38: steps count migrations, not numbers.
	if v, err := mg.DownTarget(1); err != nil || v != 38 {
		t.Fatalf("DownTarget(1) at 40: %d, %v; want 38", v, err)
	}
	applied := 0
	for _, v := range versions {
		if v <= 40 {
			applied++
		}
	}
	if v, err := mg.DownTarget(applied); err != nil || v != 0 {
		t.Fatalf("DownTarget(%d) at 40: %d, %v; want 0", applied, v, err)
	}
	if _, err := mg.DownTarget(applied + 1); err == nil || !strings.Contains(err.Error(), "at most "+strconv.Itoa(applied)) {
		t.Fatalf("DownTarget(%d) at 40: %v; want a refusal saying at most %d", applied+1, err, applied)
	}
}

// On a database never migrated (no schema_migrations table), CurrentMigration is
// version 0, not an error: the commands' "no Toolwarden schema yet" is reached.
func TestCurrentMigrationWithoutTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connect(t, dbtest.NewEmpty(t))
	defer conn.Close(ctx)
	st, err := db.CurrentMigration(ctx, conn)
	if err != nil || st.Version != 0 || st.Dirty || st.Latest != db.LatestMigration() {
		t.Fatalf("CurrentMigration on an empty database: %+v, %v; want version 0 of %d", st, err, db.LatestMigration())
	}
}
