package db

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A cluster this process did not start is watched by its pid file: when the postmaster
// died and its pid went to another process, the cluster is dead (it was given the
// benefit of the doubt for as long as that process lived), while a process working in
// the data dir that does not answer yet (a postmaster busy or starting) still is alive.
func TestAliveSeesAReusedPid(t *testing.T) {
	t.Parallel()
	c := &Cluster{Dir: t.TempDir()}
	if err := os.MkdirAll(c.DataDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string
		want bool
	}{
		{"another process took the pid", t.TempDir(), false},
		{"a process in the data dir not answering yet", c.DataDir(), true},
	} {
		cmd := exec.Command("sleep", "60")
		cmd.Dir = tc.dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := strconv.Itoa(cmd.Process.Pid)
		if err := os.WriteFile(filepath.Join(c.DataDir(), "postmaster.pid"), []byte(pid+"\n"+c.DataDir()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := c.alive(context.Background()); got != tc.want {
			t.Errorf("%s: alive %v, want %v", tc.name, got, tc.want)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
