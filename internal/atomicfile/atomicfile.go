// Package atomicfile replaces files so that a crash leaves either the old or the new
// content, never half of it: the secret key file (losing it loses every secret) and
// exported configuration both need that.
package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// Write replaces path with data: a temporary file in the same directory, fsync, rename,
// then fsync of the directory so the rename itself survives a crash. A new file is mode
// 0600; a replaced one keeps its owner and its owner's and group's permissions (a key
// file shared with a service's group stays readable to it), never others'.
func Write(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp already uses 0600; Chmod says so explicitly and ignores umask.
	mode := os.FileMode(0o600)
	fi, serr := os.Stat(path)
	if serr == nil {
		mode = fi.Mode().Perm()&^0o007 | 0o600
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	// The file keeps its owner: rewritten by root (a command run with sudo), it would
	// otherwise become root's, and the service that reads it could no longer.
	if serr == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid()) {
			_ = tmp.Chown(int(st.Uid), int(st.Gid)) // only root may; anyone else keeps their own
		}
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// Windows cannot open a directory for syncing, and its rename is durable enough.
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
