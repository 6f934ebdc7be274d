package confine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// envParent makes the test binary play an unprivileged Toolwarden (see parentRole).
const envParent = "TOOLWARDEN_CONFINE_TEST_PARENT"

// parentSpec is what TestUnprivileged hands the unprivileged parent.
type parentSpec struct {
	DataDir string `json:"data_dir"`
	KeyFile string `json:"key_file"` // a secret file kept outside the data dir
	Secret  string `json:"secret"`
	Canary  string `json:"canary"` // also in the parent's own environment
	// RuntimeDir is the parent's XDG_RUNTIME_DIR, where it listens on "bus" as the
	// user's D-Bus (or systemd --user, rootless podman) would.
	RuntimeDir string `json:"runtime_dir"`
}

// parentReport is what the parent prints: the description and, per probe, how the
// command ended confined and unconfined.
type parentReport struct {
	Describe   string            `json:"describe"`
	Confined   map[string]result `json:"confined"`
	Unconfined map[string]result `json:"unconfined"`
}

// probes are the commands the unprivileged parent runs both ways.
func probes(p parentSpec, shm string) map[string][]string {
	key := filepath.Join(p.DataDir, "secret.key")
	return map[string][]string{
		"secret":  {"cat", key},
		"keyfile": {"cat", p.KeyFile},
		"list":    {"ls", "-A", p.DataDir},
		"environ": {"sh", "-c", "cat /proc/[0-9]*/environ"},
		"caps":    {"grep", "-E", "^Cap(Inh|Prm|Eff|Bnd|Amb):", "/proc/self/status"},
		"shm":     {"ls", "/dev/shm"},
		// A user namespace of its own gives the server every capability there; the
		// hidden dir is still locked in place.
		"nested": {"unshare", "-Urm", "sh", "-c", "umount -l " + p.DataDir + "; umount " + p.DataDir + "; cat " + key},
		"whoami": {"id", "-u"},
		"shmkey": {"cat", shm},
		"bus":    dialProbe(filepath.Join(p.RuntimeDir, "bus")),
	}
}

// parentRole runs as an unprivileged user: it confines the probes as Toolwarden would
// (the user-namespace mode), runs them unconfined too, and prints both as JSON.
func parentRole(raw string) int {
	var p parentSpec
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Shared memory of the parent's user, as PostgreSQL running as the same user keeps.
	shm := "/dev/shm/toolwarden-confine-test-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(shm, []byte(p.Secret), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.Remove(shm)
	bus, err := listen(filepath.Join(p.RuntimeDir, "bus"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer bus.Close()
	c := confine.New(confine.Spec{Hide: []string{p.DataDir, p.KeyFile}})
	rep := parentReport{Describe: c.Describe(), Confined: map[string]result{}, Unconfined: map[string]result{}}
	off := confine.New(confine.Spec{Off: true})
	for name, argv := range probes(p, shm) {
		rep.Confined[name] = run(failer{}, c, "/", nil, argv...)
		rep.Unconfined[name] = run(failer{}, off, "/", nil, argv...)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 2
	}
	return 0
}

// failer lets run report to a process with no testing.T: it exits.
type failer struct{ testing.TB }

func (failer) Helper() {}
func (failer) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

// TestUnprivileged: Toolwarden running as a normal user confines servers with a user
// namespace: the hidden data dir, the parent's environment, its shared memory and the
// daemons of its runtime directory (systemd --user would run anything outside every
// namespace) are out of reach, no capability is left, and a user namespace of the server's own does
// not undo the mounts. The same probes unconfined get through, so the test shows the
// difference.
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start the test binary as another user")
	}
	t.Parallel()
	uid, gid, base, bin := asNobody(t, "twconfine-")
	p := parentSpec{DataDir: filepath.Join(base, "data"), KeyFile: filepath.Join(base, "toolwarden.key"),
		Secret: "secret-" + token(t), Canary: "canary-" + token(t), RuntimeDir: filepath.Join(base, "run")}
	for _, d := range []string{p.DataDir, p.RuntimeDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(p.DataDir, "secret.key"), p.KeyFile} {
		if err := os.WriteFile(f, []byte(p.Secret), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{p.DataDir, filepath.Join(p.DataDir, "secret.key"), p.KeyFile, p.RuntimeDir} {
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(p)
	out := runAs(t, bin, uid, gid, envParent+"="+string(raw), "TOOLWARDEN_CANARY="+p.Canary, "XDG_RUNTIME_DIR="+p.RuntimeDir)
	var rep parentReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if strings.HasPrefix(rep.Describe, "none") {
		t.Skipf("user namespaces are not available to uid %d here: %s", uid, rep.Describe)
	}
	if !strings.HasPrefix(rep.Describe, "user, mount, PID and IPC namespaces; hidden: "+p.DataDir) {
		t.Fatalf("describe: got %q, want the user-namespace mode hiding %s", rep.Describe, p.DataDir)
	}
	for _, tc := range []struct {
		probe string
		broke func(result) bool
	}{
		{"secret", contains(p.Secret)},
		{"keyfile", contains(p.Secret)},
		{"list", contains("secret.key")},
		{"environ", contains(p.Canary)},
		{"caps", nonZeroCaps},
		{"shm", contains("toolwarden-confine-test-")},
		{"shmkey", contains(p.Secret)},
		{"bus", contains(dialed)},
	} {
		if got := rep.Confined[tc.probe]; tc.broke(got) {
			t.Errorf("confined %s: got exit %d, output:\n%s", tc.probe, got.Code, got.Out)
		}
		if got := rep.Unconfined[tc.probe]; !tc.broke(got) {
			t.Errorf("unconfined %s should get through (or the check proves nothing): got exit %d, output:\n%s",
				tc.probe, got.Code, got.Out)
		}
	}
	if got := rep.Confined["nested"]; strings.Contains(got.Out, p.Secret) {
		t.Errorf("a user namespace of the server's own revealed the data dir:\n%s", got.Out)
	}
	// The same user inside: what it owns, it still owns.
	if got := rep.Confined["whoami"]; strings.TrimSpace(got.Out) != strconv.Itoa(uid) {
		t.Errorf("uid inside: got %q, want %d", got.Out, uid)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// asNobody is the user id and group of "nobody" (65534 without one), and a copy of this
// test binary that user may execute (go test's build directory is private to root), bin
// in base, a directory it may pass through; it skips the test where none can be made.
func asNobody(t *testing.T, prefix string) (uid, gid int, base, bin string) {
	t.Helper()
	uid, gid = 65534, 65534
	if u, err := user.Lookup("nobody"); err == nil {
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(base); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by others: cannot run a test binary from there as uid %d", d, uid)
		}
	}
	bin = filepath.Join(base, "confine.test")
	copyFile(t, os.Args[0], bin)
	return uid, gid, base, bin
}

// runAs runs the test binary bin as uid and gid from "/", with a clean environment and
// env, and returns what it wrote to its standard output (its report).
func runAs(t *testing.T, bin string, uid, gid int, env ...string) []byte {
	t.Helper()
	for try := 0; ; try++ {
		cmd := exec.Command(bin)
		cmd.Dir = "/"
		cmd.Env = append(cleanEnv(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
			Pdeathsig: syscall.SIGKILL}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		// The copy of the binary was just written: a child another test forked meanwhile
		// may hold it open for writing until it execs (ETXTBSY), a moment only.
		if errors.Is(err, syscall.ETXTBSY) && try < 50 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("the unprivileged parent failed: %v\n%s", err, stderr.String())
		}
		return out
	}
}
