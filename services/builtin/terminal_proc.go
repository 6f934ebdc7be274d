package builtin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolwarden/toolwarden/internal/proctrack"
)

// Processes a terminal starts run in a session of their own (Setsid): a session
// and everything it started, background jobs in process groups of their own
// included, share its session id, so killing by session id leaves no orphans.
// Each carries markerEnv in its environment, and its session is recorded in a file
// under <root>/.terminals/<host> (package proctrack, which stdio MCP servers share), so
// that after a crash the next start kills what is still running, and only what is
// provably ours.

// markerEnv is the environment variable that marks a terminal's processes.
const markerEnv = "TOOLWARDEN_TERMINAL"

// record is what the file of one running session says (its SID set).
type record = proctrack.Record

// recordDir is where the sessions of host (TerminalOptions.Host) are recorded:
// <root>/.terminals/<host>. The built-in root may be shared by replicas on several hosts
// (docs/deploy.md); a host sees and kills only its own processes, so its cleanup must
// read only its own records, or it would drop another host's records unkilled (and
// session ids, the files' names, repeat across hosts).
func recordDir(root, host string) string { return filepath.Join(legacyRecordDir(root), host) }

// legacyRecordDir is where releases before per-host records recorded every host's
// sessions.
func legacyRecordDir(root string) string { return filepath.Join(root, ".terminals") }

// endRun kills every process that carries the run's marker and drops its record; it
// reports how many it killed.
func endRun(dir, marker string) int {
	n := proctrack.KillMarked(markerEnv, marker)
	proctrack.RemoveRun(dir, marker)
	return n
}

// hostID names this host's records (recordDir): its host name and machine id
// (/etc/machine-id), so that neither hosts sharing a name nor containers sharing an
// image's machine id share records. "" parts are left out; "unknown-host" if both are.
var hostID = sync.OnceValue(func() string {
	name, _ := os.Hostname()
	var id string
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
			id = string(bytes.TrimSpace(b))
			break
		}
	}
	return hostDirName(name, id)
})

// hostDirName makes a directory name of a host's name and machine id: letters, digits,
// dots, dashes and underscores, not starting with a dot, at most 128 bytes.
func hostDirName(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('-')
		}
		for _, c := range p {
			if c < 128 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				b.WriteRune(c)
			} else {
				b.WriteByte('_')
			}
		}
	}
	s := b.String()
	if len(s) > 128 {
		s = s[:128]
	}
	if s == "" {
		return "unknown-host"
	}
	if s[0] == '.' {
		s = "_" + s[1:]
	}
	return s
}

// sessionMembers are the processes whose session id is sid.
func sessionMembers(sid int) []int { return proctrack.SessionMembers(sid) }

// marked reports whether process pid carries marker in its environment.
func marked(pid int, marker string) bool { return proctrack.Marked(pid, markerEnv, marker) }

// signalSession sends sig to every process of session sid (only those that carry
// marker, when marker is not ""), and reports how many it signalled. While the
// session's leader is alive or a zombie not yet reaped, its id cannot name anyone
// else's session, and marker may be "" (a process that cleared its environment goes
// too): Linux frees a process id only once no process uses it as its id, its group's
// or its session's, and a session's id is its leader's. Once the leader was reaped,
// the session may empty and its id be taken by a newcomer's, and only the marker tells
// our processes from the newcomer's.
func signalSession(sid int, marker string, sig syscall.Signal) int {
	n := 0
	if marker == "" {
		_ = syscall.Kill(-sid, sig) // the leader's process group, at once
	}
	for _, pid := range sessionMembers(sid) {
		// Read again once the process is held (proctrack.SignalIf): it may have
		// exited since the list was read, and its pid gone to a stranger.
		if proctrack.SignalIf(pid, sig, func() bool { return proctrack.InSession(pid, sid) && (marker == "" || marked(pid, marker)) }) {
			n++
		}
	}
	return n
}

// terminalEnv is the environment variable that marks the processes of one terminal
// (its id; markerEnv marks those of the run): a process that left the terminal's
// session (setsid) is still found by it when the terminal ends.
const terminalEnv = "TOOLWARDEN_TERMINAL_ID"

// sweepLimit bounds how long sweepEnded goes on killing (a process in uninterruptible
// sleep dies only when it wakes).
const sweepLimit = 2 * time.Second

// sweepEnded kills what a terminal left running once its leader exited, and must run
// before the leader is reaped: every process of session sid, marked or not (the
// zombie leader keeps the id ours), and every process that carries terminalEnv=id,
// wherever it went (setsid). It goes on until a pass finds none, so that a process
// forked between a pass's reading of /proc and its kill goes with the next. Only a
// process that both left the session and dropped terminalEnv from its environment
// escapes it (the run's marker may still find it when Toolwarden stops); confined, the
// PID namespace ends with its init, and nothing escapes.
func sweepEnded(sid int, id string) {
	for deadline := time.Now().Add(sweepLimit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if signalSession(sid, "", syscall.SIGKILL)+proctrack.KillMarked(terminalEnv, id) == 0 {
			return
		}
	}
}

// endSession ends session sid: SIGTERM, up to grace for it to go, then SIGKILL.
// exited closes when the leader was reaped (nil: it was); until then every process of
// the session is signalled, from then on only those that carry marker.
func endSession(sid int, marker string, grace time.Duration, exited <-chan struct{}) {
	only := func() string {
		if exited == nil {
			return marker
		}
		select {
		case <-exited:
			return marker
		default:
			return ""
		}
	}
	signalSession(sid, only(), syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if len(sessionMembers(sid)) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	signalSession(sid, only(), syscall.SIGKILL)
}

// CleanupOrphans kills the terminals' processes a previous run of Toolwarden on this
// host (host, TerminalOptions.Host) left running (it crashed or was killed before it
// could end them): every process of a recorded session that carries the session's
// marker. A process that only reuses a recorded id is left alone, and so are the
// records of other hosts sharing the root. It reports how many processes it killed.
//
// Records an earlier release left directly in <root>/.terminals, every host's together,
// are read too: what of theirs runs here is killed (a run's marker is its own, so a
// process here that carries it is this host's), but the records stay, since this host
// cannot tell its own from another's whose next start still has to read them.
func CleanupOrphans(root, host string) (int, error) {
	n, err := proctrack.Cleanup(recordDir(root, host), markerEnv, "")
	return n + proctrack.KillLeftovers(legacyRecordDir(root), markerEnv), err
}
