package db_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
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

// lifetimeChild is a toolwarden process on dataDir in another process (this test binary
// running TestHelperLifetime): mode "owner" starts the cluster and closes when told
// (a line on its standard input), "attach" attaches to a running one and waits to be
// killed. It returns once the child has opened the database.
type lifetimeChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan error
}

func startLifetimeChild(t *testing.T, mode, dataDir string) *lifetimeChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLifetime$")
	cmd.Env = append(os.Environ(), "TW_DB_LIFETIME="+mode+":"+dataDir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				ready <- sc.Text()
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	c := &lifetimeChild{cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the %s child did not open the database", mode)
	}
	go func() { c.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.exited
	})
	return c
}

func TestHelperLifetime(t *testing.T) {
	mode, dataDir, ok := strings.Cut(os.Getenv("TW_DB_LIFETIME"), ":")
	if !ok {
		t.Skip("only run as a child of the lifetime tests")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	d, err := db.Open(context.Background(), db.Config{DataDir: dataDir, Cluster: &db.ClusterOptions{Fast: true, Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	if want := mode == "owner"; d.Cluster.Owned() != want {
		t.Fatalf("%s: Owned %v", mode, d.Cluster.Owned())
	}
	os.Stdout.WriteString("READY\n")
	if mode == "attach" {
		select {}
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	d.Close()
}

// openAttached opens the database of dataDir, whose cluster runs already, in this
// process.
func openAttached(t *testing.T, dataDir string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), db.Config{DataDir: dataDir, Cluster: &db.ClusterOptions{Fast: true, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Cluster.Owned() {
		d.Close()
		t.Fatal("started a cluster where one was running")
	}
	return d
}

// query connects anew (as a command starting then would) and through d's pool.
func query(ctx context.Context, d *db.DB) error {
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	d.Pool.Reset() // the next query dials too
	return d.Pool.QueryRow(ctx, "SELECT 1").Scan(&one)
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("postgres (pid %d) still runs", pid)
		}
	}
}

// A command that started the cluster (db.Open, then Close: `toolwarden import`) and
// ends while another command attached to it still works (`secrets rotate`) stops the
// cluster only once that one is done: the attached one's database does not vanish part
// way, and the cluster does not outlive them both.
func TestOwnerWaitsForAttachedProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := dbtest.TempDir(t)
	owner := startLifetimeChild(t, "owner", dataDir)
	d := openAttached(t, dataDir)
	defer d.Close()
	pid := postmasterPID(t, d.Cluster)

	if _, err := io.WriteString(owner.stdin, "close\n"); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := query(ctx, d); err != nil {
			t.Fatalf("the attached process's query after its starter closed: %v", err)
		}
		select {
		case err := <-owner.exited:
			owner.exited <- err
			t.Fatalf("the starter exited (%v) while a process was attached", err)
		default:
		}
	}

	d.Close()
	select {
	case err := <-owner.exited:
		owner.exited <- err
		if err != nil {
			t.Fatalf("the starter: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the starter did not stop once the attached process closed")
	}
	waitGone(t, pid)
}

// An owner waits for a process attaching while it waits, too; the kernel drops the lock
// of an attached process that is killed, so it does not keep the cluster running.
func TestOwnerStopsOnceAttachedProcessesAreGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := dbtest.TempDir(t)
	c, err := db.StartCluster(ctx, dataDir, &db.ClusterOptions{Fast: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	pid := postmasterPID(t, c)
	killed := startLifetimeChild(t, "attach", dataDir)

	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	notYet := func(what string) {
		t.Helper()
		select {
		case <-stopped:
			t.Fatalf("the owner stopped the cluster %s", what)
		case <-time.After(500 * time.Millisecond):
		}
	}
	notYet("under an attached process")
	late := openAttached(t, dataDir) // attaches while the owner waits
	if err := syscall.Kill(killed.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	notYet("under a process that attached while it waited")
	if err := query(ctx, late); err != nil {
		t.Fatalf("the late process's query: %v", err)
	}
	late.Close()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the owner still waits, its attached processes gone")
	}
	waitGone(t, pid)
}

// When the cluster does go under an attached process (its starter was killed: postgres
// stops with it), the attached process's error says so, not only that a socket file
// is missing.
func TestAttachedProcessErrorNamesItsStarter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := dbtest.TempDir(t)
	owner := startLifetimeChild(t, "owner", dataDir)
	d := openAttached(t, dataDir)
	defer d.Close()
	pid := postmasterPID(t, d.Cluster)
	if err := syscall.Kill(owner.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if _, err := os.Stat(filepath.Join(d.Cluster.SocketDir(), ".s.PGSQL.5432")); err == nil {
		t.Fatal("the socket outlived postgres")
	}
	d.Pool.Reset()
	var one int
	err := d.Pool.QueryRow(ctx, "SELECT 1").Scan(&one)
	if err == nil || !strings.Contains(err.Error(), "the toolwarden process that started it (pid "+strconv.Itoa(owner.cmd.Process.Pid)+") stopped it or exited") {
		t.Fatalf("a query once the starter was killed: %v, want it to name the starter", err)
	}
}

// A supervised process (serve) attached to a cluster a command started does not hold
// that command's Close back: it restarts the cluster itself once the command stopped it.
func TestSupervisedProcessDoesNotHoldTheOwner(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dataDir := dbtest.TempDir(t)
	quiet := &db.ClusterOptions{Fast: true, Logger: slog.New(slog.DiscardHandler)}
	c, err := db.StartCluster(ctx, dataDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	served, err := db.StartCluster(ctx, dataDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(served.Stop)
	supervised := make(chan struct{})
	go func() { _ = served.Supervise(ctx); close(supervised) }()
	defer func() { cancel(); <-supervised }()

	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the starter waits for a supervised process")
	}
	for end := time.Now().Add(30 * time.Second); !served.Owned(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the supervised process did not start the cluster again")
		}
	}
}

// The clients lock is readable by everyone and opened read only (flock needs no more): a
// lock file a command run as root made does not keep a serve running as its own user
// from attaching, as one made 0600 did.
func TestClientsLockOpenToEveryUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := dbtest.TempDir(t)
	quiet := &db.ClusterOptions{Fast: true, Logger: slog.New(slog.DiscardHandler)}
	c, err := db.StartCluster(ctx, dataDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	lock := filepath.Join(c.Dir, "clients.lock")
	if err := os.WriteFile(lock, nil, 0o444); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	if err := os.Chmod(lock, 0o444); err != nil { // read only for its owner too
		t.Fatal(err)
	}
	attached, err := db.StartCluster(ctx, dataDir, quiet)
	if err != nil {
		t.Fatalf("attaching with a read-only lock file: %v", err)
	}
	attached.Stop()
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	again, err := db.StartCluster(ctx, dataDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	again.Stop()
	fi, err := os.Stat(lock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("clients.lock made %v, want readable by group and others", fi.Mode().Perm())
	}
}
