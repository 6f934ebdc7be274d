package db

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoPostgres means no PostgreSQL server binaries were found for the embedded cluster.
var ErrNoPostgres = errors.New("db: PostgreSQL server binaries (initdb, postgres) not found: " +
	"install the Debian package 'postgresql' (apt-get install postgresql) or set DATABASE_URL to an external PostgreSQL ≥ 14")

// Embedded cluster names. The superuser owns the tables and runs migrations; the
// application connects as AppRole (docs/security.md). The socket directory is private
// to the cluster's owner, so trust authentication over it is safe.
const (
	embeddedUser     = "toolwarden"
	embeddedDatabase = "toolwarden"
	// maxSocketPath is sun_path's size on Linux minus the terminating NUL.
	maxSocketPath = 107
	// initPrefix names the folders initdb makes a cluster in, beside the data folder.
	initPrefix = "data.init-"
)

// ClusterOptions tune the embedded cluster. The zero value is right for production.
type ClusterOptions struct {
	// Fast trades durability for speed (fsync off); only tests want it.
	Fast bool
	// Logger receives progress messages; nil means slog.Default().
	Logger *slog.Logger
	// Template is a cluster template's folder (MakeTemplate): a first start copies it
	// when it fits this build and this PostgreSQL, instead of running initdb. Empty: none.
	Template string
	// ClientsWait bounds how long Stop waits for the processes attached to the cluster
	// (waitForClients) before it stops the cluster under them: zero means 30 s, negative
	// as long as they stay attached.
	ClientsWait time.Duration
	// startTimeout, when set, replaces how long a start (60 s) or restart (30 s) waits
	// for a postmaster that neither answers nor recovers. Tests shorten it.
	startTimeout time.Duration
}

// Cluster is a private PostgreSQL cluster under <data-dir>/pg that listens only on a
// unix socket inside that folder.
type Cluster struct {
	Dir    string // <data-dir>/pg
	binDir string
	opts   ClusterOptions
	log    *slog.Logger

	mu      sync.Mutex
	cmd     *exec.Cmd // nil when this process did not start postgres
	done    chan struct{}
	owned   bool
	stopped bool         // Stop was called: the supervisor must not start it again
	state   ClusterState // the supervisor's view (Supervise)
	// clients is clientsLock, open while this process holds a lock on it (holdClients).
	clients *os.File
	// starter is the pid of the process that started the postmaster this one attached
	// to (0 when unknown or started here), for the error when it is gone (explainGone).
	starter int
}

// DataDir is where the cluster's files live.
func (c *Cluster) DataDir() string { return filepath.Join(c.Dir, "data") }

// SocketDir is the directory holding the cluster's unix socket.
func (c *Cluster) SocketDir() string { return filepath.Join(c.Dir, "run") }

// URL is a connection string for the cluster's toolwarden database, as its owner (the
// superuser): for migrations.
func (c *Cluster) URL() string { return c.URLFor(embeddedDatabase) }

// AppURL is a connection string for the cluster's toolwarden database as AppRole: what
// the application uses.
func (c *Cluster) AppURL() string { return c.AppURLFor(embeddedDatabase) }

// AppURLFor is a connection string for database name as AppRole.
func (c *Cluster) AppURLFor(name string) string {
	return fmt.Sprintf("host=%s user=%s dbname=%s sslmode=disable", c.SocketDir(), AppRole, name)
}

// URLFor is a connection string for database name on the cluster.
func (c *Cluster) URLFor(name string) string {
	return fmt.Sprintf("host=%s user=%s dbname=%s sslmode=disable", c.SocketDir(), embeddedUser, name)
}

// Owned reports whether this process started postgres (and so stops it).
func (c *Cluster) Owned() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned
}

// FindBinDir returns the directory holding initdb and postgres: `pg_config --bindir`
// first, then the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	for _, d := range binDirCandidates() {
		if hasServer(d) {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

// binDirCandidates are the folders FindBinDir looks in, in its order.
func binDirCandidates() []string {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
	return append(candidates, dirs...)
}

func hasServer(d string) bool {
	return isExecutable(filepath.Join(d, "postgres")) && isExecutable(filepath.Join(d, "initdb"))
}

// clusterBinDir is the bin folder to start the cluster in dataDir with: that of the
// major version its PG_VERSION names, as another major version refuses its files (a
// newer one installed beside it by an upgrade of the packages); FindBinDir's when there
// is no cluster yet.
func clusterBinDir(dataDir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if errors.Is(err, fs.ErrNotExist) {
		return FindBinDir()
	}
	if err != nil {
		return "", fmt.Errorf("db: the cluster's version: %w", err)
	}
	want := strings.TrimSpace(string(raw))
	var found []string
	for _, d := range binDirCandidates() {
		if !hasServer(d) {
			continue
		}
		major, err := binMajor(d)
		if err != nil {
			continue
		}
		if major == want {
			return d, nil
		}
		if s := major + " (" + d + ")"; !slices.Contains(found, s) {
			found = append(found, s)
		}
	}
	installed := "none"
	if len(found) > 0 {
		installed = strings.Join(found, ", ")
	}
	return "", fmt.Errorf("db: the cluster in %s was made by PostgreSQL %s, which is not installed (installed: %s): "+
		"install it beside the others (Debian: apt-get install postgresql-%s) and start again, or upgrade the cluster "+
		"to an installed version with pg_upgrade (docs/deploy.md, Upgrades)", dataDir, want, installed, want)
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// StartCluster creates the cluster under dataDir/pg on first use (initdb), then starts
// postgres, or attaches to one already running there (another toolwarden process on
// the same data dir). It returns once the database accepts connections.
func StartCluster(ctx context.Context, dataDir string, opts *ClusterOptions) (_ *Cluster, err error) {
	if opts == nil {
		opts = &ClusterOptions{}
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("db: data dir: %w", err)
	}
	c := &Cluster{Dir: filepath.Join(abs, "pg"), opts: *opts, log: opts.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	if sock := filepath.Join(c.SocketDir(), ".s.PGSQL.5432"); len(sock) > maxSocketPath {
		return nil, fmt.Errorf("db: data dir %q is too deep: the socket path %q is %d bytes, the limit is %d; choose a shorter --data-dir", abs, sock, len(sock), maxSocketPath)
	}

	// Held before looking for a running postmaster, so that the one found is not
	// stopped under this process (holdClients).
	if err := c.holdClients(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.releaseClients()
		}
	}()
	if c.running(ctx) || c.settled(ctx, settleWait) {
		c.starter = parentPID(c.postmasterPID())
		c.log.Info("database: using the embedded PostgreSQL already running", "dir", c.Dir, "started_by", c.starter)
		return c, nil
	}

	c.binDir, err = clusterBinDir(c.DataDir())
	if err != nil {
		return nil, err
	}
	cred, err := clusterCredential()
	if err != nil {
		return nil, err
	}
	if err := c.prepareDirs(cred); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.DataDir(), "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		copied, err := c.copiedTemplate(cred)
		if err != nil {
			return nil, err
		}
		if !copied {
			if err := c.initdb(ctx, cred); err != nil {
				return nil, err
			}
		}
	}
	if err := c.start(ctx, cred, 60*time.Second); err != nil {
		return nil, err
	}
	if err := c.ensureDatabase(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// clusterCredential is the unprivileged user postgres runs as when we are root
// (initdb and postgres refuse to run as root), or nil to run as ourselves.
func clusterCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("db: running as root, but neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL as; create one (useradd --system postgres) or run toolwarden as a normal user")
}

// prepareDirs creates the cluster folders with owner-only permissions and, when we run
// postgres as another user, hands them over and makes sure that user can reach them.
func (c *Cluster) prepareDirs(cred *syscall.Credential) error {
	for _, d := range []string{c.Dir, c.SocketDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("db: create %s: %w", d, err)
		}
	}
	removeStale(filepath.Join(c.Dir, copyPrefix+"*"))
	removeStale(filepath.Join(c.Dir, initPrefix+"*"))
	if cred == nil {
		return nil
	}
	err := filepath.WalkDir(c.Dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			err = os.Lchown(p, int(cred.Uid), int(cred.Gid))
		}
		// A postmaster still exiting (its serve was just killed) removes files as we
		// walk: one that is gone needs no owner.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("db: hand %s to uid %d: %w", c.Dir, cred.Uid, err)
	}
	// Every ancestor must be searchable by the postgres user. Where one is not (a
	// checkout under /root, say), add only the search bit for others: it lets a process
	// pass through by exact name but not list the folder.
	for dir := filepath.Dir(c.Dir); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("db: stat %s: %w", dir, err)
		}
		if !searchableBy(st, cred) {
			if err := os.Chmod(dir, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("db: %s is not reachable by uid %d and cannot be made so: %w", dir, cred.Uid, err)
			}
			c.log.Warn("database: added search permission for others so PostgreSQL can reach its folder", "dir", dir)
		}
		if dir == "/" || dir == "." {
			return nil
		}
	}
}

func searchableBy(st fs.FileInfo, cred *syscall.Credential) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := st.Mode().Perm()
	switch {
	case sys.Uid == cred.Uid:
		return mode&0o100 != 0
	case sys.Gid == cred.Gid:
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

func (c *Cluster) command(ctx context.Context, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.Dir
	// A fixed, minimal environment: no PG* variables of ours leak into the cluster.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a Ctrl-C in the terminal reaches toolwarden, which then
		// stops postgres cleanly, instead of killing postgres under it.
		Setpgid:    true,
		Credential: cred,
		// If toolwarden dies without stopping it (SIGKILL), postgres gets a fast
		// shutdown instead of lingering as an orphan.
		Pdeathsig: syscall.SIGINT,
	}
	return cmd
}

// initdbArgs make every embedded cluster (beside -D); a cluster template's stamp names
// them, so a template made otherwise is not used.
var initdbArgs = []string{"-U", embeddedUser, "--auth=trust", "-E", "UTF8", "--no-locale", "--no-instructions"}

// initdb makes the cluster in a folder beside the data folder and renames it into
// place once whole: initdb killed midway (a Ctrl-C cancels ctx) leaves a PG_VERSION
// without the rest, which a data folder must never hold (it is taken for a cluster).
func (c *Cluster) initdb(ctx context.Context, cred *syscall.Credential) error {
	start := time.Now()
	tmp := c.DataDir()
	// A data folder that exists already (a mount point, a link to another disk) cannot
	// be renamed onto: initdb fills it in place, as it always did.
	if fi, err := os.Stat(c.DataDir()); err == nil && fi.IsDir() {
		if cred != nil { // the folder, wherever a link leads
			if err := os.Chown(c.DataDir(), int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("db: initdb: %w", err)
			}
		}
	} else {
		if tmp, err = os.MkdirTemp(c.Dir, initPrefix); err != nil {
			return fmt.Errorf("db: initdb: %w", err)
		}
		defer os.RemoveAll(tmp) // gone once renamed
		if err := chownTo(tmp, cred); err != nil {
			return fmt.Errorf("db: initdb: %w", err)
		}
	}
	args := append([]string{"-D", tmp}, initdbArgs...)
	if c.opts.Fast {
		args = append(args, "--no-sync")
	}
	cmd := c.command(ctx, cred, "initdb", args...)
	// The whole group: initdb's postgres children would go on writing into tmp.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("db: initdb %s: %w\n%s", c.DataDir(), err, lastLines(out, 20))
	}
	if err := c.putInPlace(tmp); err != nil {
		return err
	}
	if !c.opts.Fast {
		if err := syncPath(c.Dir); err != nil {
			return fmt.Errorf("db: the new cluster is in place but not durable: %w", err)
		}
	}
	c.log.Info("database: created embedded PostgreSQL cluster", "dir", c.DataDir(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// putInPlace renames the cluster initdb made in dir to the data folder (nothing to do
// when it filled the data folder itself).
func (c *Cluster) putInPlace(dir string) error {
	if dir == c.DataDir() {
		return nil
	}
	if err := os.Rename(dir, c.DataDir()); err != nil {
		if _, serr := os.Stat(filepath.Join(c.DataDir(), "PG_VERSION")); serr == nil {
			return nil // another process starting on this data dir made it first
		}
		return fmt.Errorf("db: initdb: put the new cluster in place: %w", err)
	}
	return nil
}

func (c *Cluster) start(ctx context.Context, cred *syscall.Credential, timeout time.Duration) error {
	startAt := time.Now()
	if c.opts.startTimeout > 0 {
		timeout = c.opts.startTimeout
	}
	args := []string{"-D", c.DataDir(),
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + c.SocketDir(),
		"-c", "unix_socket_permissions=0700",
		"-c", "max_connections=200",
	}
	if c.opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	logPath := filepath.Join(c.Dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("db: open %s: %w", logPath, err)
	}
	defer logFile.Close()
	if cred != nil {
		_ = logFile.Chown(int(cred.Uid), int(cred.Gid))
	}
	// Not CommandContext: postgres must outlive the start-up context.
	cmd := c.command(context.Background(), cred, "postgres", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("db: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()

	c.mu.Lock()
	c.cmd, c.done, c.owned = cmd, done, true
	c.mu.Unlock()

	// A postmaster in recovery (crash recovery after a kill can take minutes) is waited
	// for however long it takes: stopping it would make the recovery start over. Only
	// one that neither answers nor recovers for timeout is given up on.
	check := time.NewTicker(min(10*time.Second, timeout))
	defer check.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	progressAt := startAt
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.ping(pctx)
		cancel()
		if err == nil {
			c.log.Info("database: embedded PostgreSQL started", "socket", c.SocketDir(), "took", time.Since(startAt).Round(time.Millisecond))
			return nil
		}
		select {
		case <-done:
			c.mu.Lock()
			c.cmd, c.owned = nil, false
			c.mu.Unlock()
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("db: postgres exited during start-up (log %s):\n%s", logPath, lastLines(log, 20))
		case <-ctx.Done():
			c.shutdown()
			return fmt.Errorf("db: waiting for postgres: %w", ctx.Err())
		case <-check.C:
			if c.recovering(cmd.Process.Pid, err) {
				progressAt = time.Now()
				c.log.Info("database: PostgreSQL is recovering; waiting for it", "for", time.Since(startAt).Round(time.Second), "log", logPath)
			} else if time.Since(progressAt) >= timeout {
				c.shutdown()
				return fmt.Errorf("db: postgres did not accept connections within %v (log %s): %w", timeout, logPath, err)
			}
		case <-tick.C:
		}
	}
}

// settleWait bounds how long StartCluster waits for a postmaster of its data dir that
// is alive but does not answer (settled).
const settleWait = 60 * time.Second

// settled waits, up to wait, while a postmaster of this data dir is alive but does not
// answer: one still shutting down because the serve that started it was killed (its
// Pdeathsig asks for a fast shutdown), or one still starting. It reports whether one
// answers; false once none is alive (or after wait), when a new one may be started:
// started at once, it would fail on the pid file the old one still holds.
func (c *Cluster) settled(ctx context.Context, wait time.Duration) bool {
	end := time.Now().Add(wait)
	for logged := false; ; logged = true {
		pid := c.postmasterPID()
		if !ProcessAlive(pid) || !c.isPostmaster(pid) {
			return false
		}
		if c.running(ctx) {
			return true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
		if !logged {
			c.log.Info("database: waiting for the embedded PostgreSQL of an earlier start to start or stop", "pid", pid, "dir", c.Dir)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recovering reports whether the postmaster pid, still starting, makes progress: it
// answers "the database system is starting up" or the like (57P03), or its pid file
// says it is starting.
func (c *Cluster) recovering(pid int, pingErr error) bool {
	status := c.postmasterStatus(pid)
	var pgErr *pgconn.PgError
	if errors.As(pingErr, &pgErr) && pgErr.Code == "57P03" {
		return status != "stopping"
	}
	return status == "starting"
}

// running reports whether a postgres of this data dir is already up and answering.
func (c *Cluster) running(ctx context.Context) bool {
	if !ProcessAlive(c.postmasterPID()) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.ping(pctx) == nil
}

func (c *Cluster) ping(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URLFor("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URLFor("postgres"))
	if err != nil {
		return fmt.Errorf("db: connect to embedded cluster: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, embeddedDatabase).Scan(&exists); err != nil {
		return fmt.Errorf("db: look for database: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{embeddedDatabase}.Sanitize()); err != nil && !IsUniqueViolation(err, "") {
			return fmt.Errorf("db: create database: %w", err)
		}
	}
	return ensureAppRole(ctx, conn)
}

// ensureAppRole creates AppRole with LOGIN, or lets it log in when a migration made it
// first (NOLOGIN). Its privileges come from the migrations.
func ensureAppRole(ctx context.Context, conn *pgx.Conn) error {
	var canLogin *bool
	err := conn.QueryRow(ctx, `SELECT (SELECT rolcanlogin FROM pg_roles WHERE rolname = $1)`, AppRole).Scan(&canLogin)
	if err != nil {
		return fmt.Errorf("db: look for role %s: %w", AppRole, err)
	}
	role := pgx.Identifier{AppRole}.Sanitize()
	switch {
	case canLogin == nil:
		_, err = conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS")
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object: made meanwhile
			err = nil
		}
	case !*canLogin:
		_, err = conn.Exec(ctx, "ALTER ROLE "+role+" LOGIN")
	}
	if err != nil {
		return fmt.Errorf("db: create role %s: %w", AppRole, err)
	}
	return nil
}

// Stop shuts postgres down (fast shutdown: open transactions roll back) if this process
// started it, once no other process is attached to it or ClusterOptions.ClientsWait has
// passed (waitForClients), and waits for it to exit. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.waitForClients()
	c.shutdown()
	c.releaseClients()
}

// clientsLock is the file in the cluster's folder that processes attached to the
// cluster hold a shared lock on.
//
// The cluster's lifetime: the process that starts postgres (its owner) is its parent,
// and postgres gets a fast shutdown when the owner dies (Pdeathsig), so it cannot
// outlive its owner; the owner stops it at Stop. Any other toolwarden process on the
// data dir (a command run while serve or another command runs) attaches to it instead.
// An attached process takes a shared flock on clientsLock before it looks for a running
// postmaster and holds it until its Stop (holdClients); the owner's Stop first takes the
// lock exclusively, waiting for every attached process to finish (waitForClients; for at
// most ClusterOptions.ClientsWait, then it stops the cluster under them), and
// keeps it until postgres has exited. So an attached process does not see the database
// stopped by its owner (unless it outlasts that wait): one that attaches while the owner waits is waited for too, and
// one that starts while the owner stops waits for the stop and then starts postgres
// itself. The kernel drops the lock of a process that dies, so a crashed one does not
// keep the cluster running. Only a supervised process (serve, Supervise) does not hold
// the lock: it restarts the cluster when it goes, and a command that started the
// cluster must not wait for a server to end.
const clientsLock = "clients.lock"

// holdClients takes the shared lock on clientsLock, waiting while an owner stops the
// cluster (it holds the lock exclusively). With no cluster folder yet there is no
// cluster to attach to, and nothing to hold.
func (c *Cluster) holdClients(ctx context.Context) error {
	if _, err := os.Stat(c.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	f, err := openClientsLock(c.Dir)
	if errors.Is(err, fs.ErrPermission) {
		// Made by another user (a command run as root beside a serve that is not):
		// attach without it, as before the lock existed, rather than refuse to start.
		c.log.Warn("database: cannot open the embedded PostgreSQL's clients lock; attaching without it (the process that started it may stop it under this one)",
			"err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("db: open the embedded cluster's lock: %w", err)
	}
	for logged := false; ; logged = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("db: lock %s: %w", f.Name(), err)
		}
		if !logged {
			// Warn: a command's logger shows no less, and a silent wait looks like a hang.
			c.log.Warn("database: waiting for another toolwarden process to stop the embedded PostgreSQL", "dir", c.Dir)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("db: waiting for the embedded PostgreSQL to stop: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.mu.Lock()
	c.clients = f
	c.mu.Unlock()
	return nil
}

// openClientsLock opens (creating it) the clients lock in the cluster's folder dir: read
// only, since flock needs no more, and readable by all, so that a lock file one user
// made (a command run as root) does not keep another (serve as its own user) out.
func openClientsLock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, clientsLock), os.O_RDONLY|os.O_CREATE, 0o644)
	if err == nil {
		_ = f.Chmod(0o644) // whatever the umask; only its owner (or root) can, and need
	}
	return f, err
}

// releaseClients drops this process's lock on clientsLock, if it holds one.
func (c *Cluster) releaseClients() {
	c.mu.Lock()
	f := c.clients
	c.clients = nil
	c.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
}

// defaultClientsWait is ClusterOptions.ClientsWait's default: the owner's stop must fit
// in a supervisor's stop timeout (docs/deploy.md), and an attached command stalled on
// its output (`export | less`, a FIFO nobody reads) would hold it for ever, after which
// systemd or Docker kill postgres with everything else.
const defaultClientsWait = 30 * time.Second

// waitForClients takes clientsLock exclusively when this process runs the cluster's
// postmaster, waiting while processes attached to it hold it shared, so that a command
// does not lose its database part way; but no longer than ClusterOptions.ClientsWait,
// then it logs which processes hold the lock and returns without it: the cluster stops
// under them. A second interrupt ends the wait with the process (and postgres with it).
// The lock is kept until releaseClients.
func (c *Cluster) waitForClients() {
	c.mu.Lock()
	f, cmd, done := c.clients, c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return // our postmaster is gone: nothing of ours to stop
	default:
	}
	if f == nil {
		var err error
		if f, err = openClientsLock(c.Dir); err != nil {
			c.log.Warn("database: cannot tell whether other toolwarden processes use the embedded PostgreSQL; stopping it", "err", err)
			return
		}
		c.mu.Lock()
		c.clients = f
		c.mu.Unlock()
	}
	bound := c.opts.ClientsWait
	if bound == 0 {
		bound = defaultClientsWait
	}
	start, next := time.Now(), time.Second
	for {
		// Turning our shared lock (if any) exclusive drops it first when it cannot be
		// had: no matter, an owner needs none.
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			c.log.Warn("database: cannot tell whether other toolwarden processes use the embedded PostgreSQL; stopping it", "err", err)
			return
		}
		waited := time.Since(start)
		if bound > 0 && waited >= bound {
			c.log.Warn("database: stopping the embedded PostgreSQL under the toolwarden processes still using it: they did not finish within the wait",
				"dir", c.Dir, "waited", waited.Round(time.Second), "holders", lockHolders(f))
			return
		}
		if waited >= next {
			attrs := []any{"dir", c.Dir, "waited", waited.Round(time.Second), "holders", lockHolders(f)}
			if bound > 0 {
				attrs = append(attrs, "at_most", bound)
			}
			c.log.Warn("database: waiting for the other toolwarden processes using the embedded PostgreSQL to finish before stopping it", attrs...)
			next = min(2*next, next+time.Minute)
		}
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lockHolders names the processes holding a flock on f, as /proc/locks lists them (by
// the file's inode): "pid 4242 (toolwarden export)", the command's first argument only
// (the others may hold a password). "unknown" when /proc cannot tell.
func lockHolders(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return "unknown"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "unknown"
	}
	raw, err := os.ReadFile("/proc/locks")
	if err != nil {
		return "unknown"
	}
	ino := ":" + strconv.FormatUint(st.Ino, 10)
	var holders []string
	for line := range strings.Lines(string(raw)) {
		// "1: FLOCK  ADVISORY  READ 4242 08:01:1234 0 EOF"; a waiter's has "->" after the id.
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] != "FLOCK" || !strings.HasSuffix(fields[5], ino) {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 {
			continue // in another PID namespace
		}
		who := "pid " + fields[4]
		if cmd := commandOf(pid); cmd != "" {
			who += " (" + cmd + ")"
		}
		if !slices.Contains(holders, who) {
			holders = append(holders, who)
		}
	}
	if len(holders) == 0 {
		return "unknown"
	}
	return strings.Join(holders, ", ")
}

// commandOf is process pid's program name and first argument when it is a word (a
// subcommand: "toolwarden export"); "" when unknown.
func commandOf(pid int) string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(raw) == 0 {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	cmd := filepath.Base(args[0])
	if len(args) > 1 && args[1] != "" && strings.Trim(args[1], "abcdefghijklmnopqrstuvwxyz-") == "" {
		cmd += " " + args[1]
	}
	return cmd
}

// parentPID is process pid's parent (0 when unknown, or when it is init: the parent
// died).
func parentPID(pid int) int {
	if pid <= 0 {
		return 0
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	if ppid <= 1 {
		return 0
	}
	return ppid
}

// explainGone adds to err, a failed connection to the cluster, that the process which
// started the cluster stopped it, when this process had attached to it and its
// postmaster is gone or stopping: the bare error (a socket file that does not exist)
// does not say why.
func (c *Cluster) explainGone(err error) error {
	c.mu.Lock()
	owned, starter := c.owned, c.starter
	c.mu.Unlock()
	if owned {
		return err
	}
	if pid := c.postmasterPID(); ProcessAlive(pid) && c.isPostmaster(pid) && c.postmasterStatus(pid) != "stopping" {
		return err
	}
	who := "the toolwarden process that started it"
	if starter > 0 {
		who += " (pid " + strconv.Itoa(starter) + ")"
	}
	return fmt.Errorf("the embedded PostgreSQL in %s is not running: %s stopped it or exited while this process was attached to it: %w", c.Dir, who, err)
}

// explainDial wraps dial, which connects to the cluster, to explain its errors
// (explainGone).
func (c *Cluster) explainDial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			err = c.explainGone(err)
		}
		return conn, err
	}
}

// shutdown stops the postgres this process started, if any.
func (c *Cluster) shutdown() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.cmd, c.owned = nil, false
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		c.log.Info("database: embedded PostgreSQL stopped")
		return
	case <-time.After(30 * time.Second):
	}
	c.log.Warn("database: postgres did not stop in 30s; killing it")
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
