package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A terminal whose start is under way as its owner is disabled (its call passed the
// router before: past reserve, not listed yet) is refused as it is about to be listed,
// and its process ended; a background command and a PTY session alike. One asked for
// afterwards is refused at once, until Readmit.
func TestTerminalStartingAsOwnerIsDisabledEnds(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newTestTerminals(t, root)
	dir := filepath.Join(root, "conv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	paused, release := make(chan *Terminal, 2), make(chan struct{})
	ts.beforeAdd = func(term *Terminal) { paused <- term; <-release }
	who := TerminalCaller{UserID: "u-carol", UserName: "carol"}
	type started struct {
		term *Terminal
		err  error
	}
	bg, pty := make(chan started, 1), make(chan started, 1)
	go func() {
		term, err := ts.Start(who, "conv", dir, "sleep 600", time.Hour, 0)
		bg <- started{term, err}
	}()
	cmd := <-paused
	go func() {
		term, _, err := ts.OpenPTY(who, "conv", dir)
		pty <- started{term, err}
	}()
	sess := <-paused

	if ended := ts.EndOwnedBy("u-carol"); len(ended) != 0 {
		t.Fatalf("ended %d listed terminals, want none listed yet", len(ended))
	}
	close(release)
	for name, ch := range map[string]chan started{"the background command": bg, "the PTY session": pty} {
		if r := <-ch; !errors.Is(r.err, errDisabledOwner) {
			if r.term != nil {
				r.term.Close()
			}
			t.Errorf("%s started for a disabled owner: %v", name, r.err)
		}
	}
	waitGone(t, cmd.sid, sess.sid)
	for _, term := range []*Terminal{cmd, sess} {
		if ts.Get(term.ID) != nil {
			t.Errorf("terminal %s is listed", term.ID)
		}
		if _, err := os.Stat(filepath.Join(ts.records, strconv.Itoa(term.sid)+".json")); !os.IsNotExist(err) {
			t.Errorf("the record of terminal %s: %v", term.ID, err)
		}
	}

	ts.beforeAdd = nil // every start that ran it has returned
	if _, err := ts.Start(who, "conv", dir, "true", time.Minute, 0); !errors.Is(err, errDisabledOwner) {
		t.Fatalf("a command of the disabled owner: %v", err)
	}
	if term, err := ts.Start(TerminalCaller{UserID: "u-dave"}, "conv", dir, "true", time.Minute, 0); err != nil {
		t.Fatalf("another person's command: %v", err)
	} else {
		<-term.Done()
	}
	ts.Readmit("u-carol")
	term, err := ts.Start(who, "conv", dir, "echo back", time.Minute, 0)
	if err != nil {
		t.Fatalf("a command once enabled again: %v", err)
	}
	waitFor(t, term, 0, "back")
}
