package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// SIGTERM during `toolwarden migrate up` stops it between two migrations: it exits
// non-zero saying it stopped, and the database is left clean at a version short of the
// newest, which the next `migrate up` carries on from.
func TestMigrateUpStopsOnSignal(t *testing.T) {
	url := dbtest.NewEmpty(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	cmd := exec.Command(os.Args[0], "migrate", "up", "--database-url", url)
	cmd.Env = append(os.Environ(), asToolwardenEnv+"=1")
	stdout := &syncBuffer{}
	cmd.Stdout = stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	logged := make(chan struct{}) // the first migration is announced
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		first := true
		for sc.Scan() {
			_, _ = io.WriteString(stderr, sc.Text()+"\n")
			if first && strings.Contains(sc.Text(), "applying migration") {
				first = false
				close(logged)
			}
		}
	}()
	done := make(chan error, 1)
	go func() { <-scanned; done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// Signalled once the first migration is announced (it runs before the signal is
	// looked at), or, should nothing be announced, once the database holds one.
	var waitErr error
	signalled := false
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-logged:
			logged = nil
		case waitErr = <-done:
			break wait
		case <-tick.C:
			var v int64
			if conn.QueryRow(ctx, `SELECT version FROM schema_migrations`).Scan(&v) != nil || v < 1 {
				continue
			}
		}
		if !signalled {
			signalled = true
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !signalled {
		t.Fatalf("migrate up ended before applying a migration: %v\n%s", waitErr, stderr.String())
	}

	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.ExitCode() == 0 {
		t.Errorf("migrate up after SIGTERM: %v, want a non-zero exit\nstdout: %s\nstderr: %s", waitErr, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped by a signal") {
		t.Errorf("stderr %q: want it to say migrate up stopped by a signal", stderr.String())
	}
	var v int64
	var dirty bool
	if err := conn.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &dirty); err != nil {
		t.Fatal(err)
	}
	if v < 1 || uint(v) >= db.LatestMigration() || dirty {
		t.Fatalf("after SIGTERM: version %d (dirty %v) of %d; want clean, between 1 and the newest", v, dirty, db.LatestMigration())
	}
	if !strings.Contains(stdout.String(), "pending") {
		t.Errorf("stdout %q: want the version reached and what is pending", stdout.String())
	}
	// The next run carries on to the newest.
	if out, _, err := runCmd(t, "", "migrate", "up", "--database-url", url); err != nil || !strings.Contains(out, "(current)") {
		t.Fatalf("migrate up after the stop: %v %q", err, out)
	}
}
