package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/proctrack"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// asToolwardenEnv makes the test binary run main() (TestMain): a real toolwarden
// process, which these tests start, kill and start again.
const asToolwardenEnv = "TW_TEST_RUN_AS_TOOLWARDEN"

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveProc is a `toolwarden serve` running as a process of its own (the tests' and the
// benchmarks').
type serveProc struct {
	cmd     *exec.Cmd
	addr    string // once ready
	ready   string // the file serve writes its address to
	started time.Time
	stderr  *syncBuffer
	done    chan struct{}
	err     error // Wait's, once done is closed
}

const testAdminPassword = "fault-test-admin-password"

// launch starts `toolwarden serve --data-dir dir args...` and returns at once.
func launch(tb testing.TB, dir string, args ...string) *serveProc {
	tb.Helper()
	return launchEnv(tb, append(os.Environ(), asToolwardenEnv+"=1"), dir, args...)
}

// launchEnv is launch with the environment env (which must run the test binary as
// toolwarden: asToolwardenEnv).
func launchEnv(tb testing.TB, env []string, dir string, args ...string) *serveProc {
	tb.Helper()
	ready := filepath.Join(tb.TempDir(), "ready")
	all := append([]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--ready-file", ready,
		"--admin-password", testAdminPassword}, args...)
	cmd := exec.Command(os.Args[0], all...)
	cmd.Env = env
	p := &serveProc{cmd: cmd, ready: ready, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.Discard, p.stderr
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.stop)
	return p
}

// stop ends the process with SIGTERM (SIGKILL after 30 s) and waits for it.
func (p *serveProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startServe is launch, waiting until the server is ready.
func startServe(tb testing.TB, dir string, args ...string) *serveProc {
	tb.Helper()
	p := launch(tb, dir, args...)
	p.waitReady(tb)
	return p
}

// waitReady waits until a launched serve is ready and knows its address; took is the
// time from the process's start to its ready file.
func (p *serveProc) waitReady(tb testing.TB) (took time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		if b, err := os.ReadFile(p.ready); err == nil && len(b) > 0 {
			took = time.Since(p.started)
			p.addr = string(b)
			return took
		}
		select {
		case <-p.done:
			tb.Fatalf("serve exited early: %v\n%s", p.err, p.stderr.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("serve never became ready:\n%s", p.stderr.String())
		}
	}
}

// kill sends sig and waits for the process to end.
func (p *serveProc) kill(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		tb.Fatalf("serve did not end after %v", sig)
	}
}

// request makes an API request with token (none: "").
func (p *serveProc) request(tb testing.TB, token, method, path string, body any) (int, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+p.addr+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// do is request expecting status want; out, when given, receives the JSON answer.
func (p *serveProc) do(tb testing.TB, token, method, path string, body any, want int, out any) {
	tb.Helper()
	code, raw := p.request(tb, token, method, path, body)
	if code != want {
		tb.Fatalf("%s %s: got %d %s, want %d", method, path, code, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			tb.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// adminToken creates an API token for admin through the CLI, against the running serve.
func adminToken(t *testing.T, dir string) string {
	t.Helper()
	stdout, stderr, err := runCmd(t, "", "token", "create", "--data-dir", dir, "--user", "admin", "--name", "fault-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	return lines[len(lines)-1]
}

// A second serve on a data dir another serve runs on exits at once with a message
// naming the data dir and the first one's pid, and starts nothing; the CLI's other
// commands still work against the running one; once the first is gone (even killed),
// serve starts again.
func TestSecondServeRefused(t *testing.T) {
	dir := dbtest.TempDir(t)
	first := startServe(t, dir)
	pgPID := postmasterPID(t, dir)

	second := launch(t, dir)
	select {
	case <-second.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the second serve did not exit:\n%s", second.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(second.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second serve: got %v, want exit status 1\n%s", second.err, second.stderr.String())
	}
	msg := second.stderr.String()
	if !strings.Contains(msg, "data dir "+dir+" is in use") || !strings.Contains(msg, fmt.Sprintf("(pid %d)", first.cmd.Process.Pid)) {
		t.Fatalf("second serve's message: got %q, want it to name %s and pid %d", msg, dir, first.cmd.Process.Pid)
	}
	if got := postmasterPID(t, dir); got != pgPID {
		t.Fatalf("postmaster pid: got %d, want %d (the first serve's, untouched)", got, pgPID)
	}
	// The other commands attach to the running cluster.
	if stdout, _, err := runCmd(t, "", "audit", "verify", "--data-dir", dir); err != nil || !strings.Contains(stdout, "audit chain OK") {
		t.Fatalf("audit verify while serve runs: %v %s", err, stdout)
	}
	token := adminToken(t, dir)
	if code, body := first.request(t, token, http.MethodGet, "/api/v1/servers", nil); code != http.StatusOK {
		t.Fatalf("the first serve after the refusal: got %d %s", code, body)
	}

	// SIGKILL leaves no lock behind: the kernel releases it with the process.
	first.kill(t, syscall.SIGKILL)
	again := startServe(t, dir)
	if code, body := again.request(t, "", http.MethodGet, "/healthz", nil); code != http.StatusOK {
		t.Fatalf("healthz of the restarted serve: got %d %s", code, body)
	}
	again.kill(t, syscall.SIGTERM)
	stopLeftoverCluster(t, dir)
}

// exited waits for a launched serve that must not start to end, and returns what it
// said; it must exit with status 1.
func (p *serveProc) exited(t *testing.T) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("serve did not exit:\n%s", p.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve: got %v, want exit status 1\n%s", p.err, p.stderr.String())
	}
	return p.stderr.String()
}

// serve refuses a key file that lacks a key the database's secrets are sealed with,
// naming the file and the key: the key file deleted (or --secret-key-file mistyped),
// where serve would make a new key and leave it behind, or another installation's key.
// A replica with such a key could not open the secrets, and the approvals it sealed
// would look altered to the others. Keys lost for good are named to start anyway.
func TestServeRefusesAKeyFileWithoutTheDatabasesKeys(t *testing.T) {
	dir := dbtest.TempDir(t)
	p := startServe(t, dir)
	token := adminToken(t, dir)
	p.do(t, token, http.MethodPost, "/api/v1/servers", map[string]any{"name": "sealed", "type": "streamable_http",
		"url": "http://127.0.0.1:9/mcp", "enabled": false, "headers": map[string]string{"X-Secret": "sealed-header-value"}}, http.StatusCreated, nil)
	p.stop()
	keyPath := filepath.Join(dir, "secret.key")
	keys, err := secrets.LoadKeyring(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	kid := keys.PrimaryID()
	saved, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}

	msg := launch(t, dir).exited(t)
	if !strings.Contains(msg, "no secret key file at "+keyPath) || !strings.Contains(msg, kid) {
		t.Fatalf("serve without its key file: got %q, want it to name %s and key %s", msg, keyPath, kid)
	}
	if _, err := os.Stat(keyPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused serve left a key file behind: %v", err)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	writeKeyFile(t, other)
	msg = launch(t, dir, "--secret-key-file", other).exited(t)
	if !strings.Contains(msg, "which "+other+" does not hold") || !strings.Contains(msg, kid) {
		t.Fatalf("serve with another key file: got %q, want it to name %s and key %s", msg, other, kid)
	}

	// A key lost for good, named, no longer keeps serve from starting.
	startServe(t, dir, "--secret-key-file", other, "--lost-keys", kid).stop()
	// Nor does anything once the key is back.
	if err := os.WriteFile(keyPath, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, dir).stop()
}

// stopLeftoverCluster stops a postmaster a killed serve left running on dir.
func stopLeftoverCluster(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "pg", "data", "postmaster.pid"))
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGINT)
		testkit.WaitFor(t, 30*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }, "postgres did not stop")
	}
}

// enableTool waits for discovery to store the tool qualified, then enables it.
func enableTool(t *testing.T, p *serveProc, token, qualified string) {
	t.Helper()
	var id string
	testkit.WaitFor(t, 30*time.Second, func() bool {
		server, _, _ := strings.Cut(qualified, "__")
		code, body := p.request(t, token, http.MethodGet, "/api/v1/tools?limit=100&server="+server, nil)
		var out struct {
			Tools []struct {
				ID            string `json:"id"`
				QualifiedName string `json:"qualified_name"`
				Status        string `json:"status"`
			} `json:"tools"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &out) != nil {
			return false
		}
		for _, tl := range out.Tools {
			if tl.QualifiedName == qualified && tl.Status != "discovered" && tl.Status != "validating" {
				id = tl.ID
			}
		}
		return id != ""
	}, "the tool "+qualified+" was never discovered")
	if code, body := p.request(t, token, http.MethodPost, "/api/v1/tools/"+id+"/enable", map[string]any{}); code != http.StatusOK {
		t.Fatalf("enable %s: got %d %s", qualified, code, body)
	}
}

// healthOf returns /healthz's status code and body.
func healthOf(t *testing.T, p *serveProc) (int, map[string]any) {
	t.Helper()
	code, body := p.request(t, "", http.MethodGet, "/healthz", nil)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return code, m
}

// The embedded PostgreSQL killed with SIGKILL under a running serve: /healthz (still
// 200: the process is up) says degraded and names it, /readyz says 503, calls fail
// closed, then the supervisor restarts it, /healthz is ok again with the restart
// counted, and a tool call works again.
func TestPostgresKilledIsRestarted(t *testing.T) {
	dir := dbtest.TempDir(t)
	p := startServe(t, dir)
	code, h := healthOf(t, p)
	if code != http.StatusOK || h["status"] != "ok" {
		t.Fatalf("healthz before: got %d %v", code, h)
	}
	comps, _ := h["components"].(map[string]any)
	if _, ok := comps["database"]; !ok {
		t.Fatalf("healthz before: got %v, want the database among the components", h)
	}
	token := adminToken(t, dir)
	enableTool(t, p, token, "builtin__think")
	call := func() (int, []byte) {
		return p.request(t, token, http.MethodPost, "/api/v1/tools/call",
			map[string]any{"tool": "builtin__think", "arguments": map[string]any{"thought": "still here"}})
	}
	if code, body := call(); code != http.StatusOK {
		t.Fatalf("a call before: got %d %s", code, body)
	}

	// The test's cluster runs with synchronous_commit off (TOOLWARDEN_TEST_FAST_DB):
	// a SIGKILL loses the commits whose WAL was not written yet (the enable above, on a
	// loaded machine even the start's discovery), which a durable cluster keeps. Written
	// out first, so that what is tested is the restart, not that setting.
	func() {
		c, err := db.StartCluster(context.Background(), dir, &db.ClusterOptions{Fast: true}) // attaches
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop() // lets go of the cluster (serve started it)
		conn, err := pgx.Connect(context.Background(), c.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
	}()
	// The restart fails until the test has made its call while the database is down
	// (a library postgres cannot load, read at start only): a quick restart on a loaded
	// machine left no call between two healthz answers that said down.
	autoConf := filepath.Join(dir, "pg", "data", "postgresql.auto.conf")
	conf, err := os.ReadFile(autoConf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(autoConf, []byte(string(conf)+"\nshared_preload_libraries = 'tw_no_such_library'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pid := postmasterPID(t, dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// While it is down, healthz names what is down, readyz says 503, and a call fails
	// closed: it is refused, not run unrecorded. The restart may be quick: "degraded" is
	// looked for until the database is back, and must have been seen. A call counts as
	// made while the database was down when healthz found it not answering both before
	// and after (the database goes down once and comes back once). Healthz also says
	// degraded while the supervisor has not yet seen the restarted cluster up, when the
	// database may already answer; that does not count.
	sawDown, refusedWhileDown := false, 0
	check := func(code int, h map[string]any) map[string]any {
		if code != http.StatusOK {
			t.Fatalf("healthz: got %d %v, want 200 while the process is up", code, h)
		}
		return h
	}
	degraded := func(code int, h map[string]any) bool {
		return check(code, h)["status"] == "degraded"
	}
	databaseDown := func(code int, h map[string]any) bool {
		comps, _ := check(code, h)["components"].(map[string]any)
		db, _ := comps["database"].(map[string]any)
		return db["status"] == "down"
	}
	testkit.WaitFor(t, 60*time.Second, func() bool {
		code, h := healthOf(t, p)
		if degraded(code, h) {
			down, _ := h["down"].([]any)
			if len(down) == 0 {
				t.Fatalf("healthz while down: got %v, want it to name what is down", h)
			}
			sawDown = true
			before := databaseDown(code, h)
			callCode, body := call()
			readyCode, _ := p.request(t, "", http.MethodGet, "/readyz", nil)
			if before && databaseDown(healthOf(t, p)) {
				if callCode >= 200 && callCode < 300 {
					t.Fatalf("a call while the database was down: got %d %s, want it refused", callCode, body)
				}
				if readyCode != http.StatusServiceUnavailable {
					t.Fatalf("readyz while the database was down: got %d, want 503", readyCode)
				}
				if refusedWhileDown++; refusedWhileDown == 1 {
					if err := os.WriteFile(autoConf, conf, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		return sawDown && h["status"] == "ok"
	}, "healthz never said degraded and then ok")
	if refusedWhileDown == 0 {
		t.Fatal("no call was made while healthz said the database was down")
	}
	code, h = healthOf(t, p)
	comps, _ = h["components"].(map[string]any)
	pg, _ := comps["embedded_postgres"].(map[string]any)
	if code != http.StatusOK || pg["status"] != "up" || pg["restarts"] != float64(1) {
		t.Fatalf("healthz after: got %d %v, want 200 with embedded_postgres up after 1 restart", code, h)
	}
	if got := postmasterPID(t, dir); got == pid {
		t.Fatalf("the postmaster pid did not change (%d)", got)
	}
	// Connections of the old cluster are dropped by the pool as they fail; within a
	// few calls they work.
	var lastCode int
	var lastBody []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if lastCode, lastBody = call(); lastCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls never worked again after the restart: the last got %d %s", lastCode, lastBody)
		}
	}
	p.kill(t, syscall.SIGTERM)
}

// A stdio server that started a process of its own (a grandchild of serve): serve is
// killed with SIGKILL, the server dies with it (parent death signal) and the grandchild
// lives on; the next serve kills it before starting anything, from the record of the
// server's process group in the data dir. A grandchild that left the group (setsid)
// goes too, by the run's marker, after a SIGKILL and after a clean stop.
func TestStdioGrandchildrenReapedAfterSIGKILL(t *testing.T) {
	dir := dbtest.TempDir(t)
	// Unconfined: a confined server's PID namespace takes its processes with it anyway.
	p := startServe(t, dir, "--confine", "off")
	token := adminToken(t, dir)
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	awayFile := filepath.Join(t.TempDir(), "away.pid")
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "parent"}, "")
	// sh starts a background sleep and one in a session of its own, then becomes the server.
	script := `sleep 300 & echo $! > "$PIDFILE"; setsid sleep 303 & echo $! > "$AWAYFILE"; exec "$0" "$@"`
	envm["PIDFILE"], envm["AWAYFILE"] = pidFile, awayFile
	readPID := func(f string) int {
		b, _ := os.ReadFile(f)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	code, body := p.request(t, token, http.MethodPost, "/api/v1/servers", map[string]any{"name": "parent", "type": "stdio",
		"command": "sh", "args": append([]string{"-c", script, cmd}, args...), "env": envm, "enabled": true})
	if code != http.StatusCreated {
		t.Fatalf("register: got %d %s", code, body)
	}
	var sleepPID, awayPID int
	testkit.WaitFor(t, 30*time.Second, func() bool {
		sleepPID, awayPID = readPID(pidFile), readPID(awayFile)
		return sleepPID > 0 && awayPID > 0 && alive(awayPID)
	}, "the server's background sleeps never started")
	if !proctrack.Marked(sleepPID, mcpclient.ServerMarkerEnv, markerOf(t, sleepPID)) {
		t.Fatalf("the grandchild %d carries no marker", sleepPID)
	}
	// The run's record and lock, and the server's group's record.
	// Whole records only: a record being written is a temporary file (".<id>.json.tmp-…"),
	// which a SIGKILL then leaves behind, younger than the next run's Cleanup removes.
	testkit.WaitFor(t, 10*time.Second, func() bool {
		recs, _ := os.ReadDir(filepath.Join(dir, "run", "stdio"))
		whole := 0
		for _, r := range recs {
			if !strings.HasPrefix(r.Name(), ".") {
				whole++
			}
		}
		return whole == 3
	}, "the records of this run and its stdio server were never both written")

	p.kill(t, syscall.SIGKILL)
	time.Sleep(200 * time.Millisecond)
	if !alive(sleepPID) || !alive(awayPID) {
		t.Fatalf("a grandchild (%d, %d away) died with serve; the test shows nothing", sleepPID, awayPID)
	}
	// A process group recorded with a marker its processes do not carry (the id was
	// reused since) is left alone.
	decoy := exec.Command("sleep", "301")
	decoy.Env = []string{mcpclient.ServerMarkerEnv + "=run-someone-else"}
	decoy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	if err := proctrack.Write(filepath.Join(dir, "run", "stdio"), proctrack.Record{PGID: decoy.Process.Pid, Marker: "run-not-the-decoys"}); err != nil {
		t.Fatal(err)
	}

	again := startServe(t, dir, "--confine", "off")
	t.Cleanup(func() {
		if t.Failed() {
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(sleepPID) + "/stat")
			t.Logf("grandchild stat: %s\nthe second serve's log:\n%s", st, again.stderr.String())
		}
	})
	testkit.WaitFor(t, 30*time.Second, func() bool { return !alive(sleepPID) }, "the orphaned grandchild survived the restart")
	testkit.WaitFor(t, 10*time.Second, func() bool { return !alive(awayPID) }, "the grandchild that left the group survived the restart")
	if !alive(decoy.Process.Pid) {
		t.Fatal("the cleanup killed a process that was not one of ours")
	}
	// The server itself runs again (with a new grandchild, recorded anew).
	var awayAgain int
	testkit.WaitFor(t, 30*time.Second, func() bool {
		n := readPID(pidFile)
		awayAgain = readPID(awayFile)
		return n > 0 && n != sleepPID && alive(n) && awayAgain != awayPID && alive(awayAgain)
	}, "the server did not start again")
	again.kill(t, syscall.SIGTERM)
	testkit.WaitFor(t, 10*time.Second, func() bool { return !alive(awayAgain) }, "a clean stop left the grandchild that left the group running")
	if ents, _ := os.ReadDir(filepath.Join(dir, "run", "stdio")); len(ents) != 0 {
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(dir, "run", "stdio", e.Name()))
			t.Logf("left: %s %s", e.Name(), b)
		}
		t.Fatalf("records left after a clean stop: %d", len(ents))
	}
	stopLeftoverCluster(t, dir)
}

// markerOf reads the value of mcpclient.ServerMarkerEnv in process pid's environment.
func markerOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, mcpclient.ServerMarkerEnv+"="); ok {
			return v
		}
	}
	return ""
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
