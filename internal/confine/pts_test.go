package confine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolwarden/toolwarden/internal/confine"
)

// envPTSParent makes the test binary play an unprivileged Toolwarden with a terminal
// open (see ptsParentRole).
const envPTSParent = "TOOLWARDEN_CONFINE_TEST_PTS_PARENT"

func init() {
	if os.Getenv(envPTSParent) != "" {
		os.Exit(ptsParentRole())
	}
}

// ptsReport is what the unprivileged parent prints.
type ptsReport struct {
	Describe   string  `json:"describe"`
	PTY        int     `json:"pty"` // the number of the terminal it holds open (/dev/pts/N)
	Confined   result  `json:"confined"`
	Unconfined result  `json:"unconfined"`
	NewPTY     *result `json:"new_pty"` // a terminal made inside, confined (nil: no script(1) here)
}

// ptsProbe lists /dev/pts and says whether the parent's terminal can be opened.
func ptsProbe(n int) []string {
	return []string{"sh", "-c", fmt.Sprintf("echo \"pts:$(ls -A /dev/pts | tr '\\n' ' ')\"; if (exec 3</dev/pts/%d) 2>/dev/null; then echo opened; fi", n)}
}

// ptsParentRole runs as an unprivileged user: it holds a terminal open, as another
// terminal of Toolwarden's would be, and runs ptsProbe confined and unconfined.
func ptsParentRole() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ptmx, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(ptmx)
	if err := unix.IoctlSetPointerInt(ptmx, unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	n, err := unix.IoctlGetUint32(ptmx, unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	c := confine.New(confine.Spec{})
	rep := ptsReport{Describe: c.Describe(), PTY: int(n)}
	rep.Confined = run(failer{}, c, "/", nil, ptsProbe(int(n))...)
	rep.Unconfined = run(failer{}, confine.New(confine.Spec{Off: true}), "/", nil, ptsProbe(int(n))...)
	if _, err := exec.LookPath("script"); err == nil {
		r := run(failer{}, c, "/", nil, "script", "-qec", "tty", "/dev/null")
		rep.NewPTY = &r
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 2
	}
	return 0
}

// TestUnprivilegedPTS: Toolwarden running as a normal user runs every terminal as that
// user, so the host's /dev/pts would let a confined one open another's /dev/pts/N
// (read its keystrokes, write to its screen). Confined, /dev/pts is a new instance that
// holds none of them, and a terminal made inside still works there; unconfined, the
// other terminal is there (or the test proves nothing).
func TestUnprivilegedPTS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start the test binary as another user")
	}
	t.Parallel()
	uid, gid, _, bin := asNobody(t, "twconfine-pts-")
	out := runAs(t, bin, uid, gid, envPTSParent+"=1")
	var rep ptsReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if strings.HasPrefix(rep.Describe, "none") {
		t.Skipf("user namespaces are not available to uid %d here: %s", uid, rep.Describe)
	}
	// listed reports whether the probe's listing of /dev/pts holds the parent's terminal.
	listed := func(out string) bool {
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, "pts:"); ok {
				return slices.Contains(strings.Fields(rest), strconv.Itoa(rep.PTY))
			}
		}
		return false
	}
	if got := rep.Unconfined; !listed(got.Out) || !strings.Contains(got.Out, "opened") {
		t.Fatalf("unconfined, /dev/pts/%d should be there (or the check proves nothing): exit %d\n%s", rep.PTY, got.Code, got.Out)
	}
	if got := rep.Confined; got.Code != 0 || !strings.Contains(got.Out, "pts:") || listed(got.Out) || strings.Contains(got.Out, "opened") {
		t.Errorf("confined, another terminal of the same user is reachable as /dev/pts/%d: exit %d\n%s", rep.PTY, got.Code, got.Out)
	}
	if got := rep.NewPTY; got != nil && (got.Code != 0 || !strings.HasPrefix(strings.TrimSpace(got.Out), "/dev/pts/")) {
		t.Errorf("confined, a terminal made inside does not work: exit %d\n%s", got.Code, got.Out)
	}
}
