package confine_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/confine"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(envParent); spec != "" {
		os.Exit(parentRole(spec))
	}
	if sock := os.Getenv(envDial); sock != "" {
		os.Exit(dialRole(sock))
	}
	os.Exit(m.Run())
}

// envDial makes the test binary a client that connects to a unix socket (dialRole).
const envDial = "TOOLWARDEN_CONFINE_TEST_DIAL"

// dialed is what dialRole prints once it has connected.
const dialed = "connected to the daemon"

// dialRole connects to the unix socket at sock, as a client of a daemon would.
func dialRole(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	c.Close()
	fmt.Println(dialed)
	return 0
}

// dialProbe is the command line that runs dialRole on sock.
func dialProbe(sock string) []string {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return []string{"env", envDial + "=" + sock, self}
}

// listen listens on a unix socket at sock and accepts (and drops) every connection
// until it is closed.
func listen(sock string) (net.Listener, error) {
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l, nil
}

// result is how one command ended.
type result struct {
	Code int    `json:"code"`
	Out  string `json:"out"`
}

// run runs argv through c (as mcpclient does: own process group, killed with its
// parent) in dir with env, and returns its exit status and output.
func run(t testing.TB, c *confine.Confiner, dir string, env []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, c, dir, env, argv...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return result{0, string(out)}
	case errors.As(err, &ee):
		return result{ee.ExitCode(), string(out)}
	}
	t.Fatalf("run %v: %v\n%s", argv, err, out)
	return result{}
}

func command(ctx context.Context, c *confine.Confiner, dir string, env []string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	if env == nil {
		cmd.Env = cleanEnv()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.Apply(cmd)
	return cmd
}

// cleanEnv is what mcpclient passes a server.
func cleanEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}
}

func token(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// secretDir is a data dir holding a secret key, plus a secret file kept elsewhere.
func secretDir(t testing.TB) (dir, key, other, secret string) {
	t.Helper()
	secret = "secret-" + token(t)
	dir = t.TempDir()
	key = filepath.Join(dir, "secret.key")
	other = filepath.Join(t.TempDir(), "elsewhere.key")
	for _, f := range []string{key, other} {
		if err := os.WriteFile(f, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "checkpoints"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, key, other, secret
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the root mode needs root (TestUnprivileged covers the user-namespace mode as another user)")
	}
}

// TestRoot: as root, a confined command cannot read what is hidden, sees only its
// own processes, has no capabilities, cannot write system directories, /proc/sys or
// a raw disk, and still works where it was told to; in the host's user namespace, and
// in one of its own (where root falls back to when it may not create namespaces).
func TestRoot(t *testing.T) {
	needRoot(t)
	t.Parallel()
	for _, m := range []struct {
		name, describe string
		new            func(confine.Spec) *confine.Confiner
	}{
		{"host user namespace", "mount, PID and IPC namespaces; hidden: ", confine.New},
		{"own user namespace", "user, mount, PID and IPC namespaces; hidden: ", confine.NewUserMode},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir, key, other, secret := secretDir(t)
			c := m.new(confine.Spec{Hide: []string{dir, other}})
			run, bus := runtimeDir(t)
			confine.SetRuntimeDirs(c, run)
			if d := c.Describe(); !strings.HasPrefix(d, m.describe) || !strings.Contains(d, dir) ||
				!strings.Contains(d, other) || !strings.Contains(d, "as root: /etc") || !strings.Contains(d, "runtime directory ("+run+")") {
				t.Fatalf("describe: got %q, want %q hiding %s, %s and the runtime directory %s, and the root's read-only trees", d, m.describe, dir, other, run)
			}
			testRoot(t, c, dir, key, other, secret, bus)
		})
	}
}

// runtimeDir is a runtime directory as logind makes it (only its user may enter it)
// with a daemon listening on "bus" in it, as the user's D-Bus or systemd would.
func runtimeDir(t *testing.T) (dir, bus string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bus = filepath.Join(dir, "bus")
	l, err := listen(bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return dir, bus
}

func testRoot(t *testing.T, c *confine.Confiner, dir, key, other, secret, bus string) {
	off := confine.New(confine.Spec{Off: true})
	blk := blockDevice(t)

	for _, tc := range []struct {
		name string
		argv []string
		// broke says whether the command got through; a confined one must not, an
		// unconfined one must when contrast is set (or the check proves nothing).
		broke    func(result) bool
		contrast bool
	}{
		{"read the secret key", []string{"cat", key}, contains(secret), true},
		{"list the data dir", []string{"ls", "-A", dir}, contains("secret.key"), true},
		{"read a secret file elsewhere", []string{"cat", other}, contains(secret), true},
		{"see the parent's processes", []string{"cat", "/proc/" + strconv.Itoa(os.Getpid()) + "/cmdline"}, succeeded, true},
		{"keep a capability", []string{"grep", "-E", "^Cap(Inh|Prm|Eff|Bnd|Amb):", "/proc/self/status"}, nonZeroCaps, true},
		{"reach a daemon of the runtime directory", dialProbe(bus), contains(dialed), true},
		{"read a block device in /dev", []string{"head", "-c", "1", blk.inDev}, succeeded, true},
		{"read a block device node elsewhere", []string{"head", "-c", "1", blk.elsewhere}, succeeded, true},
		{"unmount the hidden dir", []string{"umount", dir}, refusedUnless("superuser", "permission denied"), false},
		{"unmount it in a new user namespace", []string{"unshare", "-Um", "sh", "-c", "umount -l " + dir + "; cat " + key}, contains(secret), false},
		// Each write undoes itself where it succeeds, so a run without confinement (to
		// see these tests fail) leaves the machine as it was.
		{"mount something", undoing("mount -t tmpfs none %[1]s && umount %[1]s", t.TempDir()), refusedUnless("superuser", "permission denied"), false},
		{"write /proc/sys", []string{"sh", "-c", "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern"}, refusedUnless(erofs), false},
		{"write /etc", undoing("echo x > %[1]s && rm %[1]s", "/etc/toolwarden-confine-test-"+token(t)), refusedUnless(erofs), false},
		{"write /sys", []string{"sh", "-c", "echo x > /sys/kernel/uevent_helper"}, refusedUnless(erofs), false},
		{"regain privileges", []string{"unshare", "-r", "true"}, succeeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(t, c, "", nil, tc.argv...); tc.broke(got) {
				t.Fatalf("confined %v: got exit %d, output:\n%s", tc.argv, got.Code, got.Out)
			}
			if !tc.contrast {
				return
			}
			if got := run(t, off, "", nil, tc.argv...); !tc.broke(got) {
				t.Fatalf("unconfined %v should get through (or the check proves nothing): got exit %d, output:\n%s",
					tc.argv, got.Code, got.Out)
			}
		})
	}

	t.Run("works as before", func(t *testing.T) {
		work := t.TempDir()
		got := run(t, c, work, nil, "sh", "-c", `pwd; echo hi > f; cat f; cat /dev/null; head -c 4 /dev/urandom | wc -c; ls /proc | grep -c '^[0-9]'`)
		want := work + "\nhi\n4\n"
		if got.Code != 0 || !strings.HasPrefix(got.Out, want) {
			t.Fatalf("got exit %d, output %q; want 0 and %q first", got.Code, got.Out, want)
		}
		// sh, ls, grep and the helper: nothing of the host.
		if n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(got.Out, want))); n < 2 || n > 6 {
			t.Fatalf("processes in /proc: got %d, want only the namespace's few", n)
		}
	})
}

// TestRootReadOnlyButGiven: as root, system directories are read-only inside, except
// the directories a server is given and the npm package it runs (installed globally,
// under a read-only tree, and started through its bin link); a package manager's own
// launcher and a script elsewhere stay read-only.
func TestRootReadOnlyButGiven(t *testing.T) {
	needRoot(t)
	t.Parallel()
	// /var/spool is one of the read-only trees (crontabs live there).
	base, err := os.MkdirTemp("/var/spool", "toolwarden-confine-test-")
	if err != nil {
		t.Skipf("cannot create a test directory under /var/spool: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	given := filepath.Join(base, "given")
	// What writes "state" next to its real self, as server-memory does (node resolves
	// the bin link to the module's own path).
	writer := []byte("#!/bin/sh\necho state > \"$(dirname \"$(readlink -f \"$0\")\")/state\"\n")
	script := func(rel string) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, writer, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	server := script("lib/node_modules/@scope/server/dist/index.js")
	npx := script("lib/node_modules/npm/bin/npx-cli.js")
	loose := script("bin/tool")
	if err := os.Mkdir(given, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "bin", "mcp-server")
	if err := os.Symlink(server, link); err != nil {
		t.Fatal(err)
	}
	c := confine.New(confine.Spec{})

	if got := run(t, c, "", nil, "sh", "-c", `echo x > "$1/f"`, "sh", given); got.Code != 0 {
		t.Fatalf("write into a given directory: got exit %d: %s", got.Code, got.Out)
	}
	if got := run(t, c, "", nil, link); got.Code != 0 {
		t.Fatalf("an npm package writing next to its code: got exit %d: %s", got.Code, got.Out)
	}
	for _, f := range []string{filepath.Join(given, "f"), filepath.Join(filepath.Dir(server), "state")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("not on the real filesystem: %v", err)
		}
	}
	if got := run(t, c, "", nil, "sh", server); got.Code != 0 {
		t.Fatalf("an npm package started as sh <script>: got exit %d: %s", got.Code, got.Out)
	}
	// A file named on the command line outside an npm package gives nothing.
	for _, argv := range [][]string{{npx}, {loose}, {"sh", loose}, {"sh", "-c", "echo x > " + filepath.Join(base, "f")}} {
		got := run(t, c, "", nil, argv...)
		if got.Code == 0 || !strings.Contains(got.Out, "Read-only file system") {
			t.Fatalf("%v: got exit %d, %q; want a read-only file system", argv, got.Code, got.Out)
		}
	}
}

// blockDev is a block device in /dev and a node for the same device elsewhere.
type blockDev struct{ inDev, elsewhere string }

func blockDevice(t *testing.T) blockDev {
	t.Helper()
	ents, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || info.Mode()&fs.ModeDevice == 0 || info.Mode()&fs.ModeCharDevice != 0 {
			continue
		}
		st := info.Sys().(*syscall.Stat_t)
		node := filepath.Join(t.TempDir(), "disk")
		if err := syscall.Mknod(node, syscall.S_IFBLK|0o600, int(st.Rdev)); err != nil {
			t.Fatalf("mknod: %v", err)
		}
		return blockDev{inDev: filepath.Join("/dev", e.Name()), elsewhere: node}
	}
	t.Skip("no block device in /dev to try reading")
	return blockDev{}
}

// undoing is a shell command line from format, whose %[1]s is path.
func undoing(format, path string) []string {
	return []string{"sh", "-c", fmt.Sprintf(format, path)}
}

func contains(s string) func(result) bool {
	return func(r result) bool { return strings.Contains(r.Out, s) }
}

func succeeded(r result) bool { return r.Code == 0 }

// erofs is how sh and coreutils say EROFS.
const erofs = "Read-only file system"

// refusedUnless counts a command as broken through unless it failed for one of the
// reasons given: a failure for another reason (a typo, a missing file) proves nothing.
func refusedUnless(reasons ...string) func(result) bool {
	return func(r result) bool {
		return r.Code == 0 || !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(r.Out, s) })
	}
}

// nonZeroCaps reports whether any of the capability lines grep printed is not zero.
func nonZeroCaps(r result) bool {
	sc := bufio.NewScanner(strings.NewReader(r.Out))
	n := 0
	for sc.Scan() {
		_, v, _ := strings.Cut(sc.Text(), ":")
		n++
		if strings.Trim(strings.TrimSpace(v), "0") != "" {
			return true
		}
	}
	return n != 5 // not all five sets seen: something is off, count it as kept
}

// TestExitAndSignals: the helper passes the server's exit status through, forwards
// SIGTERM to it, and when the server ends nothing it started survives, even what left
// its process group.
func TestExitAndSignals(t *testing.T) {
	t.Parallel()
	c := confine.New(confine.Spec{})
	if strings.HasPrefix(c.Describe(), "none") {
		t.Fatalf("want confinement on this machine: %s", c.Describe())
	}
	if got := run(t, c, "", nil, "sh", "-c", "exit 7"); got.Code != 7 {
		t.Fatalf("exit status: got %d, want 7", got.Code)
	}
	if got := run(t, c, "", nil, "sh", "-c", "kill -KILL $$"); got.Code != 128+9 {
		t.Fatalf("killed server: got %d, want %d", got.Code, 128+9)
	}

	t.Run("SIGTERM", func(t *testing.T) {
		cmd := command(context.Background(), c, "", nil, "sh", "-c", "echo ready; exec sleep 1000")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			t.Fatalf("got %q (%v), want ready", line, err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Fatalf("got %v, want the server to end of SIGTERM (exit %d)", err, 128+int(syscall.SIGTERM))
		}
	})

	t.Run("orphans", func(t *testing.T) {
		mark := "TOOLWARDEN_CONFINE_TEST=" + token(t)
		env := append(cleanEnv(), mark)
		// setsid: a new session and process group, out of reach of a group kill.
		got := run(t, c, "", env, "sh", "-c", "setsid sleep 1000 & exit 0")
		if got.Code != 0 {
			t.Fatalf("got exit %d: %s", got.Code, got.Out)
		}
		if left := processesWith(t, mark); len(left) > 0 {
			t.Fatalf("processes %v outlived the server", left)
		}
	})
}

// processesWith returns the live processes whose environment holds kv.
func processesWith(t *testing.T, kv string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), kv) {
			out = append(out, pid)
		}
	}
	return out
}

// TestLeftAlone: a command that cannot start is not wrapped, so Start fails as it
// would unconfined; one whose working directory is hidden fails with a clear message.
func TestLeftAlone(t *testing.T) {
	t.Parallel()
	dir, _, _, _ := secretDir(t)
	c := confine.New(confine.Spec{Hide: []string{dir}})
	for _, name := range []string{"no-such-program-for-toolwarden", "/no/such/program", dir} {
		cmd := exec.Command(name)
		c.Apply(cmd)
		if cmd.Path == "/proc/self/exe" {
			t.Fatalf("%s: wrapped, want it left alone", name)
		}
		err := cmd.Run()
		var execErr *exec.Error
		var pathErr *fs.PathError
		if !errors.As(err, &execErr) && !errors.As(err, &pathErr) {
			t.Fatalf("%s: got %v, want the error exec gives without confinement", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o700); err != nil {
		t.Fatal(err)
	}
	got := run(t, c, filepath.Join(dir, "work"), nil, "pwd")
	if got.Code != 125 || !strings.Contains(got.Out, "working directory "+filepath.Join(dir, "work")) {
		t.Fatalf("hidden working directory: got exit %d, %q; want 125 and a message naming it", got.Code, got.Out)
	}
}

// TestUnavailable: where namespaces cannot be created, servers run as before and
// Describe says why.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	c := confine.NewFailing(confine.Spec{Hide: []string{t.TempDir()}})
	if d := c.Describe(); !strings.HasPrefix(d, "none: namespaces are not available here (") {
		t.Fatalf("describe: got %q, want none and why", d)
	}
	cmd := exec.Command("sh", "-c", "echo $$")
	c.Apply(cmd)
	out, err := cmd.Output()
	if err != nil || cmd.Path == "/proc/self/exe" || strings.TrimSpace(string(out)) == "1" {
		t.Fatalf("got %q (%v), path %s: want it run as before, unconfined", out, err, cmd.Path)
	}
	if d := confine.New(confine.Spec{Off: true}).Describe(); d != "none: turned off" {
		t.Fatalf("off: got %q", d)
	}
	// Required: a server is not started at all where it cannot be confined.
	req := confine.NewFailing(confine.Spec{Hide: []string{t.TempDir()}, Required: true})
	if d := req.Describe(); !strings.Contains(d, "do not start") {
		t.Fatalf("required, unavailable: describe got %q", d)
	}
	cmd = exec.Command("sh", "-c", "echo started")
	req.Apply(cmd)
	if out, err := cmd.Output(); err == nil || !strings.Contains(err.Error(), "--confine=required") {
		t.Fatalf("required, unavailable: got %q, %v; want a refusal naming --confine=required", out, err)
	}
}

// TestShowing: a directory shown inside a hidden one (a terminal's workspace inside the
// data dir) is reachable and writable at its path, with what is mounted below it; the
// rest of the hidden directory, the other workspaces and the secret key among it,
// stays hidden and read-only. As root in both of its modes, as in TestRoot.
func TestShowing(t *testing.T) {
	needRoot(t)
	t.Parallel()
	for _, m := range []struct {
		name string
		new  func(confine.Spec) *confine.Confiner
		link bool // the data dir is hidden by a path through a symbolic link
	}{{"host user namespace", confine.New, false}, {"own user namespace", confine.NewUserMode, false},
		{"hidden through a link", confine.New, true}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir, key, _, secret := secretDir(t)
			hide := dir
			if m.link {
				hide = filepath.Join(t.TempDir(), "data")
				if err := os.Symlink(dir, hide); err != nil {
					t.Fatal(err)
				}
			}
			mine := filepath.Join(dir, "workspaces", "conv-a")
			theirs := filepath.Join(dir, "workspaces", "conv-b")
			for _, d := range []string{filepath.Join(mine, "sub"), theirs} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(mine, "note"), []byte("mine-"+secret[7:]), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(theirs, "note"), []byte("theirs-"+secret[7:]), 0o600); err != nil {
				t.Fatal(err)
			}
			c := m.new(confine.Spec{Hide: []string{hide}})
			script := `pwd; cat ../note; echo made > ../made; ls -A "$1/workspaces"; cat "$2" "$1/workspaces/conv-b/note"; ` +
				`mkdir "$1/new" 2>&1 | grep -c 'Read-only'; echo end`
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", script, "sh", dir, key)
			cmd.Dir = filepath.Join(mine, "sub")
			cmd.Env = cleanEnv()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			c.ApplyUntrusted(cmd, mine, filepath.Join(dir, "not-there"))
			out, _ := cmd.CombinedOutput()
			want := filepath.Join(mine, "sub") + "\nmine-" + secret[7:] + "conv-a\n"
			if !strings.HasPrefix(string(out), want) || !strings.HasSuffix(string(out), "1\nend\n") {
				t.Fatalf("got output:\n%s\nwant it to start %q and end with the refused mkdir", out, want)
			}
			if strings.Contains(string(out), secret) || strings.Contains(string(out), "theirs-") {
				t.Fatalf("the hidden key or another workspace was read:\n%s", out)
			}
			if b, err := os.ReadFile(filepath.Join(mine, "made")); err != nil || string(b) != "made\n" {
				t.Fatalf("a file written in the shown directory: got %q, %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
				t.Fatal("a directory was made in the hidden data dir")
			}
		})
	}
}

// TestUntrustedCommandLine: what a caller puts on the command line (a terminal's
// command, a template tool's arguments) keeps nothing writable, not "/" named there
// nor a link to it: as root, the system trees stay read-only. A directory named on an
// administrator's command line (Apply) still is, which is why the two differ. And a
// link planted where a shown directory should be shows nothing: what it points to
// stays hidden and read-only, by the link's path and by its own, and a link to /etc
// keeps /etc read-only. In both of root's modes.
func TestUntrustedCommandLine(t *testing.T) {
	needRoot(t)
	t.Parallel()
	for _, m := range []struct {
		name string
		new  func(confine.Spec) *confine.Confiner
	}{{"host user namespace", confine.New}, {"own user namespace", confine.NewUserMode}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir, _, _, secret := secretDir(t)
			checkpoints := filepath.Join(dir, "checkpoints")
			if err := os.WriteFile(filepath.Join(checkpoints, "cp.json"), []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			if err := os.Symlink("/", filepath.Join(work, "x")); err != nil {
				t.Fatal(err)
			}
			ws := filepath.Join(dir, "workspaces")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			evil, etc := filepath.Join(ws, "evil"), filepath.Join(ws, "etc")
			if err := os.Symlink(checkpoints, evil); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/etc", etc); err != nil {
				t.Fatal(err)
			}
			c := m.new(confine.Spec{Hide: []string{dir}})
			probe := func(untrusted bool, show ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, "sh", "-c", `test -w /etc && echo etc-writable || echo etc-read-only; `+
					`cat "$3"/* "$4"/* 2>/dev/null; touch "$4"/planted 2>/dev/null && echo wrote-target; echo end`,
					"sh", "/", "x", evil, checkpoints)
				cmd.Dir = work
				cmd.Env = cleanEnv()
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
				if untrusted {
					c.ApplyUntrusted(cmd, show...)
				} else {
					c.Apply(cmd)
				}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				return string(out)
			}
			if got := probe(true, evil, etc); got != "etc-read-only\nend\n" {
				t.Fatalf("untrusted: got %q, want /etc read-only and nothing through the planted links", got)
			}
			if _, err := os.Stat(filepath.Join(checkpoints, "planted")); err == nil {
				t.Fatal("a file was made where a planted link leads")
			}
			if got := probe(false); !strings.HasPrefix(got, "etc-writable\n") || strings.Contains(got, secret) {
				t.Fatalf("an administrator's command line naming /: got %q, want /etc kept writable (the contrast) and still nothing hidden", got)
			}
		})
	}
}

// TestRuntimeDirs: $XDG_RUNTIME_DIR is hidden with /run/user/<uid> where it is a
// runtime directory (only its user may enter it), and not where hiding it would take
// away what the server keeps: the home directory, or a directory others share.
func TestRuntimeDirs(t *testing.T) {
	own := "/run/user/" + strconv.Itoa(os.Geteuid())
	private := t.TempDir()
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(private, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, xdg, home string
		want            []string
	}{
		{"a runtime directory", private, "/nonexistent", []string{own, private}},
		{"unset", "", "/nonexistent", []string{own}},
		{"relative", "run", "/nonexistent", []string{own}},
		{"shared with others", shared, "/nonexistent", []string{own}},
		{"the home directory", home, home, []string{own}},
		{"above the home directory", private, home, []string{own}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_RUNTIME_DIR", tc.xdg)
			t.Setenv("HOME", tc.home)
			slices.Sort(tc.want)
			if got := confine.RuntimeDirs(confine.New(confine.Spec{})); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
