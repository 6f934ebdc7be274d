package db_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := dbtest.TempDir(t)

	// First start: initdb, start, create the database.
	c, err := db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	if !c.Owned() {
		t.Fatalf("first start: got Owned()=false, want true")
	}
	pid := postmasterPID(t, c)
	if _, err := os.Stat(filepath.Join(c.SocketDir(), ".s.PGSQL.5432")); err != nil {
		t.Fatalf("socket not inside the data dir: %v", err)
	}
	// Unix socket only: no TCP listener configured.
	conn := connect(t, c.URL())
	var listen string
	if err := conn.QueryRow(ctx, "SHOW listen_addresses").Scan(&listen); err != nil || listen != "" {
		t.Fatalf("listen_addresses = %q (err %v), want empty", listen, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE keep (v int); INSERT INTO keep VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	// A second process on the same data dir attaches instead of starting another.
	attached, err := db.StartCluster(ctx, dataDir, nil)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if attached.Owned() {
		t.Fatalf("attach: got Owned()=true, want false (cluster was already running)")
	}
	attached.Stop() // must not stop the owner's postgres
	if !alive(pid) {
		t.Fatalf("a non-owner's Stop killed postgres")
	}

	// Stop: postgres exits cleanly.
	c.Stop()
	if alive(pid) {
		t.Fatalf("postgres (pid %d) still running after Stop", pid)
	}
	c.Stop() // idempotent

	// Reuse: no initdb, data kept.
	c2, err := db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer c2.Stop()
	conn = connect(t, c2.URL())
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM keep").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: got %d (err %v), want 42", v, err)
	}
}

// TestOrphanedPostgresStops checks that killing the process that started postgres
// (SIGKILL, no clean-up) does not leave postgres running.
func TestOrphanedPostgresStops(t *testing.T) {
	t.Parallel()
	if os.Getenv("TW_DB_CHILD") != "" {
		t.Skip("child mode")
	}
	dataDir := dbtest.TempDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndHang$")
	cmd.Env = append(os.Environ(), "TW_DB_CHILD="+dataDir, "TMPDIR="+dbtest.TempDir(t)) // it is killed: no clean-up of its own
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got strings.Builder
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(got.String(), "READY") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got.String(), "READY") {
		_ = cmd.Process.Kill()
		t.Fatalf("child never became ready: %s", got.String())
	}
	c := &db.Cluster{Dir: filepath.Join(dataDir, "pg")}
	pid := postmasterPID(t, c)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for stopBy := time.Now().Add(30 * time.Second); alive(pid) && time.Now().Before(stopBy); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("postgres (pid %d) outlived its killed parent", pid)
	}
}

func TestHelperStartAndHang(t *testing.T) {
	dataDir := os.Getenv("TW_DB_CHILD")
	if dataDir == "" {
		t.Skip("only run as a child of TestOrphanedPostgresStops")
	}
	if _, err := db.StartCluster(context.Background(), dataDir, &db.ClusterOptions{Fast: true}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("READY\n")
	select {}
}

func TestExternalURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmpty(t)
	d, err := db.Open(ctx, db.Config{URL: url, Migrate: true})
	if err != nil {
		t.Fatalf("open external: %v", err)
	}
	defer d.Close()
	if d.Cluster != nil {
		t.Fatalf("external URL started an embedded cluster")
	}
	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	st, err := mg.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Current() || st.Version != db.LatestMigration() {
		t.Fatalf("status after Open: got %+v, want version %d clean", st, db.LatestMigration())
	}
}

func TestMigrationsUpDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmpty(t)
	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	versions := db.MigrationVersions()
	if len(versions) == 0 {
		t.Fatal("no embedded migrations")
	}
	if err := mg.Up(); err != nil {
		t.Fatal(err)
	}
	if err := mg.Up(); err != nil {
		t.Fatalf("second up (no change) failed: %v", err)
	}
	// Walk all the way down one step at a time, checking the version each time, then back up.
	for i := len(versions) - 1; i >= 0; i-- {
		if err := mg.Down(1); err != nil {
			t.Fatalf("down from %d: %v", versions[i], err)
		}
		st, err := mg.Status()
		if err != nil {
			t.Fatal(err)
		}
		want := uint(0)
		if i > 0 {
			want = versions[i-1]
		}
		if st.Version != want || st.Dirty {
			t.Fatalf("after down from %d: got %+v, want version %d", versions[i], st, want)
		}
	}
	conn := connect(t, url)
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("after migrating all the way down: %d tables remain, want 0", tables)
	}
	if err := mg.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if err := mg.Down(0); err == nil {
		t.Fatalf("Down(0): got nil error, want one")
	}
}

func TestWithTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE tx_probe (v int)"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO tx_probe VALUES (1)"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO tx_probe VALUES (2)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(v), 0) FROM tx_probe").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 2 {
		t.Fatalf("got sum %d, want 2 (the failed transaction must roll back)", sum)
	}
}

// SetCommit turns synchronous commit off for its transaction only, and Synchronous
// leaves the server's setting alone.
func TestSetCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	for _, tc := range []struct {
		commit db.Commit
		want   string
	}{{db.Asynchronous, "off"}, {db.Synchronous, "on"}} {
		var got string
		if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			// The test cluster runs with it off; the transaction starts as serve's would.
			if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
				return err
			}
			if err := db.SetCommit(ctx, tx, tc.commit); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("commit %d: synchronous_commit is %q, want %q", tc.commit, got, tc.want)
		}
	}
	var after string
	if err := pool.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if want := map[bool]string{true: "on", false: "off"}[dbtest.Durable()]; after != want {
		t.Errorf("after the transactions: synchronous_commit is %q, want the server's %q", after, want)
	}
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := db.FindBinDir()
	if err != nil {
		t.Fatalf("FindBinDir: %v", err)
	}
	for _, b := range []string{"postgres", "initdb"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Errorf("%s missing from %s", b, dir)
		}
	}
}

func postmasterPID(t *testing.T, c *db.Cluster) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if err != nil {
		t.Fatalf("read postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	return conn
}

// AfterCommit's functions run once the outermost transaction commits, in order, with
// what it began on; never after a rollback (a savepoint's included), and not for a
// transaction WithTx did not begin.
func TestAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var got []string
	var with db.TxBeginner
	note := func(s string) func(context.Context, db.TxBeginner) {
		return func(_ context.Context, b db.TxBeginner) { got = append(got, s); with = b }
	}
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		db.AfterCommit(tx, note("outer"))
		if err := db.WithTx(ctx, tx, func(sp pgx.Tx) error {
			db.AfterCommit(sp, note("savepoint"))
			return nil
		}); err != nil {
			return err
		}
		undone := errors.New("undone")
		if err := db.WithTx(ctx, tx, func(sp pgx.Tx) error {
			db.AfterCommit(sp, note("rolled-back savepoint"))
			return undone
		}); !errors.Is(err, undone) {
			return err
		}
		if len(got) != 0 {
			t.Errorf("ran before the commit: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "outer,savepoint" || with != db.TxBeginner(pool) {
		t.Fatalf("after commit: got %v on %T, want outer,savepoint on the pool", got, with)
	}
	got = nil
	boom := errors.New("boom")
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		db.AfterCommit(tx, note("rolled back"))
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db.AfterCommit(tx, note("not ours"))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The connection goes back to the pool at commit; its next transaction starts clean.
	if err := db.WithTx(ctx, pool, func(tx pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("ran for a rollback or a foreign transaction: %v", got)
	}
}

// A transaction that loses a deadlock runs again; other errors end it at once.
func TestWithTxRetry(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `CREATE TABLE retry_rows (id int PRIMARY KEY, n int); INSERT INTO retry_rows VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	// Two transactions lock the rows in opposite orders, each waiting until both hold
	// their first row (so they surely deadlock, however slow the machine): one is the
	// deadlock's victim and runs again.
	locked, both := make(chan struct{}, 2), make(chan struct{})
	runs := [2]int{}
	errs := make(chan error, 2)
	for i, order := range [][2]int{{1, 2}, {2, 1}} {
		go func() {
			errs <- db.WithTxRetry(ctx, pool, func(tx pgx.Tx) error {
				runs[i]++
				if _, err := tx.Exec(ctx, `UPDATE retry_rows SET n = n + 1 WHERE id = $1`, order[0]); err != nil {
					return err
				}
				if runs[i] == 1 {
					locked <- struct{}{}
					<-both
				}
				_, err := tx.Exec(ctx, `UPDATE retry_rows SET n = n + 1 WHERE id = $1`, order[1])
				return err
			})
		}()
	}
	<-locked
	<-locked
	close(both)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a transaction failed: %v", err)
		}
	}
	var total int
	if err := pool.QueryRow(ctx, `SELECT sum(n) FROM retry_rows`).Scan(&total); err != nil || total != 4 {
		t.Fatalf("sum %d (%v), want both transactions' 4 updates", total, err)
	}
	if runs[0]+runs[1] < 3 {
		t.Fatalf("runs %v, want the deadlock's victim run again", runs)
	}
	calls := 0
	err := db.WithTxRetry(ctx, pool, func(tx pgx.Tx) error { calls++; return errors.New("plain") })
	if err == nil || calls != 1 {
		t.Fatalf("a plain error: %v after %d calls", err, calls)
	}
}

// Replicas starting together on an empty database migrate it together: each waits for
// the one migrating (Toolwarden's migrations and River's), none fails, and the
// database ends up current.
func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmpty(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			mg, err := db.NewMigrator(url)
			if err != nil {
				errs <- err
				return
			}
			defer mg.Close()
			errs <- mg.Up()
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("a migrator running beside three others: %v", err)
		}
	}
	mg, err := db.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	if st, err := mg.Status(); err != nil || !st.Current() {
		t.Fatalf("after four at once: %+v %v", st, err)
	}
}

// PostgreSQL notices a replica whose host died within seconds (docs/deploy.md): every
// session of the pool sets TCP keepalives once connected (not as startup parameters,
// which poolers refuse), unless the URL sets its own. The test cluster listens on a
// Unix socket only, where PostgreSQL shows them as 0, so where each value came from is
// read instead.
func TestSessionSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	for _, tc := range []struct{ url, idleFrom string }{{url, "session"}, {url + " tcp_keepalives_idle=30", "client"}} {
		pool, err := db.NewPool(ctx, tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		rows, err := pool.Query(ctx, `SELECT name, source FROM pg_settings WHERE name IN
			('tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout', 'default_transaction_isolation')`)
		if err == nil {
			for rows.Next() {
				var name, source string
				if err = rows.Scan(&name, &source); err != nil {
					break
				}
				got[name] = source
			}
			rows.Close()
		}
		startup := pool.Config().ConnConfig.RuntimeParams
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"tcp_keepalives_idle": tc.idleFrom, "tcp_keepalives_interval": "session", "tcp_keepalives_count": "session",
			"tcp_user_timeout": "session", "default_transaction_isolation": "session"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the settings come from %v, want %v", tc.url, got, want)
		}
		if _, ok := startup["tcp_keepalives_interval"]; ok {
			t.Errorf("%s: keepalives sent as startup parameters: %v", tc.url, startup)
		}
	}
}
