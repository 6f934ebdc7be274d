package builtin

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// One conversation's create_session that replaces its session in another directory
// waits for the old session to close (up to seconds); another conversation's
// create_session does not wait for it.
func TestSlowCloseDoesNotHoldUpOtherConversations(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"a/one", "a/two", "b"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The old session's end is recorded only once the test lets it: until then its
	// Close waits (for up to 2 s), holding conversation a's create_session.
	var old *Terminal
	closing, release := make(chan struct{}), make(chan struct{})
	ts, err := NewTerminals(TerminalOptions{Root: root, Env: ownHome(t), BufferBytes: 64 << 10,
		OnChange: func(term *Terminal, c TerminalChange) {
			if c == TerminalExited && term == old {
				close(closing)
				<-release
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	who := TerminalCaller{UserID: "u-a", UserName: "ann"}
	old, _, err = ts.OpenPTY(who, "conv-a", dirs["a/one"])
	if err != nil {
		t.Fatal(err)
	}
	replaced := make(chan error, 1)
	go func() {
		_, _, err := ts.OpenPTY(who, "conv-a", dirs["a/two"])
		replaced <- err
	}()
	select {
	case <-closing:
	case <-time.After(10 * time.Second):
		t.Fatal("the old session of conv-a never ended")
	}
	defer close(release)

	start := time.Now()
	other := make(chan error, 1)
	go func() {
		_, _, err := ts.OpenPTY(TerminalCaller{UserID: "u-b", UserName: "bob"}, "conv-b", dirs["b"])
		other <- err
	}()
	// Closing the old session waits up to 2 s for its end to be recorded: another
	// conversation's session opening within 1.5 s did not wait for it.
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("conv-b's create_session waits for conv-a's old session to close")
	}
	select {
	case <-replaced:
		t.Fatalf("conv-a's create_session returned before its old session closed (after %s)", time.Since(start))
	default:
	}
}
