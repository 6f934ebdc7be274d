package confine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The helper's two names (argv[0]). The first sets the namespaces up with the
// privileges it was started with; it then re-executes itself as the second, because
// capabilities belong to each thread and only an execve drops them from every thread
// of a Go process at once: the second runs with none, as the namespace's PID 1.
const (
	helperName = "toolwarden-confine"
	initName   = "toolwarden-confine-init"
)

// Exit statuses of the helper itself (the server's own status passes through).
const (
	exitSetup    = 125 // the confinement could not be set up
	exitNotFound = 127 // the server's program does not exist (inside)
	exitNoExec   = 126 // it exists but cannot be executed
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case helperName:
		// Capabilities are per thread: the thread that drops them must be the one that
		// calls execve, and init runs on the main thread.
		runtime.LockOSThread()
		os.Exit(setupMain(os.Args[1:]))
	case initName:
		os.Exit(initMain(os.Args[1:]))
	}
}

// options is the helper's command line.
type options struct {
	dir   string
	hide  []string
	keep  []string // directories that stay writable (see given); Apply's only
	show  []string // directories that stay reachable, and writable, inside hidden ones (ApplyUntrusted)
	check bool
	// path is the server's program and argv its argv (argv[0] as Toolwarden gave it).
	path string
	argv []string
}

func parseArgs(args []string) (options, error) {
	var o options
	for i, a := range args {
		switch {
		case a == "--":
			rest := args[i+1:]
			if len(rest) == 1 {
				return o, errors.New("a program needs its argv[0]")
			}
			if len(rest) >= 2 {
				o.path, o.argv = rest[0], rest[1:]
			}
			if o.dir == "" {
				return o, errors.New("-dir is required")
			}
			if o.path == "" && !o.check {
				return o, errors.New("no program to run")
			}
			return o, nil
		case strings.HasPrefix(a, "-dir="):
			o.dir = strings.TrimPrefix(a, "-dir=")
		case strings.HasPrefix(a, "-hide="):
			o.hide = append(o.hide, strings.TrimPrefix(a, "-hide="))
		case strings.HasPrefix(a, "-keep="):
			o.keep = append(o.keep, strings.TrimPrefix(a, "-keep="))
		case strings.HasPrefix(a, "-show="):
			o.show = append(o.show, strings.TrimPrefix(a, "-show="))
		case a == "-check":
			o.check = true
		default:
			return o, fmt.Errorf("unknown argument %q", a)
		}
	}
	return o, errors.New(`missing "--" before the program`)
}

// fail reports why the helper stops; Toolwarden shows it as the server's last stderr line.
func fail(code int, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", helperName, err)
	return code
}

// setupMain is the first stage: mounts, then no privileges, then the second stage.
func setupMain(args []string) int {
	o, err := parseArgs(args)
	if err != nil {
		return fail(exitSetup, err)
	}
	if err := setup(o); err != nil {
		return fail(exitSetup, err)
	}
	if err := dropPrivileges(); err != nil {
		return fail(exitSetup, err)
	}
	err = unix.Exec("/proc/self/exe", append([]string{initName}, args...), os.Environ())
	return fail(exitSetup, fmt.Errorf("start the namespace's init: %w", err))
}

// initMain is the second stage, PID 1 of the namespace: it starts the server and
// stays until it exits.
func initMain(args []string) int {
	o, err := parseArgs(args)
	if err != nil {
		return fail(exitSetup, err)
	}
	// Set again after execve, which may clear it: the namespace (and the server in
	// it) must end when Toolwarden does.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	if o.check {
		if err := selfCheck(o); err != nil {
			return fail(exitSetup, err)
		}
		return 0
	}
	return runServer(o)
}

// forwarded are the signals PID 1 passes to the server. Without a handler, a PID 1
// ignores them: the server itself would not stop on SIGTERM.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// runServer starts the server on the helper's own standard streams, forwards signals
// to it, reaps every orphan of the namespace, and returns the server's exit status.
// When PID 1 exits, the kernel kills whatever is left in the namespace.
func runServer(o options) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	pid, err := syscall.ForkExec(o.path, o.argv, &syscall.ProcAttr{Env: os.Environ(),
		Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}})
	if err != nil {
		code := exitNoExec
		if errors.Is(err, syscall.ENOENT) {
			code = exitNotFound
		}
		return fail(code, fmt.Errorf("start %s: %w", o.path, err))
	}
	go func() {
		for s := range sigs {
			_ = syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fail(exitSetup, fmt.Errorf("wait: %w", err))
		}
		if got != pid {
			continue // an orphan the server left behind
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			// PID 1 cannot die of a signal it sends itself; the shell convention says
			// which one ended the server.
			return 128 + int(ws.Signal())
		}
	}
}

// selfCheck verifies, as the server would see it, what the confinement promises: it
// runs once per Toolwarden process before any server is confined.
func selfCheck(o options) error {
	if os.Getpid() != 1 {
		return fmt.Errorf("not PID 1 of a new PID namespace (pid %d)", os.Getpid())
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
			seen++
			if strings.Trim(v, "0") != "" {
				return fmt.Errorf("capabilities left: %s %s", k, v)
			}
		case "NoNewPrivs":
			seen++
			if v != "1" {
				return errors.New("no_new_privs is not set")
			}
		}
	}
	if seen != 6 {
		return errors.New("cannot read the capability sets from /proc/self/status")
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/proc/sys", &st); err != nil || st.Flags&unix.ST_RDONLY == 0 {
		return fmt.Errorf("/proc/sys is writable (%v)", err)
	}
	for _, p := range o.hide {
		switch ents, err := os.ReadDir(p); {
		case err == nil && len(ents) > 0:
			return fmt.Errorf("%s is not hidden", p)
		case err == nil, errors.Is(err, os.ErrNotExist):
		default:
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
				return fmt.Errorf("%s is readable", p)
			}
		}
	}
	return nil
}
