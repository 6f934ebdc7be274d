// Package atomicfile replaces files so that a crash leaves either the old or the new
// content, never half of it: the secret key file (losing it loses every secret) and
// exported configuration both need that.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// Write replaces path with data: a temporary file in the same directory, fsync, rename,
// then fsync of the directory so the rename itself survives a crash. A new file is mode
// 0600; a replaced one keeps its owner and group where the writer may set them, and
// its owner's and group's permissions (a key file shared with a service's group stays
// readable to it), never others'; the group's only while the group is kept.
//
// A symbolic link at path is written through: the file it names (which may not exist
// yet) is replaced and the link stays. Renamed over, the link would become a regular
// file and its target keep the old content. path naming anything but a regular file (a
// device, a pipe) is refused: it cannot be replaced, only written to.
func Write(path string, data []byte) (err error) {
	path, err = resolve(path)
	if err != nil {
		return err
	}
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
	if fi, serr := os.Stat(path); serr == nil {
		old, ok := fi.Sys().(*syscall.Stat_t)
		got, gerr := owner(tmp)
		if ok && gerr == nil {
			// The file keeps its owner: rewritten by root (a command run with sudo), it
			// would otherwise become root's, and the service that reads it could no
			// longer. Only root may give it away; a member of its group may keep that.
			if got.Uid != old.Uid || got.Gid != old.Gid {
				if tmp.Chown(int(old.Uid), int(old.Gid)) != nil {
					_ = tmp.Chown(-1, int(old.Gid))
				}
				if got, err = owner(tmp); err != nil {
					return err
				}
			}
			mode = keptMode(fi.Mode(), old.Gid, got.Gid)
		}
	}
	// Set only now that the group is settled: the group's bits are for the old group.
	if err = tmp.Chmod(mode); err != nil {
		return err
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
	return syncDir(dir)
}

// maxLinks bounds how many symbolic links resolve follows, as the kernel's ELOOP does.
const maxLinks = 40

// resolve is the path of the file Write replaces for path: path with its symbolic links
// followed, to a regular file or to a name where none exists yet (a dangling link's
// target: filepath.EvalSymlinks refuses those). Only the last name is resolved by hand:
// the directories are followed by the kernel alike for the temporary file and the
// rename, so both stay in one directory, on one file system.
func resolve(path string) (string, error) {
	p := path
	for range maxLinks {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// A link the kernel follows to a file that has no name to resolve to (a
			// /proc/self/fd link to a deleted file, a pipe): nothing may be made in its place.
			if _, serr := os.Stat(path); serr == nil {
				return "", fmt.Errorf("atomicfile: %s resolves to %s, which does not exist", path, p)
			}
			return p, nil
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			if !fi.Mode().IsRegular() {
				return "", fmt.Errorf("atomicfile: %s is not a regular file (%v): it cannot be replaced", path, fi.Mode().Type())
			}
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			// Not filepath.Join: cleaning "dir/../x" lexically is wrong when dir is a link.
			target = p[:strings.LastIndexByte(p, filepath.Separator)+1] + target
		}
		p = target
	}
	return "", &fs.PathError{Op: "resolve", Path: path, Err: syscall.ELOOP}
}

// owner is f's owner and group as they are now.
func owner(f *os.File) (*syscall.Stat_t, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("atomicfile: no owner in " + f.Name() + "'s status")
	}
	return st, nil
}

// keptMode is the mode of a file replacing one of mode old and group oldGID, now of
// group gid: the owner's bits (read and write at least) and the group's, never others'.
// The group's go when the group could not be kept (the writer is neither root nor in
// it): they were granted to that group, not to whichever is the writer's.
func keptMode(old os.FileMode, oldGID, gid uint32) os.FileMode {
	mode := old.Perm()&^0o007 | 0o600
	if gid != oldGID {
		mode &^= 0o070
	}
	return mode
}

// WriteNew creates path holding data, mode 0600, and fails with an error wrapping
// fs.ErrExist when path exists already, as O_CREATE|O_EXCL would; but the name appears
// with the whole content behind it, and both are synced before it returns. Created in
// place, a key file that a crash or a full disk cut between its creation and its write
// stays empty at its name, and every later start fails on it; and a name not synced may
// be lost in a power cut after values sealed with the key were committed.
func WriteNew(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err = writeSynced(tmp, data); err != nil {
		return err
	}
	// link, unlike rename, refuses an existing name: the exclusive create's meaning.
	if err = link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) || !noHardLinks(err) {
			return err
		}
		if err = writeNewInPlace(path, data); err != nil {
			return err
		}
	}
	// Removed before the directory is synced, so one sync makes both the new name and
	// the temporary one's removal durable: a copy of a key left under another name would
	// outlive its retirement from the file. The file is made either way: no error for it.
	_ = os.Remove(name)
	return syncDir(dir)
}

// link is os.Link; a variable for tests (a file system without hard links).
var link = os.Link

// noHardLinks reports whether err is a file system's refusal of hard links altogether
// (FAT, some network and FUSE file systems), not a refusal of this one.
func noHardLinks(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)
}

// writeNewInPlace is WriteNew where hard links cannot be made: the file is created in
// place, and removed again if its write fails, so only a crash can leave it short.
func writeNewInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := writeSynced(f, data); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// writeSynced writes data to f, mode 0600 whatever the umask, syncs and closes it.
func writeSynced(f *os.File, data []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes the names created, renamed or removed in dir durable.
func syncDir(dir string) error {
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

// RemoveLeftovers removes the temporary files a crash left beside path (a process killed
// between a Write's or WriteNew's creation of its temporary file and its rename or
// removal), and syncs the directory. A key file's leftover holds a copy of the keys of
// its time: a key retired from the file would live on in it. The caller must hold
// whatever serializes writes of path (a write running now has its temporary file there).
// It returns how many it removed.
func RemoveLeftovers(path string) (int, error) {
	dir := filepath.Dir(path)
	matches, err := filepath.Glob(filepath.Join(dir, "."+globEscape(filepath.Base(path))+".tmp-*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, syncDir(dir)
}

// globEscape escapes the characters filepath.Match gives a meaning to.
func globEscape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}
