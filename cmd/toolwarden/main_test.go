package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) {
	// The fault tests run this test binary as a real toolwarden process (see startServe).
	if os.Getenv(asToolwardenEnv) == "1" {
		main()
		os.Exit(0)
	}
	// ... and as a stdio MCP server that such a process starts.
	mcptest.Main()
	// Tests create throwaway clusters: durability does not matter.
	os.Setenv("TOOLWARDEN_TEST_FAST_DB", "1")
	dbtest.Main(m)
}

func runCmd(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

// TestServeAndCommands runs `serve` on a fresh data dir, then the other commands against
// the same data dir while it runs (they attach to its cluster), then stops it.
func TestServeAndCommands(t *testing.T) {
	dataDir := dbtest.TempDir(t)
	readyFile := filepath.Join(dataDir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--ready-file", readyFile}, nil, &out, &errb)
	}()
	var addr string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(readyFile); err == nil && len(b) > 0 {
			addr = string(b)
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v\n%s", err, errb.String())
		default:
		}
	}
	if addr == "" {
		t.Fatalf("serve never became ready:\n%s", errb.String())
	}
	if !strings.Contains(out.String(), "username: admin") || !strings.Contains(out.String(), "password: ") {
		t.Fatalf("first start did not print the admin password:\n%s", out.String())
	}
	if st, err := os.Stat(filepath.Join(dataDir, "secret.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret.key: %v, mode %v; want created 0600", err, st)
	}
	// serve signs the audit chain's head on start (and hourly) into the data dir.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if latest, _ := audit.LatestCheckpoint(filepath.Join(dataDir, "checkpoints")); latest != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve wrote no checkpoint in <data-dir>/checkpoints")
		}
	}

	// user create with --password-stdin, then token create for that user.
	stdout, stderr, err := runCmd(t, "a-long-enough-password\n", "user", "create", "--data-dir", dataDir, "--name", "robot", "--role", "tool_user", "--password-stdin")
	if err != nil || !strings.Contains(stdout, "created user robot") {
		t.Fatalf("user create: %v\n%s%s", err, stdout, stderr)
	}
	stdout, stderr, err = runCmd(t, "", "token", "create", "--data-dir", dataDir, "--user", "robot", "--name", "agent")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	token := lines[len(lines)-1]
	if !strings.HasPrefix(token, "tw_") {
		t.Fatalf("token create: last line of stdout is %q, want the token", token)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `"agent"`) {
		t.Fatalf("the CLI-made token against the running server: got %d %s", res.StatusCode, body)
	}

	// Bad input names the problem.
	if _, _, err := runCmd(t, "", "user", "create", "--data-dir", dataDir, "--name", "x", "--role", "wizard"); err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("user create with a bad role: got %v, want an error naming role", err)
	}
	if _, _, err := runCmd(t, "", "token", "create", "--data-dir", dataDir, "--user", "nobody", "--name", "x"); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("token create for a missing user: got %v", err)
	}

	stdout, _, err = runCmd(t, "", "audit", "verify", "--data-dir", dataDir)
	if err != nil || !strings.Contains(stdout, "audit chain OK") {
		t.Fatalf("audit verify: %v %s", err, stdout)
	}
	stdout, _, err = runCmd(t, "", "migrate", "status", "--data-dir", dataDir)
	if err != nil || !strings.Contains(stdout, "(current)") {
		t.Fatalf("migrate status: %v %s", err, stdout)
	}

	// serve reaches its database only as the application's role, which cannot rewrite
	// audit_log: the owner's connections were the migrations', and they ended.
	func() {
		c, err := db.StartCluster(context.Background(), dataDir, &db.ClusterOptions{Fast: true}) // attaches
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop() // lets go of the cluster: serve, which started it, waits for that to stop it
		conn, err := pgx.Connect(context.Background(), c.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var roles []string
		if err := conn.QueryRow(context.Background(), `SELECT coalesce(array_agg(DISTINCT usename::text), '{}') FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`).Scan(&roles); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(roles, []string{"toolwarden_app"}) {
			t.Fatalf("serve's connections to its database are as %v, want only toolwarden_app", roles)
		}
	}()

	pid := postmasterPID(t, dataDir)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("postgres (pid %d) still running after serve stopped", pid)
	}

	// Commands also work with nothing running: they start the cluster themselves.
	stdout, _, err = runCmd(t, "", "audit", "verify", "--data-dir", dataDir)
	if err != nil {
		t.Fatalf("audit verify on a stopped server's data dir: %v %s", err, stdout)
	}
	stdout, _, err = runCmd(t, "", "migrate", "down", "1", "--data-dir", dataDir)
	if err != nil || !strings.Contains(stdout, "(1 pending)") {
		t.Fatalf("migrate down 1: %v %s", err, stdout)
	}
	stdout, _, err = runCmd(t, "", "migrate", "--data-dir", dataDir, "up")
	if err != nil || !strings.Contains(stdout, "(current)") {
		t.Fatalf("migrate up: %v %s", err, stdout)
	}

	// Tampering (by someone able to disable the triggers) makes `audit verify` exit 1
	// and name the entry.
	c, err := db.StartCluster(context.Background(), dataDir, &db.ClusterOptions{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	conn, err := pgx.Connect(context.Background(), c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var victim int64
	if _, err := conn.Exec(context.Background(), `ALTER TABLE audit_log DISABLE TRIGGER USER`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), `UPDATE audit_log SET actor_name = 'mallory' WHERE id = (SELECT min(id) + 1 FROM audit_log) RETURNING id`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = runCmd(t, "", "audit", "verify", "--data-dir", dataDir)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(stdout, "BROKEN at entry "+strconv.FormatInt(victim, 10)) {
		t.Fatalf("audit verify after tampering: got %v %q, want exit 1 naming entry %d", err, stdout, victim)
	}
}

// `pg-template` makes the cluster template once and keeps a current one; a first start
// with --pg-template copies it: `migrate up` finds a new data dir already current, where
// without the template it applies every migration.
func TestPGTemplateCommand(t *testing.T) {
	t.Parallel()
	tpl := filepath.Join(dbtest.TempDir(t), "tpl")
	out, _, err := runCmd(t, "", "pg-template", "--out", tpl)
	if err != nil || !strings.Contains(out, "made the cluster template in "+tpl) {
		t.Fatalf("pg-template: %v %q", err, out)
	}
	out, _, err = runCmd(t, "", "pg-template", "--out", tpl)
	if err != nil || !strings.Contains(out, "is current") {
		t.Fatalf("pg-template again: %v %q", err, out)
	}
	fromTemplate := dbtest.TempDir(t)
	_, stderr, err := runCmd(t, "", "migrate", "up", "--data-dir", fromTemplate, "--pg-template", tpl)
	if err != nil || strings.Contains(stderr, "applying migration") {
		t.Fatalf("migrate up on a data dir made from the template: %v %q; want nothing to apply", err, stderr)
	}
	if out, _, err := runCmd(t, "", "migrate", "status", "--data-dir", fromTemplate); err != nil || !strings.Contains(out, "(current)") {
		t.Fatalf("migrate status on a data dir made from the template: %v %q", err, out)
	}
	_, stderr, err = runCmd(t, "", "migrate", "up", "--data-dir", dbtest.TempDir(t), "--pg-template", "")
	if err != nil || !strings.Contains(stderr, "applying migrations 1 to") {
		t.Fatalf("migrate up on a data dir made by initdb: %v %q; want every migration applied", err, stderr)
	}
}

// status, down and force on a mistyped --data-dir say it holds no database, and create
// nothing there (status makes the cluster only in a data dir that exists).
func TestMigrateOnAMistypedDataDir(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"status"}, {"down", "1"}, {"force", "40"}} {
		typo := filepath.Join(t.TempDir(), "typo")
		stdout, stderr, err := runCmd(t, "", append(append([]string{"migrate"}, args...), "--data-dir", typo)...)
		if err == nil || !strings.Contains(err.Error(), "holds no database") {
			t.Errorf("migrate %v --data-dir typo: %v\n%s%s; want a refusal saying it holds no database", args, err, stdout, stderr)
		}
		if names, _ := os.ReadDir(typo); len(names) > 1 || len(names) == 1 && names[0].Name() != lockFileName {
			t.Errorf("migrate %v --data-dir typo: made %v in it", args, names)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"bogus"}, {"user"}, {"token", "list"}, {"migrate", "down"}, {"migrate", "down", "zero"}, {"pg-template", "extra"}} {
		if _, _, err := runCmd(t, "", args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
	// Usage errors that must say what is wrong. The database URL leads nowhere: a
	// command that takes a wrong command line for a right one fails on it instead.
	nowhere := "postgres://toolwarden@127.0.0.1:1/none?connect_timeout=1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		// A later flag is wrong too: a serve that took 0 would stop on it, not start.
		{[]string{"serve", "--rate-limit", "0", "--template-max-timeout", "soon", "--data-dir", t.TempDir()}, "--rate-limit: 0 is not a limit"},
		{[]string{"secrets", "rotate", "--data-dir", t.TempDir(), "--database-url", nowhere, "now"}, `unexpected argument "now"`},
		{[]string{"secrets", "status", "--data-dir", t.TempDir(), "--database-url", nowhere, "all"}, `unexpected argument "all"`},
		{[]string{"secrets", "retire-key", "k1", "--data-dir", t.TempDir(), "--database-url", nowhere, "k2"}, `unexpected argument "k2"`},
		{[]string{"secrets", "retire-key", "--data-dir", t.TempDir(), "--database-url", nowhere, "k1", "k2"}, `unexpected argument "k2"`},
	} {
		if _, stderr, err := runCmd(t, "", tc.args...); !errors.Is(err, errUsage) || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: got %v\n%s\nwant a usage error saying %q", tc.args, err, stderr, tc.want)
		}
	}
	out, _, err := runCmd(t, "", "version")
	if err != nil || !strings.HasPrefix(out, "toolwarden ") {
		t.Errorf("version: %q %v", out, err)
	}
}

// TOOLWARDEN_RATE_LIMIT=0 is refused as --rate-limit 0 is, instead of taken for the
// default: -1 is no limit.
func TestRateLimitZeroFromEnv(t *testing.T) {
	t.Setenv("TOOLWARDEN_RATE_LIMIT", "0")
	_, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", "soon", "--data-dir", t.TempDir())
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--rate-limit: 0 is not a limit") || !strings.Contains(stderr, "-1") {
		t.Errorf("got %v\n%s\nwant a usage error naming --rate-limit and -1", err, stderr)
	}
}

func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "pg", "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	return pid
}

// --trusted-proxy takes CIDRs and single addresses, and names what it cannot read.
func TestParseProxies(t *testing.T) {
	t.Parallel()
	got, err := parseProxies("10.0.0.0/8, 192.168.1.7 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.168.1.7/32", "fd00::/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("proxy %d: got %s, want %s", i, got[i], want[i])
		}
	}
	if got, err := parseProxies(""); err != nil || len(got) != 0 {
		t.Errorf("empty: got %v, %v; want none", got, err)
	}
	if _, err := parseProxies("10.0.0.0/8,proxy.local"); err == nil || !strings.Contains(err.Error(), `"proxy.local"`) {
		t.Errorf("a name: got %v, want an error naming it", err)
	}
}

// --confine takes auto, required or off, and names what it cannot read; the spec
// follows it.
func TestConfineFlag(t *testing.T) {
	t.Parallel()
	_, stderr, err := runCmd(t, "", "serve", "--confine", "sometimes", "--data-dir", t.TempDir())
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, `--confine: "sometimes" is not one of auto, required, off`) {
		t.Errorf("got %v\n%s\nwant a usage error naming --confine", err, stderr)
	}
	for mode, want := range map[string][2]bool{"auto": {false, false}, "required": {true, false}, "off": {false, true}} {
		spec, _, err := confinement(config{DataDir: t.TempDir(), Confine: mode}, "")
		if err != nil || spec.Required != want[0] || spec.Off != want[1] {
			t.Errorf("%s: got %+v, %v", mode, spec, err)
		}
	}
}

// TestConfineDatabaseAccess: what could connect to the database is hidden for both URLs:
// the migrate URL's socket too (as the tables' owner, a server could rewrite audit_log),
// and the client certificate, key and passfile that either URL names.
func TestConfineDatabaseAccess(t *testing.T) {
	t.Parallel()
	sockDir, creds := t.TempDir(), t.TempDir()
	cert, key := writeClientCert(t, creds)
	pass := writeFile(t, creds, "pgpass", "*:*:*:toolwarden_app:secret\n")
	c := config{
		DataDir:            t.TempDir(),
		DatabaseURL:        "postgres://a@localhost/x?passfile=" + pass,
		MigrateDatabaseURL: "host=" + sockDir + ",localhost user=o dbname=x sslmode=require sslcert='" + cert + "' sslkey='" + key + "'",
	}
	spec, _, err := confinement(c, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sockDir, cert, key, pass} {
		if !slices.Contains(spec.Hide, p) {
			t.Errorf("%s is not hidden: %v", p, spec.Hide)
		}
	}
}

// writeClientCert writes a self-signed client certificate and its key into dir: what
// a client presents to PostgreSQL for certificate authentication.
func writeClientCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "o"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	key = writeFile(t, dir, "client.key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	cert = writeFile(t, dir, "client.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	return cert, key
}

// import starts the stdio servers a file registers (to discover their tools) confined
// as serve starts them: --confine (TOOLWARDEN_CONFINE) is read and checked as serve's,
// and a checkpoint key kept outside the data dir is hidden too. It says how they run.
func TestImportConfine(t *testing.T) {
	dir := dbtest.TempDir(t)
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"local": map[string]any{"command": os.Args[0]}}})
	file := writeFile(t, dir, "mcp.json", string(cfg))
	_, stderr, err := runCmd(t, "", "import", "--confine=bogus", "--data-dir", dir, file)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, `toolwarden import: --confine: "bogus" is not one of auto, required, off`) {
		t.Errorf("--confine=bogus: got %v\n%s\nwant a usage error naming --confine", err, stderr)
	}
	url := dbtest.NewURL(t)
	cpKey := filepath.Join(t.TempDir(), "checkpoint.key")
	t.Setenv("TOOLWARDEN_CHECKPOINT_KEY_FILE", cpKey)
	confinement := func(mode string) string {
		t.Helper()
		t.Setenv("TOOLWARDEN_CONFINE", mode)
		stdout, stderr, err := runCmd(t, "", "import", "--database-url", url, "--data-dir", dir, file)
		if err != nil {
			t.Fatalf("import with TOOLWARDEN_CONFINE=%s: %v\n%s%s", mode, err, stdout, stderr)
		}
		_, how, ok := strings.Cut(stderr, "stdio servers this import discovers run with confinement: ")
		if !ok {
			t.Fatalf("import with TOOLWARDEN_CONFINE=%s did not say how it confines stdio servers:\n%s", mode, stderr)
		}
		how, _, _ = strings.Cut(how, "\n")
		return how
	}
	if how := confinement("off"); !strings.HasPrefix(how, "none: turned off") {
		t.Errorf("TOOLWARDEN_CONFINE=off: %q", how)
	}
	// Where namespaces work, required confines as auto does (hiding the checkpoint key);
	// elsewhere it starts nothing.
	if how := confinement("required"); !strings.Contains(how, "(--confine=required)") && !strings.Contains(how, "hidden: ") {
		t.Errorf("TOOLWARDEN_CONFINE=required: %q", how)
	} else if strings.Contains(how, "hidden: ") && !strings.Contains(how, filepath.Dir(cpKey)) {
		t.Errorf("TOOLWARDEN_CONFINE=required: %q does not hide the checkpoint key's directory %s", how, filepath.Dir(cpKey))
	}
	t.Setenv("TOOLWARDEN_CONFINE", "sometimes")
	if _, stderr, err := runCmd(t, "", "import", "--database-url", url, "--data-dir", dir, file); !errors.Is(err, errUsage) || !strings.Contains(stderr, `--confine: "sometimes"`) {
		t.Errorf("TOOLWARDEN_CONFINE=sometimes: got %v\n%s\nwant a usage error naming --confine", err, stderr)
	}
}

// --template-max-timeout takes a duration from 1s to 10m and names what it cannot read.
func TestTemplateMaxTimeoutFlag(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"soon", "500ms", "1h", "-5s"} {
		_, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", v, "--data-dir", t.TempDir())
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, `--template-max-timeout: "`+v+`" is not a duration from 1s to 10m0s`) {
			t.Errorf("%s: got %v\n%s\nwant a usage error naming --template-max-timeout", v, err, stderr)
		}
	}
}

// A database a later release migrated: `migrate status` says so instead of calling it
// current.
func TestMigrateStatusOfANewerDatabase(t *testing.T) {
	url := dbtest.NewURL(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE schema_migrations SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCmd(t, "", "migrate", "status", "--database-url", url)
	if err != nil || !strings.Contains(stdout, "newer than this binary") || strings.Contains(stdout, "(current)") {
		t.Fatalf("migrate status: %v %q %q; want it named newer than this binary", err, stdout, stderr)
	}
}

// A migration that failed half way leaves the database dirty: `migrate up` says how to
// recover, naming `migrate force V`; force refuses a version this release does not
// have, and with one it has marks the database clean at that version, running nothing.
func TestMigrateForceAfterAFailedMigration(t *testing.T) {
	url := dbtest.NewURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	latest := db.LatestMigration()
	if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runCmd(t, "", "migrate", "up", "--database-url", url)
	if err == nil || !strings.Contains(err.Error()+stderr, "toolwarden migrate force V") ||
		!strings.Contains(err.Error()+stderr, fmt.Sprintf("marked dirty at version %d", latest)) {
		t.Fatalf("migrate up on a dirty database: %v %q; want how to recover, naming migrate force", err, stderr)
	}
	if _, stderr, err := runCmd(t, "", "migrate", "force", "--database-url", url); !errors.Is(err, errUsage) ||
		!strings.Contains(stderr, "usage: toolwarden migrate force V") {
		t.Fatalf("migrate force without V: %v %q", err, stderr)
	}
	if _, _, err := runCmd(t, "", "migrate", "force", fmt.Sprint(latest+1), "--database-url", url); err == nil ||
		!strings.Contains(err.Error(), "is not a migration of this release") {
		t.Fatalf("migrate force past the newest migration: %v", err)
	}
	var v int
	var dirty bool
	if err := conn.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &dirty); err != nil || uint(v) != latest || !dirty {
		t.Fatalf("after a refused force: version %d dirty %v (%v); want it unchanged", v, dirty, err)
	}
	stdout, stderr, err := runCmd(t, "", "migrate", "force", fmt.Sprint(latest), "--database-url", url)
	if err != nil || !strings.Contains(stdout, fmt.Sprintf("version %d of %d (current)", latest, latest)) {
		t.Fatalf("migrate force %d: %v %q %q", latest, err, stdout, stderr)
	}
	if stdout, _, err := runCmd(t, "", "migrate", "up", "--database-url", url); err != nil || !strings.Contains(stdout, "(current)") {
		t.Fatalf("migrate up after force: %v %q", err, stdout)
	}
}
