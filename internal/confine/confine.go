// Package confine starts a stdio MCP server where it cannot reach Toolwarden's own
// secrets (docs/security.md): the data dir (secret key, embedded database and its socket,
// checkpoints), a secret key file kept elsewhere, and the socket of an external
// database.
//
// The server runs in its own mount, PID and IPC namespaces (and a user namespace when
// Toolwarden is not root), under its own user id, so everything it legitimately
// touches (a directory it was given, its own files next to its code, the home
// directory) behaves exactly as before. A small helper sets the namespaces up: the
// binary that imports this package re-executes itself (/proc/self/exe) under the name
// "toolwarden-confine", and this package's init function recognises that name before
// anything else runs. So the toolwarden binary and every test binary can act as the
// helper, and no second executable has to be installed.
//
// Inside, the helper makes every mount private, mounts an empty read-only tmpfs over
// each hidden directory and /dev/null over each hidden file, mounts a fresh /proc
// (the PID namespace shows only the server's own processes: not Toolwarden's or
// PostgreSQL's environment and command line), makes /proc/sys and friends read-only,
// and, when it runs as root, also makes system directories read-only, gives /dev only
// the devices every user may open and forbids device nodes elsewhere. Then it drops
// every capability, sets no_new_privs, and stays as the namespace's PID 1: it starts
// the server, forwards signals, reaps orphans and exits with the server's status.
//
// Where namespaces cannot be created (a container without the privilege, a kernel
// that forbids user namespaces), servers run as before; [Confiner.Describe] says so.
package confine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec says what confined servers must not reach.
type Spec struct {
	// Hide lists files and directories (absolute, or relative to the working directory)
	// that confined servers must not see: a directory appears empty and read-only, a
	// file unreadable. Paths that do not exist when a server starts are skipped. A file
	// is hidden by a mount over it, which the kernel detaches in every namespace when a
	// file is renamed over it: hide the directory of a file replaced that way.
	Hide []string
	// Off runs servers unconfined, as they ran before confinement existed.
	Off bool
	// Required refuses to start servers where confinement is not available, instead of
	// running them unconfined.
	Required bool
}

// Confiner confines the commands of one Toolwarden process. The zero value is not
// usable; a nil *Confiner confines nothing.
type Confiner struct {
	spec Spec
	hide []string
	// runtime are the user's runtime directories, hidden as well (see runtimeDirs).
	runtime []string
	// homes are the user's home directories, hidden from terminals (ApplyTerminal).
	homes []string
	// extraClone is added to the clone flags; tests use it to make clone fail.
	extraClone uintptr
	// modes overrides the modes tried in order; tests use it to try one alone.
	modes []mode

	once   sync.Once
	mode   mode   // 0 until the probe succeeded
	reason string // why there is no confinement, when mode is 0
}

// New returns a Confiner for spec. It starts nothing: the first Apply or Describe
// checks, once, that confinement works on this machine.
func New(spec Spec) *Confiner {
	return &Confiner{spec: spec, hide: normalize(spec.Hide), runtime: runtimeDirs(), homes: homeDirs()}
}

// homeDirs are the home directories of Toolwarden's user: $HOME and the account's.
// One that holds system directories ("/", "/var") is left out: hiding it would hide
// them too.
func homeDirs() []string {
	var out []string
	cands := []string{os.Getenv("HOME")}
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		cands = append(cands, u.HomeDir)
	}
	for _, h := range cands {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		h = filepath.Clean(h)
		if slices.ContainsFunc(systemDirs, func(d string) bool { return inside(d, h) || inside(d, realPath(h)) }) {
			continue
		}
		out = append(out, h)
	}
	return normalize(out)
}

// systemDirs must stay visible to terminals, whatever home directory holds them.
var systemDirs = append([]string{"/var", "/tmp", "/run", "/dev", "/proc", "/opt", "/srv"}, readOnlyTrees...)

// runtimeDirs are the runtime directories of Toolwarden's user: /run/user/<uid> and
// $XDG_RUNTIME_DIR. They hold the sockets of the daemons that run whatever that user
// asks, outside any namespace of ours: systemd --user (systemd-run --user), the session
// D-Bus, rootless podman and docker; same user id, so the daemons obey the server.
// $XDG_RUNTIME_DIR counts only where it is what the XDG spec says it is, a directory
// only the user may enter, and not the home directory or above it (the server keeps
// those).
func runtimeDirs() []string {
	out := []string{"/run/user/" + strconv.Itoa(os.Geteuid())}
	d := os.Getenv("XDG_RUNTIME_DIR")
	if d == "" || !filepath.IsAbs(d) {
		return out
	}
	d = filepath.Clean(d)
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		return out
	}
	st, err := os.Stat(real)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
		return out
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return out
	}
	if home := os.Getenv("HOME"); real == "/" || (filepath.IsAbs(home) && inside(filepath.Clean(home), real)) {
		return out
	}
	return normalize(append(out, d))
}

// hidden is everything the helper hides: the spec's paths and the runtime directories.
func (c *Confiner) hidden() []string {
	return normalize(append(slices.Clone(c.hide), c.runtime...))
}

// mode is how the namespaces are created.
type mode int

const (
	// modeRoot: Toolwarden runs as root and may create namespaces directly.
	modeRoot mode = iota + 1
	// modeUser: a user namespace first, mapping only Toolwarden's own user and group,
	// which gives the helper the right to mount inside and nothing outside.
	modeUser
)

func (m mode) String() string {
	if m == modeRoot {
		return "root"
	}
	return "user"
}

// Apply rewrites cmd, built by exec.Command and not yet started, so that it starts
// through the helper, confined; it keeps cmd's SysProcAttr (process group, parent
// death signal), standard streams and environment. A command that cannot start is
// left alone, so Start reports the same clear error as without confinement. Apply
// does nothing when confinement is off or unavailable.
func (c *Confiner) Apply(cmd *exec.Cmd) { c.apply(cmd, nil, true, false) }

// ApplyUntrusted is Apply for a command whose arguments a caller chose rather than an
// administrator: a built-in terminal's command line, a template tool's arguments. Its
// command line is not searched for directories that stay writable (an agent naming
// "/" there would otherwise keep the system read-only trees writable for a root
// Toolwarden); only the directories in show are. Those also stay reachable where they
// lie inside a hidden directory: a terminal works in its conversation's workspace,
// inside the data dir that is hidden from it with every other conversation's
// workspace. A directory in show that does not exist, or is a symbolic link, when the
// command starts stays hidden.
func (c *Confiner) ApplyUntrusted(cmd *exec.Cmd, show ...string) { c.apply(cmd, show, false, false) }

// ApplyTerminal is ApplyUntrusted for a built-in terminal, which also must not reach the
// home directory of Toolwarden's user: its stdio servers' configuration, credentials
// and login files, shared by every conversation (a terminal gets a home of its own in
// its workspace). A directory in show inside that home stays reachable.
func (c *Confiner) ApplyTerminal(cmd *exec.Cmd, show ...string) { c.apply(cmd, show, false, true) }

// apply confines cmd; trusted says whether an administrator chose its command line,
// whose directories (see given) and /usr/local (writableInReadOnly) then stay
// writable, home whether the user's home directories are hidden too.
func (c *Confiner) apply(cmd *exec.Cmd, show []string, trusted, home bool) {
	if c == nil || c.spec.Off {
		return
	}
	c.once.Do(c.probe)
	if c.mode == 0 && c.spec.Required && cmd.Err == nil {
		cmd.Err = fmt.Errorf("confine: stdio servers and terminals must run confined (--confine=required), and confinement is not available here: %s", c.reason)
		return
	}
	if c.mode == 0 || cmd.Err != nil || cmd.Process != nil || !startable(cmd) {
		return
	}
	dir := cmd.Dir
	if dir == "" {
		// The server would start in Toolwarden's directory; the helper goes back there
		// after mounting, so a hidden directory is not reachable through it.
		if wd, err := os.Getwd(); err == nil {
			dir = wd
		} else {
			dir = "/"
		}
	} else if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	argv0 := cmd.Path
	if len(cmd.Args) > 0 {
		argv0 = cmd.Args[0]
	}
	var rest []string
	if len(cmd.Args) > 1 {
		rest = cmd.Args[1:]
	}
	hide := c.hidden()
	if home {
		hide = normalize(append(hide, c.homes...))
	}
	args := helperArgs(dir, hide, false)
	if trusted {
		for _, k := range append(given(dir, cmd.Dir, cmd.Path, rest), writableInReadOnly...) {
			args = append(args, "-keep="+k)
		}
	}
	// Shown paths go as named, not through normalize: it would add where a link leads
	// and drop the link, and the helper would show (and keep writable) a directory a
	// link planted at a workspace's path points to. The helper refuses such a link and
	// keeps writable only the directories it did show.
	var shows []string
	for _, p := range show {
		if p == "" {
			continue
		}
		if a, err := filepath.Abs(p); err == nil {
			shows = append(shows, a)
		}
	}
	slices.Sort(shows)
	for _, p := range slices.Compact(shows) {
		args = append(args, "-show="+p)
	}
	args = append(args, "--", cmd.Path, argv0)
	cmd.Args = append(args, rest...)
	cmd.Path = "/proc/self/exe"
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.namespaces(cmd.SysProcAttr, c.mode)
}

// given returns the directories a server was given to work in: its configured working
// directory, the directories named on its command line (server-filesystem's allowed
// directories), and the npm package of the script it runs, through its bin link or as
// node <script> (server-memory keeps its file next to its code, even when installed
// globally under /usr). They stay writable where a root server's view is otherwise
// read-only: the admin chose them, and the server must work there as it did
// unconfined.
func given(dir, cmdDir, path string, args []string) []string {
	var out []string
	if cmdDir != "" {
		out = append(out, dir)
	}
	resolve := func(p string) (string, os.FileInfo) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", nil
		}
		st, err := os.Stat(real)
		if err != nil {
			return "", nil
		}
		return real, st
	}
	if real, st := resolve(path); st != nil && st.Mode().IsRegular() && isScript(real) {
		if pkg := npmPackage(real); pkg != "" {
			out = append(out, pkg)
		}
	}
	for _, a := range args {
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		switch real, st := resolve(a); {
		case st == nil:
		case st.IsDir():
			out = append(out, real)
		case st.Mode().IsRegular():
			if pkg := npmPackage(real); pkg != "" {
				out = append(out, pkg)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// packageManagers are npm packages whose scripts launch other packages (npx is npm's):
// their code is what root runs by hand later, so it stays read-only.
var packageManagers = map[string]bool{"npm": true, "corepack": true, "yarn": true, "pnpm": true}

// npmPackage returns the directory of the npm package holding script
// (.../node_modules/<name> or .../node_modules/@scope/<name>), or "" when script is
// not in one or belongs to a package manager.
func npmPackage(script string) string {
	const nm = "/node_modules/"
	i := strings.LastIndex(script, nm)
	if i < 0 {
		return ""
	}
	parts := strings.Split(script[i+len(nm):], "/")
	n := 1
	if strings.HasPrefix(parts[0], "@") {
		n = 2
	}
	if len(parts) <= n {
		return ""
	}
	name := strings.Join(parts[:n], "/")
	if packageManagers[name] {
		return ""
	}
	return script[:i+len(nm)] + name
}

// isScript reports whether p starts with "#!": a package's bin, as opposed to an
// interpreter or a compiled program.
func isScript(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [2]byte
	n, _ := f.Read(b[:])
	return n == 2 && string(b[:]) == "#!"
}

// startable reports whether the kernel could execute cmd.Path as it is: exec.Command
// checks only names it looked up on PATH, and a path given with a slash fails in Start.
func startable(cmd *exec.Cmd) bool {
	p := cmd.Path
	if !filepath.IsAbs(p) && cmd.Dir != "" {
		p = filepath.Join(cmd.Dir, p)
	}
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// namespaces sets the clone flags (and, for a user namespace, the id maps and the
// capabilities the helper needs to mount) on attr.
func (c *Confiner) namespaces(attr *syscall.SysProcAttr, m mode) {
	attr.Cloneflags |= unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | c.extraClone
	if m == modeUser {
		uid, gid := os.Geteuid(), os.Getegid()
		attr.Cloneflags |= unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// The helper keeps the same (non-zero) user id inside, so execve would drop the
		// capabilities the new namespace gave it; ambient ones survive until it drops them.
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	}
}

// Describe says which confinement applies to servers started through Apply: a short
// sentence for the server page, "none: <why>" when there is none.
func (c *Confiner) Describe() string {
	if c == nil {
		return "none: not configured"
	}
	if c.spec.Off {
		return "none: turned off"
	}
	c.once.Do(c.probe)
	if c.mode == 0 && c.spec.Required {
		return "none, so stdio servers and terminals do not start (--confine=required): " + c.reason
	}
	if c.mode == 0 {
		return "none: " + c.reason
	}
	var b strings.Builder
	if c.mode == modeUser {
		b.WriteString("user, mount, PID and IPC namespaces")
	} else {
		b.WriteString("mount, PID and IPC namespaces")
	}
	if len(c.hide) > 0 {
		b.WriteString("; hidden: " + strings.Join(c.hide, ", "))
	}
	b.WriteString("; the user's runtime directory (" + strings.Join(c.runtime, ", ") + ") hidden, with its daemons' sockets")
	b.WriteString("; only its own processes in /proc, /proc/sys read-only")
	if os.Geteuid() == 0 {
		b.WriteString("; as root: " + strings.Join(readOnlyTrees, ", ") +
			" read-only (but /usr/local, the directories the server is given and its own npm package), a minimal /dev, no device nodes elsewhere, daemon control sockets hidden")
	}
	b.WriteString("; no capabilities, no new privileges")
	return b.String()
}

// probe finds the first mode that works here by running the helper's self-check, so
// that a machine without namespaces runs servers unconfined instead of failing them.
func (c *Confiner) probe() {
	modes := []mode{modeUser}
	if os.Geteuid() == 0 {
		// Root without the privilege to create namespaces (a container) may still be
		// allowed a user namespace.
		modes = []mode{modeRoot, modeUser}
	}
	if c.modes != nil {
		modes = c.modes
	}
	var why []string
	for _, m := range modes {
		problem := c.check(m)
		if problem == "" {
			c.mode = m
			return
		}
		why = append(why, m.String()+" mode: "+problem)
	}
	c.reason = "namespaces are not available here (" + strings.Join(why, "; ") + ")"
}

// probeTimeout bounds the self-check; it normally takes a few milliseconds.
const probeTimeout = 10 * time.Second

// check runs the helper in mode m up to its self-check, which verifies inside what
// Apply promises, and says what went wrong ("" when nothing did), for Describe.
func (c *Confiner) check(m mode) string {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = append(helperArgs("/", c.hidden(), true), "--")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.namespaces(cmd.SysProcAttr, m)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return ""
	}
	if msg := strings.TrimSpace(string(out)); msg != "" {
		return strings.TrimPrefix(msg, helperName+": ")
	}
	return err.Error()
}

// helperArgs is the helper's command line up to (not including) the "--" that
// precedes the server's path and argv.
func helperArgs(dir string, hide []string, check bool) []string {
	args := []string{helperName, "-dir=" + dir}
	for _, h := range hide {
		args = append(args, "-hide="+h)
	}
	if check {
		args = append(args, "-check")
	}
	return args
}

// normalize makes paths absolute and clean, adds where each symbolic link leads, and
// drops duplicates and paths inside another hidden directory, by name or where they
// lead (hiding the directory hides them).
func normalize(paths []string) []string {
	var abs []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		a, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		abs = append(abs, a)
		// A link inside a hidden directory is hidden, not the file it leads to, which
		// may lie outside.
		if real := realPath(a); real != a {
			abs = append(abs, real)
		}
	}
	slices.Sort(abs)
	abs = slices.Compact(abs)
	var out, outReal []string // outReal[i] is realPath(out[i]), resolved once
	for _, p := range abs {
		rp := realPath(p)
		covered := false
		for i, q := range out {
			rq := outReal[i]
			if rp == rq || ((inside(p, q) || inside(rp, rq)) && isDir(q)) {
				covered = true
				break
			}
		}
		if !covered {
			out, outReal = append(out, p), append(outReal, rp)
		}
	}
	return out
}

// inside reports whether p is dir or below it.
func inside(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// realPath is where p leads through symbolic links; p when it does not exist.
func realPath(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return p
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
