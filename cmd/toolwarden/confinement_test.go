package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/atomicfile"
	"github.com/toolwarden/toolwarden/internal/confine"
)

// confined starts sh -c script through serve's confinement of c (as stdio servers and
// terminals start), waits until it runs, then calls between and lets it go on; it returns
// what the script printed after that. It skips where confinement is not available.
func confined(t *testing.T, c config, cpKey, script string, between func()) string {
	t.Helper()
	spec, _, err := confinement(c, cpKey)
	if err != nil {
		t.Fatal(err)
	}
	return confinedBy(t, spec, script, between)
}

// confinedBy is confined with the confinement spec given.
func confinedBy(t *testing.T, spec confine.Spec, script string, between func()) string {
	t.Helper()
	cf := confine.New(spec)
	if d := cf.Describe(); strings.HasPrefix(d, "none") {
		t.Skip("confinement is not available here: " + d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "echo ready; read go; "+script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cf.Apply(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(outPipe)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the confined shell did not start: %q %v", line, err)
	}
	between()
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(out)
	_ = cmd.Wait()
	return string(rest)
}

// TestKeyFilesHiddenAcrossRotation: a key file kept outside the data dir stays out of
// reach of a confined process started before `secrets rotate` (or a new checkpoint key)
// replaced it by renaming a new file over it. A mount over the file itself would be
// detached by that rename, in every namespace.
func TestKeyFilesHiddenAcrossRotation(t *testing.T) {
	t.Parallel()
	keyDir, cpDir := t.TempDir(), t.TempDir()
	key, cpKey := filepath.Join(keyDir, "secret.key"), filepath.Join(cpDir, "checkpoint.key")
	for _, f := range []string{key, cpKey} {
		if err := os.WriteFile(f, []byte("OLDSECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := config{DataDir: t.TempDir(), SecretKeyFile: key}
	got := confined(t, c, cpKey, "cat "+key+" "+cpKey+" 2>/dev/null; ls -A "+keyDir+" "+cpDir, func() {
		for _, f := range []string{key, cpKey} {
			if err := atomicfile.Write(f, []byte("NEWSECRET\n")); err != nil {
				t.Fatal(err)
			}
		}
	})
	if strings.Contains(got, "SECRET") || strings.Contains(got, ".key") {
		t.Fatalf("a confined process reads the replaced key files (or their directory):\n%s", got)
	}
}

// TestKeyFileLinkedFromDataDir: a key file in the data dir that is a symbolic link to a
// file elsewhere is hidden where it lies, not only by its name in the hidden data dir.
func TestKeyFileLinkedFromDataDir(t *testing.T) {
	t.Parallel()
	data, keyDir, cpDir := t.TempDir(), t.TempDir(), t.TempDir()
	real, cpReal := filepath.Join(keyDir, "secret.key"), filepath.Join(cpDir, "checkpoint.key")
	for _, f := range []string{real, cpReal} {
		if err := os.WriteFile(f, []byte("OLDSECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(real, filepath.Join(data, "secret.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cpReal, filepath.Join(data, "checkpoint.key")); err != nil {
		t.Fatal(err)
	}
	got := confined(t, config{DataDir: data}, "", "cat "+real+" "+cpReal+" "+filepath.Join(data, "secret.key"), func() {})
	if strings.Contains(got, "SECRET") {
		t.Fatalf("a confined process reads a key file the data dir links to:\n%s", got)
	}
}

// TestKeyDirMustBeItsOwn: a key file is hidden with its whole directory, so a key whose
// directory confined programs need (/, a system directory, the home directory), also
// when the data dir links to it, is refused with --confine=required, naming the flag and
// what to do; otherwise the file alone is hidden, as before, with a warning saying so.
// With --confine=off nothing is said. Other files in a key's directory are named.
func TestKeyDirMustBeItsOwn(t *testing.T) {
	t.Parallel()
	home, _ := os.UserHomeDir()
	data := t.TempDir()
	if err := os.Symlink("/tmp/toolwarden-test.key", filepath.Join(data, "secret.key")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, key, cpKey, data, flag string
	}{
		{"root", "/secret.key", "", t.TempDir(), "--secret-key-file"},
		{"etc", "/etc/toolwarden.key", "", t.TempDir(), "--secret-key-file"},
		{"tmp", "", "/tmp/checkpoint.key", t.TempDir(), "--checkpoint-key-file"},
		{"usr", "/usr/local/etc/secret.key", "", t.TempDir(), "--secret-key-file"},
		{"linked from the data dir", "", "", data, "--secret-key-file"},
	}
	if home != "" {
		cases = append(cases, struct{ name, key, cpKey, data, flag string }{"home", filepath.Join(home, "secret.key"), "", t.TempDir(), "--secret-key-file"})
	}
	for _, tc := range cases {
		c := config{DataDir: tc.data, SecretKeyFile: tc.key, Confine: "required"}
		_, _, err := confinement(c, tc.cpKey)
		if err == nil || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "directory of its own") {
			t.Errorf("%s, required: got %v, want an error naming %s and asking for a directory of its own", tc.name, err, tc.flag)
		}
		c.Confine = "auto"
		spec, warnings, err := confinement(c, tc.cpKey)
		if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], tc.flag) || !strings.Contains(warnings[0], "only the file is hidden") {
			t.Errorf("%s, auto: got %v, %q; want one warning naming %s", tc.name, err, warnings, tc.flag)
		} else if slices.Contains(spec.Hide, "/") || slices.Contains(spec.Hide, "/etc") || slices.Contains(spec.Hide, "/tmp") {
			t.Errorf("%s, auto: hides a directory confined programs need: %q", tc.name, spec.Hide)
		}
		c.Confine = "off"
		if _, warnings, err := confinement(c, tc.cpKey); err != nil || len(warnings) != 0 {
			t.Errorf("%s, off: got %v, %q; want neither error nor warning", tc.name, err, warnings)
		}
	}
	own := t.TempDir()
	if _, warnings, err := confinement(config{DataDir: t.TempDir(), SecretKeyFile: filepath.Join(own, "secret.key"), Confine: "required"}, ""); err != nil || len(warnings) != 0 {
		t.Errorf("a key in a directory of its own: %v, %q", err, warnings)
	}
	// What goes with a key is no other file: its lock, a rotation's leftover, a mounted
	// secret's hidden entries, Toolwarden's environment file.
	for _, n := range []string{"secret.key.lock", ".secret.key.tmp-1", "..data", "toolwarden.env"} {
		writeFile(t, own, n, "x")
	}
	// A named pipe is not opened (that would wait for a writer, holding up the start).
	if err := syscall.Mkfifo(filepath.Join(own, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := confinement(config{DataDir: t.TempDir(), SecretKeyFile: filepath.Join(own, "secret.key")}, ""); err != nil || len(warnings) != 0 {
		t.Errorf("a key with its companions: %v, %q; want no warning", err, warnings)
	}
	noExt := t.TempDir()
	writeFile(t, noExt, "secret.lock", "x")
	if _, warnings, err := confinement(config{DataDir: t.TempDir(), SecretKeyFile: filepath.Join(noExt, "secret")}, ""); err != nil || len(warnings) != 0 {
		t.Errorf("a key named without .key, with its lock: %v, %q; want no warning", err, warnings)
	}
	rel, err := filepath.Rel(mustGetwd(t), filepath.Join(t.TempDir(), "k", "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := confinement(config{DataDir: t.TempDir(), SecretKeyFile: rel, Confine: "auto"}, "/etc/cp.key"); err != nil || len(warnings) != 1 {
		t.Errorf("a relative key path: %v, %q; want one warning (the checkpoint key's), not one per spelling", err, warnings)
	}
	writeFile(t, own, "server-token", "x")
	if _, warnings, err := confinement(config{DataDir: t.TempDir(), SecretKeyFile: filepath.Join(own, "secret.key")}, ""); err != nil ||
		len(warnings) != 1 || !strings.Contains(warnings[0], "server-token") {
		t.Errorf("a key beside another file: %v, %q; want a warning naming server-token", err, warnings)
	}
}

// TestServeEnvValues: a TOOLWARDEN_* value serve cannot read is a usage error naming the
// variable and the value, before anything starts, not the default taken in silence.
func TestServeEnvValues(t *testing.T) {
	for _, tc := range []struct{ env, value string }{
		{"TOOLWARDEN_SECURE_COOKIES", "yes"}, {"TOOLWARDEN_RATE_LIMIT", "unlimited"}, {"TOOLWARDEN_RATE_LIMIT", " 600"},
		{"TOOLWARDEN_CHECKPOINT_EVERY", "15"}, {"TOOLWARDEN_CHECKPOINT_EVERY", "never"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			// A bad --template-max-timeout too: were the value let through, serve would
			// still stop before it starts.
			_, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", "soon", "--data-dir", t.TempDir())
			if !errors.Is(err, errUsage) || !strings.Contains(stderr, tc.env) || !strings.Contains(stderr, strconv.Quote(tc.value)) {
				t.Errorf("got %v\n%s\nwant a usage error naming %s and %q", err, stderr, tc.env, tc.value)
			}
		})
	}
}

// envFlags reads each variable as its flag reads a value; a flag given wins, and an
// empty variable counts as unset.
func TestEnvFlags(t *testing.T) {
	t.Parallel()
	var (
		secure bool
		rate   int
		every  time.Duration
	)
	fs := newFlagSet("serve", io.Discard)
	fs.BoolVar(&secure, "secure-cookies", false, "")
	fs.IntVar(&rate, "rate-limit", 1200, "")
	fs.DurationVar(&every, "checkpoint-every", time.Hour, "")
	if err := fs.Parse([]string{"--rate-limit", "-1"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOOLWARDEN_SECURE_COOKIES": "true", "TOOLWARDEN_RATE_LIMIT": "600", "TOOLWARDEN_CHECKPOINT_EVERY": "15m"}
	if err := envFlags(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if !secure || rate != -1 || every != 15*time.Minute {
		t.Errorf("got secure cookies %v, rate limit %d, checkpoints every %s; want true, -1 (the flag's) and 15m", secure, rate, every)
	}
	env = map[string]string{"TOOLWARDEN_CHECKPOINT_EVERY": ""}
	if err := envFlags(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil || every != 15*time.Minute {
		t.Errorf("empty: got %v, %s; want it ignored", err, every)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestBuiltinRootHiddenFromServers: a --builtin-root outside the data dir is hidden from
// stdio servers (and template tools) as from terminals: it holds every conversation's
// files and the snapshots of their earlier contents.
func TestBuiltinRootHiddenFromServers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "conv-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "conv-1", "notes.txt")
	if err := os.WriteFile(file, []byte("WORKSPACE-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, _, err := confinement(config{DataDir: t.TempDir()}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := confinedBy(t, hideBuiltinRoot(spec, root), "cat "+file+" 2>/dev/null; ls -A "+root, func() {}); strings.Contains(got, "WORKSPACE-SECRET") || strings.Contains(got, "conv-1") {
		t.Fatalf("a confined server reads the built-in root:\n%s", got)
	}
}
