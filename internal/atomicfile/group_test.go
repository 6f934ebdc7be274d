package atomicfile

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// keptMode keeps the group's bits only for the group they were granted to.
func TestKeptMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		old         os.FileMode
		oldGID, gid uint32
		want        os.FileMode
		what        string
	}{
		{0o640, 34, 34, 0o640, "group kept"},
		{0o640, 34, 1000, 0o600, "group lost: its read goes"},
		{0o664, 34, 1000, 0o600, "group lost, others never"},
		{0o644, 34, 34, 0o640, "others never"},
		{0o400, 34, 34, 0o600, "the writer must write it"},
		{0o750, 34, 1000, 0o700, "the owner's bits stay"},
	} {
		if got := keptMode(tc.old, tc.oldGID, tc.gid); got != tc.want {
			t.Errorf("%s: keptMode(%v, %d, %d) = %v, want %v", tc.what, tc.old, tc.oldGID, tc.gid, got, tc.want)
		}
	}
}

// envWriter makes the test binary write a file with Write (writerRole) and exit.
const envWriter = "TOOLWARDEN_ATOMICFILE_TEST_WRITE"

func TestMain(m *testing.M) {
	if p := os.Getenv(envWriter); p != "" {
		if err := Write(p, []byte("new\n")); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Write by a user who may not keep the file's group (not root, not in it) drops the
// group's bits: a key file toolwarden:backup 0640 rewritten by toolwarden outside backup
// becomes toolwarden:<its group> 0600, not readable by that group. A writer in the group
// keeps it and its bits, the owner too where it may not keep that. Real users: the test
// binary runs again as nobody (65534), so it needs root.
func TestWriteGroupKeptOrItsBitsDropped(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to write as another user")
	}
	t.Parallel()
	const nobody, backup = 65534, 4242 // backup: a group nobody may or may not be in
	bin := filepath.Join(reachable(t), "atomicfile.test")
	copyExecutable(t, bin)
	for _, tc := range []struct {
		what             string
		oldUID           uint32
		groups           []uint32 // the writer's supplementary groups
		wantUID, wantGID uint32
		wantMode         os.FileMode
	}{
		{"not in the group", nobody, nil, nobody, nobody, 0o600},
		{"in the group", nobody, []uint32{backup}, nobody, backup, 0o640},
		{"in the group, not the owner", 0, []uint32{backup}, nobody, backup, 0o640},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dir := reachable(t)
			if err := os.Chmod(dir, 0o777); err != nil { // nobody makes its temporary file there
				t.Fatal(err)
			}
			p := filepath.Join(dir, "secret.key")
			if err := os.WriteFile(p, []byte("old\n"), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, int(tc.oldUID), backup); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin)
			cmd.Env = []string{envWriter + "=" + p}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: tc.groups}}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("write as %d: %v: %s", nobody, err, out)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if st.Uid != tc.wantUID || st.Gid != tc.wantGID || fi.Mode().Perm() != tc.wantMode {
				t.Errorf("got %d:%d %v, want %d:%d %v", st.Uid, st.Gid, fi.Mode().Perm(), tc.wantUID, tc.wantGID, tc.wantMode)
			}
			if b, err := os.ReadFile(p); err != nil || string(b) != "new\n" {
				t.Errorf("content: %q %v", b, err)
			}
		})
	}
}

// copyExecutable copies the test binary to dst, where another user may run it (the build
// directory may be private to root).
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// reachable is a new temporary directory that other users may enter (t.TempDir and
// the directory it makes it in are private).
func reachable(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
