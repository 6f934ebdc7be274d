package main

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A word that is not a flag ends Go's flag parsing: every flag after it was dropped in
// silence (`token create ... ci --expires-in-days 0` made a 90-day token, `migrate up 1`
// applied every migration). Each command that takes no such word refuses it, naming it,
// before it opens anything. The common flags come first, so a command that took the
// word would fail on the unreachable database rather than start anything.
func TestStrayArgumentRefused(t *testing.T) {
	t.Parallel()
	nowhere := "postgres://toolwarden@127.0.0.1:1/none?connect_timeout=1"
	for _, args := range [][]string{
		// serve stops on --rate-limit 0 when it reads past the word.
		{"serve", "--rate-limit", "0", "stray", "--addr", "127.0.0.1:0"},
		{"user", "create", "--name", "carol", "--role", "admin", "stray", "--password-stdin"},
		{"token", "create", "--user", "alice", "--name", "t2", "stray", "--expires-in-days", "0"},
		{"audit", "verify", "stray", "--checkpoint", "/nonexistent"},
		{"audit", "checkpoint", "stray", "--out", "-"},
		{"export", "stray", "--out", "x.yaml"},
		{"secrets", "rotate", "stray", "--reencrypt-only"},
		{"secrets", "status", "stray", "--log-level", "debug"},
		{"migrate", "up", "stray"},
		{"migrate", "status", "stray", "--log-level", "debug"},
		{"pg-template", "stray", "--out", "x"},
	} {
		typo := filepath.Join(t.TempDir(), "typo")
		cmdLen := 1
		if args[0] != "serve" && args[0] != "export" && args[0] != "pg-template" {
			cmdLen = 2
		}
		full := append(append([]string{}, args[:cmdLen]...), "--data-dir", typo, "--database-url", nowhere)
		if args[0] == "pg-template" {
			full = args[:1]
		}
		full = append(full, args[cmdLen:]...)
		_, stderr, err := runCmd(t, "pw-from-stdin-0123\n", full...)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, `unexpected argument "stray"`) {
			t.Errorf("%q: %v\n%s; want a usage error naming the stray word", full, err, stderr)
		}
		if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q: the data dir was created: %v", full, err)
		}
	}
	// What follows the word is said to have been ignored.
	_, stderr, _ := runCmd(t, "", "token", "create", "--database-url", nowhere, "--user", "a", "--name", "t", "ci", "--expires-in-days", "0")
	if !strings.Contains(stderr, "nothing after it was read: --expires-in-days 0") {
		t.Errorf("token create with a stray word: %q; want the flags after it named", stderr)
	}
}

// The audit log's actor of a command run at the terminal is the account the process
// runs as, by its uid, not $USER (which anyone sets), and, when sudo started it, who ran
// sudo; $SUDO_USER alone, which anyone sets too, is not taken for that.
func TestCliActorName(t *testing.T) {
	me, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		t.Skipf("this uid has no account: %v", err)
	}
	t.Setenv("USER", "mallory-"+me.Username)
	t.Setenv("SUDO_USER", "")
	if got, want := cliActor().Name, "cli:"+me.Username; got != want {
		t.Errorf("with USER forged: %q, want %q", got, want)
	}
	// go test is no sudo.
	t.Setenv("SUDO_USER", "bob")
	if got, want := cliActor().Name, "cli:"+me.Username; got != want {
		t.Errorf("with SUDO_USER=bob and no sudo: %q, want %q", got, want)
	}

	none := func(id string) (*user.User, error) { return nil, user.UnknownUserIdError(1) }
	if got := cliActorName(4242, none, ""); got != "cli:uid 4242" {
		t.Errorf("a uid with no account: %q, want cli:uid 4242", got)
	}
	named := func(id string) (*user.User, error) { return &user.User{Uid: id, Username: "toolwarden"}, nil }
	if got := cliActorName(999, named, "toolwarden"); got != "cli:toolwarden" {
		t.Errorf("sudo to oneself: %q, want cli:toolwarden", got)
	}
	if got := cliActorName(999, named, "bob"); got != "cli:toolwarden (sudo by bob)" {
		t.Errorf("sudo by bob: %q, want cli:toolwarden (sudo by bob)", got)
	}

	// sudo is setuid root: a program named sudo running as anyone else is not it.
	const rootStatus = "Name:\tsudo\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
	const userStatus = "Name:\tsudo\nUid:\t1000\t1000\t1000\t1000\n"
	for _, tc := range []struct {
		comm, status string
		want         bool
	}{
		{"sudo\n", rootStatus, true},
		{"sudo\n", userStatus, false},
		{"bash\n", rootStatus, false},
		{"sudoedit\n", rootStatus, false},
		{"sudo\n", "Name:\tsudo\n", false},
	} {
		if got := isSudoProcess(tc.comm, tc.status); got != tc.want {
			t.Errorf("isSudoProcess(%q, %q) = %v, want %v", tc.comm, tc.status, got, tc.want)
		}
	}
}

// A real process tree: this test binary started by a parent named sudo that runs as
// root records who ran sudo; started by any other parent with the same forged
// SUDO_USER, or by one named sudo that is not root, it records the account alone.
func TestCliActorSudoParent(t *testing.T) {
	if out := os.Getenv("TOOLWARDEN_TEST_ACTOR_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(cliActor().Name), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("the parent is read from /proc")
	}
	t.Parallel()
	me, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		t.Skipf("this uid has no account: %v", err)
	}
	// Not t.TempDir, whose parent only its owner may enter: the child may run as nobody.
	base, err := os.MkdirTemp("", "toolwarden-sudo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	actorUnder := func(parent, bin string, cred *syscall.Credential) string {
		t.Helper()
		n++
		dir := filepath.Join(base, strconv.Itoa(n))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "actor")
		if cred != nil {
			// Written by the child, which runs as another account.
			if err := os.WriteFile(out, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(out, 0o666); err != nil {
				t.Fatal(err)
			}
		}
		// A script: its name is the process's (comm), and it runs the test binary as a
		// child, not in its place.
		script := filepath.Join(dir, parent)
		if err := os.WriteFile(script, []byte("#!/bin/sh\n\"$@\"\nexit $?\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(script, bin, "-test.run=^TestCliActorSudoParent$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TOOLWARDEN_TEST_ACTOR_OUT="+out, "SUDO_USER=alice", "USER=alice")
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the child under %s: %v\n%s", parent, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := actorUnder("notsudo", os.Args[0], nil), "cli:"+me.Username; got != want {
		t.Errorf("SUDO_USER=alice under a parent that is no sudo: %q, want %q", got, want)
	}
	if os.Geteuid() != 0 {
		t.Skip("a parent named sudo that runs as root needs root")
	}
	if got, want := actorUnder("sudo", os.Args[0], nil), "cli:"+me.Username+" (sudo by alice)"; got != want {
		t.Errorf("under sudo (root) run by alice: %q, want %q", got, want)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no account nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// The test binary where nobody may run it: a link in base (go test's folder is its
	// owner's alone).
	bin := filepath.Join(base, "toolwarden.test")
	if err := os.Link(os.Args[0], bin); err != nil {
		t.Skipf("link the test binary where nobody may run it: %v", err)
	}
	if got, want := actorUnder("sudo", bin, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}), "cli:"+nobody.Username; got != want {
		t.Errorf("SUDO_USER=alice under a program named sudo that runs as nobody: %q, want %q", got, want)
	}
}

// token create on a data dir that holds no database (a mistyped --data-dir) is refused
// before initdb runs there: a new cluster holds no user to make a token for. A missing
// user is said with the database that was searched.
func TestTokenCreateNeedsDatabase(t *testing.T) {
	t.Parallel()
	empty := dbtest.TempDir(t)
	_, stderr, err := runCmd(t, "", "token", "create", "--user", "admin", "--name", "ci", "--data-dir", empty)
	if err == nil || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "holds no database") {
		t.Fatalf("token create on an empty data dir: %v\n%s; want a refusal naming %s", err, stderr, empty)
	}
	if _, err := os.Stat(filepath.Join(empty, "pg")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("token create made a cluster in the empty data dir: %v", err)
	}

	dir, url, _ := cliDatabase(t)
	_, _, err = runCmd(t, "", "token", "create", "--user", "nobody", "--name", "ci", "--data-dir", dir, "--database-url", url)
	dbName := url[strings.Index(url, "dbname=")+len("dbname="):]
	dbName = dbName[:strings.Index(dbName, " ")]
	if err == nil || !strings.Contains(err.Error(), `no user named "nobody" in the database `+dbName) {
		t.Fatalf("token create for a missing user: %v; want the database %s named", err, dbName)
	}
}

// user create may be the first command on a new machine, so it creates the cluster,
// but says that it did.
func TestUserCreateSaysNewCluster(t *testing.T) {
	t.Parallel()
	dir := dbtest.TempDir(t)
	stdout, stderr, err := runCmd(t, "", "user", "create", "--name", "carol", "--role", "admin", "--data-dir", dir)
	if err != nil || !strings.Contains(stdout, "created user carol") {
		t.Fatalf("user create on a new data dir: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, dir+" holds no database yet: creating one there") {
		t.Errorf("user create on a new data dir said nothing of the new cluster:\n%s", stderr)
	}
	_, stderr, err = runCmd(t, "", "user", "create", "--name", "dave", "--role", "admin", "--data-dir", dir)
	if err != nil || strings.Contains(stderr, "holds no database") {
		t.Errorf("user create on a data dir with a database: %v\n%s", err, stderr)
	}
}

// The top-level usage lists every migrate action README.md documents.
func TestUsageListsMigrateActions(t *testing.T) {
	t.Parallel()
	stdout, _, err := runCmd(t, "", "help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"migrate up|status", "migrate down N|down --to V", "migrate force V"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("usage lacks %q:\n%s", want, stdout)
		}
	}
}

// secrets rotate, retire-key and status without a key file say where it was looked for
// and how to name the one serve uses, instead of a bare lstat error. rotate and
// retire-key say so before they open anything; status once it has found a database
// with a schema (a mistyped --data-dir is said to hold none).
func TestSecretsNoKeyFileHint(t *testing.T) {
	t.Parallel()
	nowhere := "postgres://toolwarden@127.0.0.1:1/none?connect_timeout=1"
	dir, url, _ := cliDatabase(t)
	for _, args := range [][]string{
		{"secrets", "rotate", "--database-url", nowhere},
		{"secrets", "retire-key", "k1", "--database-url", nowhere},
		{"secrets", "status", "--database-url", url},
	} {
		_, stderr, err := runCmd(t, "", append(args, "--data-dir", dir)...)
		if err == nil || !strings.Contains(err.Error(), "no secret key file at "+filepath.Join(dir, "secret.key")) || !strings.Contains(err.Error(), "--secret-key-file") {
			t.Errorf("%v without a key file: %v\n%s; want the path and --secret-key-file named", args, err, stderr)
		}
	}
	_, _, err := runCmd(t, "", "secrets", "rotate", "--secret-key-file", filepath.Join(dir, "k"), "--database-url", nowhere)
	if err == nil || !strings.Contains(err.Error(), "no secret key file at "+filepath.Join(dir, "k")+" (--secret-key-file)") {
		t.Errorf("secrets rotate with a missing --secret-key-file: %v", err)
	}
}

// The CLI's explanation of bad input names its flags, not the API's fields.
func TestExplainNamesFlags(t *testing.T) {
	t.Parallel()
	dir, url, _ := cliDatabase(t)
	cli := func(args ...string) error {
		_, _, err := runCmd(t, "", append(args, "--database-url", url, "--data-dir", dir)...)
		return err
	}
	if err := cli("user", "create", "--name", "Bad Name", "--role", "wizard"); err == nil ||
		!strings.Contains(err.Error(), "--name: must be") || !strings.Contains(err.Error(), "--role: must be one of") {
		t.Fatalf("user create with a bad name and role: %v; want --name and --role named", err)
	}
	if err := cli("user", "create", "--name", "robot", "--role", "tool_user"); err != nil {
		t.Fatal(err)
	}
	if err := cli("token", "create", "--user", "robot", "--name", "t", "--expires-in-days", "5000"); err == nil ||
		!strings.Contains(err.Error(), "--expires-in-days: must be between") || strings.Contains(err.Error(), "expires_in_days") {
		t.Fatalf("token create --expires-in-days 5000: %v; want --expires-in-days named", err)
	}
	if err := cli("token", "create", "--user", "robot", "--name", "t"); err != nil {
		t.Fatal(err)
	}
	if err := cli("token", "create", "--user", "robot", "--name", "t"); err == nil || !strings.Contains(err.Error(), "--name: you already have a token named") {
		t.Fatalf("token create with a name taken: %v; want --name named", err)
	}
}

// audit verify --checkpoint - reads the checkpoint from standard input, as audit
// checkpoint --out - writes it, and names it so. Its exit status tells a log that does
// not verify (1: a checkpoint whose signature does not hold) from a check that could not
// run (3: no database, no such checkpoint, nothing on standard input).
func TestAuditVerifyStdinAndExitCodes(t *testing.T) {
	t.Parallel()
	dir, url, _ := cliDatabase(t)
	cli := func(stdin string, args ...string) (string, string, error) {
		return runCmd(t, stdin, append(args, "--database-url", url, "--data-dir", dir)...)
	}
	if _, stderr, err := cli("", "user", "create", "--name", "alice", "--role", "auditor"); err != nil {
		t.Fatalf("user create: %v\n%s", err, stderr)
	}
	cp, stderr, err := cli("", "audit", "checkpoint", "--out", "-")
	if err != nil {
		t.Fatalf("audit checkpoint --out -: %v\n%s", err, stderr)
	}
	stdout, stderr, err := cli(cp, "audit", "verify", "--checkpoint", "-")
	if err != nil || !strings.Contains(stdout, "audit chain OK") || !strings.Contains(stdout, "reaches the checkpoint (standard input): entry ") ||
		strings.Contains(stdout, os.TempDir()) {
		t.Fatalf("audit verify --checkpoint -: %v\n%s%s", err, stdout, stderr)
	}
	code := func(err error) int {
		var ce codedError
		var ee exitError
		switch {
		case errors.As(err, &ce):
			return ce.code
		case errors.As(err, &ee):
			return ee.code
		case err == nil:
			return 0
		}
		return -1
	}
	parsed, err := audit.ParseCheckpoint([]byte(cp))
	if err != nil {
		t.Fatal(err)
	}
	parsed.ID++ // the statement no longer matches its signature
	altered := string(parsed.Marshal())
	for _, tc := range []struct {
		stdin string
		args  []string
		want  int
		says  string
	}{
		{altered, []string{"--checkpoint", "-"}, exitVerifyFailed, "signature does not verify"},
		{"", []string{"--checkpoint", "-"}, exitCouldNotVerify, "standard input held nothing"},
		{"", []string{"--checkpoint", filepath.Join(dir, "nonexistent.json")}, exitCouldNotVerify, "nonexistent.json"},
	} {
		_, _, err := cli(tc.stdin, append([]string{"audit", "verify"}, tc.args...)...)
		if code(err) != tc.want || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("audit verify %v: %v (exit %d); want exit %d saying %q", tc.args, err, code(err), tc.want, tc.says)
		}
	}
	nowhere := "postgres://toolwarden@127.0.0.1:1/none?connect_timeout=1"
	_, _, err = runCmd(t, "", "audit", "verify", "--checkpoint", "none", "--data-dir", dir, "--database-url", nowhere)
	if code(err) != exitCouldNotVerify {
		t.Errorf("audit verify of an unreachable database: %v (exit %d); want exit %d", err, code(err), exitCouldNotVerify)
	}
}
