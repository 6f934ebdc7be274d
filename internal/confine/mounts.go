package confine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readOnlyTrees are made read-only when the server runs as root: without
// capabilities root still owns these files, and a changed cron entry, preload
// library, sudoers line or system binary would run unconfined later.
var readOnlyTrees = []string{"/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/var/spool", "/sys"}

// writableInReadOnly stays writable inside a read-only tree for a server an
// administrator configured (Apply): packages installed globally with npm or pip live
// there, and a server such as server-memory writes its file next to its own code. Not
// for terminals and template tools: root would later run what they put there.
var writableInReadOnly = []string{"/usr/local"}

// daemonSockets are hidden when the server runs as root: these daemons do whatever
// root asks (systemd runs a unit, docker a container with the host's disk), outside
// any namespace of ours.
var daemonSockets = []string{
	"/run/systemd/private", "/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket",
	"/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/snapd.socket", "/run/snapd-snap.socket",
}

// procReadOnly and procMasked follow what container runtimes do with /proc: kernel
// settings and triggers read-only, files that leak kernel memory or other users'
// keys hidden.
var (
	procReadOnly   = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}
	procMaskedFile = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats", "/proc/timer_stats"}
	procMaskedDir  = []string{"/proc/acpi", "/proc/scsi", "/proc/asound"}
)

// setup builds the server's view of the filesystem; it runs as PID 1 of the new
// namespaces, before any privilege is dropped.
func setup(o options) error {
	// First: nothing mounted below may propagate to Toolwarden's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Opened before anything is hidden: afterwards their paths lead into the tmpfs
	// that covers them.
	shown, err := openShown(o.show)
	if err != nil {
		return err
	}
	defer func() {
		for _, d := range shown {
			unix.Close(d.fd)
		}
	}()
	if err := freshProc(); err != nil {
		return err
	}
	// The shown directories stay writable, and only those opened: a link refused there
	// must not keep what it points to writable (-keep comes only from an administrator's
	// command line, Apply).
	keep := slices.Clone(o.keep)
	for _, d := range shown {
		keep = append(keep, d.path)
	}
	hide := o.hide
	// Root (in the host's user namespace or mapped to it in one of ours) still owns
	// every root-owned file and device node, capabilities or not.
	if os.Geteuid() == 0 {
		if err := minimalDev(); err != nil {
			return err
		}
		if err := noDevicesOutsideDev(); err != nil {
			return err
		}
		for _, t := range readOnlyTrees {
			if err := readOnlyTree(t, keep); err != nil {
				return err
			}
		}
		hide = append(hide, daemonSockets...)
	} else {
		// Shared memory of other processes of this user (PostgreSQL's, when it runs as
		// the same user) stays outside; the server gets its own.
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mount /dev/shm: %w", err)
		}
		if err := freshPts(); err != nil {
			return err
		}
	}
	// Last, so that nothing mounted above covers a hidden path's mount.
	var uncover []string
	for _, p := range hide {
		// Compared by real paths: the tmpfs lands where p leads (mount follows links),
		// and shown paths are real.
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = p
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() && slices.ContainsFunc(shown, func(d shownDir) bool { return inside(d.path, real) }) {
			if err := showInside(p, real, shown); err != nil {
				return err
			}
			uncover = append(uncover, p)
			continue
		}
		if err := hidePath(p); err != nil {
			return err
		}
	}
	// Read-only only now: the directories shown needed their mount points made in it.
	for _, p := range uncover {
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|hiddenFlags, ""); err != nil {
			return fmt.Errorf("hide directory %s: %w", p, err)
		}
	}
	// Return to the working directory by name: the one inherited was looked up before
	// the mounts and could be inside a hidden directory.
	if err := unix.Chdir(o.dir); err != nil {
		return fmt.Errorf("working directory %s: %w", o.dir, err)
	}
	return nil
}

// freshProc mounts a /proc of the new PID namespace: only the server's processes,
// not Toolwarden's (its environment, its command line with --database-url, its root
// directory that still shows the data dir) nor PostgreSQL's.
func freshProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount a fresh /proc: %w", err)
	}
	for _, p := range procReadOnly {
		if err := readOnlyTree(p, nil); err != nil {
			return err
		}
	}
	for _, p := range procMaskedFile {
		if err := hidePath(p); err != nil {
			return err
		}
	}
	for _, p := range procMaskedDir {
		if err := hidePath(p); err != nil {
			return err
		}
	}
	return nil
}

// hidePath mounts an empty read-only tmpfs over a directory, or /dev/null (on a mount
// that allows no device, so opening it fails) over anything else.
func hidePath(p string) error {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fs.ErrPermission):
		return nil // unreachable for us, so for the server too: it has fewer rights
	case err != nil:
		return fmt.Errorf("hide %s: %w", p, err)
	}
	const flags = hiddenFlags
	if st.IsDir() {
		if err := unix.Mount("tmpfs", p, "tmpfs", flags, "mode=0555,size=4k"); err != nil {
			return fmt.Errorf("hide directory %s: %w", p, err)
		}
		return nil
	}
	if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("hide file %s: %w", p, err)
	}
	if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
		return fmt.Errorf("hide file %s: %w", p, err)
	}
	return nil
}

// hiddenFlags are the flags of what covers a hidden path.
const hiddenFlags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// shownDir is a directory to show (ApplyUntrusted), opened before the mounts.
type shownDir struct {
	path string // its real path, no link in it
	fd   int
}

// openShown opens each directory to show. One that does not exist, is no directory or
// is a symbolic link (planted where a workspace should be, it would show what it
// points to) is skipped, and stays hidden; links among its parents are resolved.
func openShown(paths []string) ([]shownDir, error) {
	var out []shownDir
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
			continue
		case err != nil:
			for _, d := range out {
				unix.Close(d.fd)
			}
			return nil, fmt.Errorf("show %s: %w", p, err)
		}
		// The real path must lead to what was opened: a link swapped in meanwhile, or
		// a link to a directory (O_PATH opens the link itself), does not.
		real, err := filepath.EvalSymlinks(p)
		var at, there unix.Stat_t
		if err != nil || unix.Fstat(fd, &at) != nil || at.Mode&unix.S_IFMT != unix.S_IFDIR ||
			unix.Lstat(real, &there) != nil || at.Dev != there.Dev || at.Ino != there.Ino {
			unix.Close(fd)
			continue
		}
		if slices.ContainsFunc(out, func(d shownDir) bool { return d.path == real }) {
			unix.Close(fd)
			continue
		}
		out = append(out, shownDir{path: real, fd: fd})
	}
	return out, nil
}

// showInside hides directory p (whose real path is real) as hidePath does, except
// that the shown directories inside it are bound back at their paths, with what is
// mounted below them. The tmpfs stays writable for the mount points to be made; the
// caller makes it read-only afterwards.
func showInside(p, real string, shown []shownDir) error {
	if err := unix.Mount("tmpfs", p, "tmpfs", hiddenFlags&^unix.MS_RDONLY, "mode=0755,size=4k"); err != nil {
		return fmt.Errorf("hide directory %s: %w", p, err)
	}
	for _, d := range shown {
		if !inside(d.path, real) {
			continue
		}
		if err := os.MkdirAll(d.path, 0o755); err != nil {
			return fmt.Errorf("show %s: %w", d.path, err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(d.fd), d.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("show %s: %w", d.path, err)
		}
	}
	return nil
}

// readOnlyTree makes dir and every mount below it read-only, except the directories
// in keep (and what is below them). A missing dir, a dir inside one of keep, or a
// symlink (/bin → usr/bin on merged systems, already covered by its target) is left
// alone.
func readOnlyTree(dir string, keep []string) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.Mode()&fs.ModeSymlink != 0) || insideAny(dir, keep) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read-only %s: %w", dir, err)
	}
	var kept []string
	for _, k := range keep {
		if !inside(k, dir) {
			continue
		}
		if st, err := os.Lstat(k); err != nil || !st.IsDir() {
			continue
		}
		// Its own mount, so that it keeps its flags when the tree around it changes.
		if err := unix.Mount(k, k, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("keep %s writable: %w", k, err)
		}
		kept = append(kept, k)
	}
	// A bind of dir onto itself makes it a mount whose flags can change alone.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("read-only %s: %w", dir, err)
	}
	mounts, err := mountTable()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if !inside(m.point, dir) || insideAny(m.point, kept) {
			continue
		}
		if err := remount(m, unix.MS_RDONLY); err != nil {
			return fmt.Errorf("read-only %s: %w", m.point, err)
		}
	}
	return nil
}

// noDevicesOutsideDev forbids device nodes on every mount but /dev's: root owns every
// node it finds, so a block device node anywhere (a chroot, a container's tree) would
// open the disk raw and read the data dir under the mounts.
func noDevicesOutsideDev() error {
	mounts, err := mountTable()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if inside(m.point, "/dev") {
			continue
		}
		if err := remount(m, unix.MS_NODEV); err != nil {
			return fmt.Errorf("no devices on %s: %w", m.point, err)
		}
	}
	return nil
}

// minimalDev replaces /dev with a tmpfs holding only the character devices every
// user of this machine may read and write (null, zero, random, tty, fuse...), fresh
// pseudo-terminals and shared memory. Root owns every node, so the host's /dev would
// give it raw disks, memory, consoles and input devices.
func minimalDev() error {
	devs, links, err := openDevices("/dev")
	if err != nil {
		return err
	}
	// The old /dev stays reachable through this descriptor for the bind mounts below.
	fd, err := unix.Open("/dev", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev: %w", err)
	}
	defer unix.Close(fd)
	old := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devs {
		target := filepath.Join("/dev", d)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("minimal /dev: %w", err)
		}
		if err := os.WriteFile(target, nil, 0o666); err != nil {
			return fmt.Errorf("minimal /dev: %w", err)
		}
		if err := unix.Mount(filepath.Join(old, d), target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("minimal /dev: bind %s: %w", d, err)
		}
	}
	links["fd"] = "/proc/self/fd"
	links["stdin"], links["stdout"], links["stderr"] = "/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2"
	links["ptmx"] = "pts/ptmx"
	for name, to := range links {
		if err := os.Symlink(to, filepath.Join("/dev", name)); err != nil {
			return fmt.Errorf("minimal /dev: %w", err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("minimal /dev: %w", err)
		}
	}
	// A new devpts instance: the host's would give root every terminal of the machine.
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	if err := unix.Mount("", "/dev", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("read-only /dev: %w", err)
	}
	return nil
}

// freshPts mounts a new devpts instance on /dev/pts for a user other than root (root's
// comes with minimalDev). Every terminal runs as that same user: the host's instance
// would let one open another's /dev/pts/N, read its keys and write to its screen. The
// server keeps the terminal it was started on as its standard streams; the new
// instance holds the ones made inside (/dev/ptmx opens the pts next to it). Where
// devpts cannot be mounted, /dev/pts is hidden.
func freshPts() error {
	err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	if err == nil {
		return nil
	}
	if err := hidePath("/dev/pts"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	return nil
}

// openDevices lists, under dir, the character devices that every user may read and
// write (paths relative to dir) and the top-level symlinks (such as /dev/log). Block
// devices never qualify; pseudo-terminals and shared memory get fresh instances.
func openDevices(dir string) ([]string, map[string]string, error) {
	var devs []string
	links := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // an unreadable corner of /dev has nothing every user may open
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case p == dir:
			return nil
		case d.IsDir():
			if rel == "pts" || rel == "shm" || rel == "mqueue" || rel == "hugepages" {
				return filepath.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			if !strings.Contains(rel, "/") {
				if to, err := os.Readlink(p); err == nil {
					links[rel] = to
				}
			}
			return nil
		case d.Type()&fs.ModeCharDevice != 0:
			info, err := d.Info()
			if err == nil && info.Mode().Perm()&0o006 == 0o006 && rel != "ptmx" {
				devs = append(devs, rel)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return devs, links, nil
}

// mount is one line of /proc/self/mountinfo: which, where, and its flags now.
type mount struct {
	id    uint64
	point string
	flags uintptr
}

// mountTable reads the mounts of this namespace that a path reaches: not those under
// another mount on the same point, nor those below a point that a later mount covers
// (the host's /proc/sys/fs/binfmt_misc under the fresh /proc). Only those can be
// reached by the server, and only those can be remounted by path.
func mountTable() ([]mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		id, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		m := mount{id: id, point: unescape(f[4]), flags: optionFlags(f[5])}
		var stx unix.Statx_t
		// AT_NO_AUTOMOUNT: looking must not trigger an automount (binfmt_misc's).
		err = unix.Statx(unix.AT_FDCWD, m.point, unix.AT_NO_AUTOMOUNT|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx)
		if err != nil || stx.Mnt_id != m.id {
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// optionFlags turns mountinfo's per-mount options into mount flags: a remount must
// repeat the flags it keeps (and, in a user namespace, may not drop locked ones).
func optionFlags(opts string) uintptr {
	var f uintptr
	for _, o := range strings.Split(opts, ",") {
		f |= mountOptions[o]
	}
	return f
}

// mountOptions are the per-mount options a remount keeps, as mount flags.
var mountOptions = map[string]uintptr{"ro": unix.MS_RDONLY, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV,
	"noexec": unix.MS_NOEXEC, "noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME, "relatime": unix.MS_RELATIME,
	"nosymfollow": unix.MS_NOSYMFOLLOW}

// unescape decodes mountinfo's octal escapes (\040 for a space, and so on).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// remount adds flags to the mount m, keeping the ones it has.
func remount(m mount, add uintptr) error {
	return unix.Mount("", m.point, "", unix.MS_BIND|unix.MS_REMOUNT|m.flags|add, "")
}

// insideAny reports whether p is inside one of dirs.
func insideAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if inside(p, d) {
			return true
		}
	}
	return false
}
