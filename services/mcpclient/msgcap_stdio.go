package mcpclient

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/proctrack"
)

// keepBuffer is the largest message buffer kept for the next message once a message was
// handed on: one big answer must not pin its memory for the life of the session.
const keepBuffer = 64 << 10

// commandTransport runs a stdio server as the SDK's mcp.CommandTransport does, with a
// frameReader between the server's standard output and the SDK: the SDK's own line
// limit ends the session when a line is too long, and the cap must only drop the message.
type commandTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration // Close waits this long after closing stdin, then after SIGTERM
	lim       msgLimit
	onStart   func(pid int) // when set, called once the process runs (Manager.track)
	writeWait time.Duration // bound of a write to stdin; 0 means stdinWait (tests lower it)
	proc      *process      // the process Connect started, for tests
}

// Connect starts the command and connects to it over its standard input and output.
func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("mcpclient: stdout pipe: %w", err)
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("mcpclient: stdin pipe: %w", err)
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("mcpclient: start: %w", err)
	}
	if t.onStart != nil {
		t.onStart(t.cmd.Process.Pid)
	}
	p := &process{cmd: t.cmd, stdin: stdin, terminate: t.terminate, writeWait: cmp.Or(t.writeWait, stdinWait),
		closing: make(chan struct{})}
	t.proc = p
	// The reader's Close does nothing: the session ends by closing stdin (process.Close),
	// and Wait closes stdout once the server has exited.
	fr := newFrameReader(stdout, t.lim)
	fr.done = p.closing
	return (&mcp.IOTransport{Reader: io.NopCloser(fr), Writer: p,
		MaxLineLength: t.lim.max + sdkSlack}).Connect(ctx)
}

// stdinWait bounds a write to a stdio server's standard input: a server that reads
// nothing while its pipe is full (64 KiB) would hold the write, and with it the SDK's
// write lock, health checks, reconnects and the shutdown, for ever. Past it the session
// fails and is replaced; a server busy with a call but reading now and then is not affected.
// Only the write under way waits this long: the others waiting for the lock give up at
// their own deadline (the fork's ioConn.Write takes it with the caller's context).
const stdinWait = 60 * time.Second

// process is the writing half of a stdio session; closing it ends the server.
type process struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
	writeWait time.Duration
	timedOut  atomic.Int64 // writes that waited writeWait in vain, for tests
	// stalled is the error of the first write that waited writeWait in vain: every later
	// write fails with it at once, or the writes queued behind it (calls, replies, the
	// health check's ping) would each wait writeWait in turn before the session is replaced.
	stalled atomic.Pointer[error]
	// groupMu guards swept: the server's group is killed once it exited but before it
	// is reaped (sweepGroup); after that its id (the pid) may name someone else's group.
	groupMu sync.Mutex
	swept   bool
	// closing is closed when Close starts: a read waiting for a large-read slot gives up.
	closing   chan struct{}
	closeOnce sync.Once
}

// sweepGroup waits until the server has exited, without reaping it, then kills what
// it left in its process group: while it is an unreaped zombie, its group's id is ours.
func (p *process) sweepGroup() {
	pid := p.cmd.Process.Pid
	err := proctrack.WaitExited(pid)
	p.groupMu.Lock()
	defer p.groupMu.Unlock()
	if err == nil {
		killGroup(pid)
	}
	p.swept = true
}

// killGroup kills the server's process group, unless it was swept already.
func (p *process) killGroup() {
	p.groupMu.Lock()
	defer p.groupMu.Unlock()
	if !p.swept {
		killGroup(p.cmd.Process.Pid)
	}
}

// Write implements io.Writer: it writes to the server's standard input, giving up
// after writeWait when the server does not read, and at once after that.
func (p *process) Write(b []byte) (int, error) {
	if err := p.stalled.Load(); err != nil {
		return 0, *err
	}
	if d, ok := p.stdin.(interface{ SetWriteDeadline(time.Time) error }); ok && p.writeWait > 0 {
		_ = d.SetWriteDeadline(time.Now().Add(p.writeWait))
	}
	n, err := p.stdin.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.timedOut.Add(1)
		err = fmt.Errorf("mcpclient: the server has not read its standard input for %s: %w", p.writeWait, err)
		p.stalled.CompareAndSwap(nil, &err)
	}
	return n, err
}

// Close ends the server the way the MCP specification asks (and the SDK's
// CommandTransport does): close its standard input and wait; SIGTERM and wait; SIGKILL.
// It returns once the process has been reaped, so its exit status is known, and what it
// left in its process group has been killed.
func (p *process) Close() error {
	if p.closing != nil {
		p.closeOnce.Do(func() { close(p.closing) })
	}
	// An error here (stdin already closed) must not skip the wait: the process would
	// stay unreaped and its exit status unknown.
	_ = p.stdin.Close()
	res := make(chan error, 1)
	go func() {
		p.sweepGroup()
		res <- p.cmd.Wait()
	}()
	var waitErr error
	wait := func() bool {
		t := time.NewTimer(p.terminate)
		defer t.Stop()
		select {
		case waitErr = <-res:
			return true
		case <-t.C:
			return false
		}
	}
	if wait() {
		return waitErr
	}
	// A failed SIGTERM (the process just exited) goes straight on to SIGKILL.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err == nil && wait() {
		return waitErr
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("mcpclient: kill the server: %w", err)
	}
	if wait() {
		return waitErr
	}
	return errors.New("mcpclient: the server did not exit after SIGKILL")
}

// frameReader passes a stdio server's output on one JSON value at a time, each followed
// by a newline, as the SDK reads it. A value is held until it is complete, at most
// lim.max bytes of it; a longer one, or one of more than maxMessageValues values, is
// scanned to its end without being kept and replaced by what lim.dropped says. So
// memory stays within the cap (plus the read buffer) whatever the server writes, and
// the session goes on after an oversized message. What the SDK could not decode (a
// banner, a log line: see readable) is dropped with the rest of its line, and the
// session goes on too. A batch is passed on as its messages, a line each (splitBatch):
// held twice for a moment, with at most the cap of errors. A message may span lines,
// as the SDK's decoder takes it, but a line break where valid JSON could not have one
// ends it (scanner.broken): a malformed message whose braces do not balance takes no
// other line with it.
type frameReader struct {
	src  io.Reader
	lim  msgLimit
	in   []byte // read buffer; in[r:w] is not scanned yet
	r, w int
	err  error // from src, returned once in is used up

	inMsg bool
	over  bool  // the current message passed the cap: scanned, not kept
	seen  int64 // bytes of the current message so far
	msg   []byte
	scan  scanner
	out   []byte // ready for the SDK

	stray     bool   // dropping the rest of a line that is not a message
	strayText []byte // its first strayKeep bytes, for lim.notJSON
	straySeen int64  // its bytes so far
	strayID   []byte // the id of the call it was answered for (msgLimit.unreadable), or empty

	// hold is the large-read slot of a message past largeReadFloor, held until the SDK
	// has read it; done (the process closing) ends a wait for one.
	hold largeHold
	done <-chan struct{}

	peak int // the largest capacity msg reached, for tests
}

func newFrameReader(src io.Reader, lim msgLimit) *frameReader {
	return &frameReader{src: src, lim: lim, in: make([]byte, 32<<10), hold: largeHold{g: lim.reads, server: lim.server}}
}

// Read implements io.Reader.
func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.r < f.w {
			f.step()
			if !f.inMsg && len(f.out) == 0 {
				f.hold.drop() // a message dropped whole
			}
			continue
		}
		if f.err != nil {
			if f.stray {
				f.endStray() // the last line, without a newline
			}
			f.hold.close()
			return 0, f.err
		}
		if !f.inMsg && cap(f.msg) > keepBuffer {
			f.msg = nil
		}
		n, err := f.src.Read(f.in)
		f.r, f.w, f.err = 0, n, err
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 {
		f.out = nil // not the message's array, which the next read lets go
	}
	if len(f.out) <= 1 {
		// The SDK has the message (its newline may wait for the next message's read).
		f.hold.drop()
	}
	return n, nil
}

// step scans the unread input up to the end of the current message, or all of it.
func (f *frameReader) step() {
	chunk := f.in[f.r:f.w]
	if f.stray {
		f.skipStray(chunk)
		return
	}
	if !f.inMsg {
		// Whitespace between messages is dropped: each message goes on with one newline.
		i := 0
		for i < len(chunk) && isSpace(chunk[i]) {
			i++
		}
		f.r += i
		if i == len(chunk) {
			return
		}
		chunk = chunk[i:]
		if c := chunk[0]; c != '{' && c != '[' {
			// No message starts so (readable): a banner or a log line, dropped whole
			// rather than handed on a word at a time.
			f.startStray(nil)
			return
		}
		f.inMsg, f.over, f.seen = true, false, 0
		f.msg = f.msg[:0]
		f.scan.reset()
	}
	n, done := f.scan.feed(chunk)
	f.r += n
	f.seen += int64(n)
	if !f.over {
		if len(f.msg)+n > f.lim.max || f.scan.tooMany() {
			f.over = true
			f.msg = nil // the scanner has what it needs from these bytes
			f.hold.drop()
		} else {
			if len(f.msg)+n > largeReadFloor && !f.hold.take(f.done, nil) {
				// The process is closing: the rest of the stream is not read.
				f.r, f.err, f.inMsg, f.msg = f.w, errReadGivenUp, false, nil
				return
			}
			f.msg = growTo(f.msg, n+1, f.lim.max+1) // +1: the newline
			f.msg = append(f.msg, chunk[:n]...)
			f.peak = max(f.peak, cap(f.msg))
		}
	}
	if !done {
		return
	}
	f.inMsg = false
	if f.over {
		if r := f.lim.dropped(&f.scan, f.seen); r != nil {
			f.out = append(r, '\n')
		}
		return
	}
	if isBatch(f.msg, &f.scan) {
		// Each of its messages on a line of its own: the SDK would end the session on a
		// batch with one element it cannot decode.
		var out []byte
		for _, m := range f.lim.splitBatch(f.msg) {
			out = append(append(out, m...), '\n')
		}
		f.out = out
		return
	}
	if !readable(f.msg, &f.scan) {
		// Dropped with the rest of its line: "[INFO] listening" is one log line. A
		// response to one of our calls is answered with an error at once.
		f.startStray(bytes.TrimRight(f.msg, " \t\r\n"))
		if r := f.lim.unreadable(&f.scan); r != nil {
			f.strayID = append(f.strayID[:0], f.scan.id.bytes()...)
			f.out = append(r, '\n')
		}
		if f.scan.broken {
			// Its line ended it (scanner.broken): what follows is the next line's.
			f.endStray()
		}
		return
	}
	f.msg = append(f.msg, '\n')
	f.out = f.msg
}

// startStray begins dropping a line that is not a message; start is what of it was
// read already.
func (f *frameReader) startStray(start []byte) {
	f.stray, f.straySeen, f.strayID = true, int64(len(start)), f.strayID[:0]
	f.strayText = append(f.strayText[:0], start[:min(len(start), strayKeep)]...)
}

// skipStray drops the line being dropped up to its newline, within chunk or all of it.
func (f *frameReader) skipStray(chunk []byte) {
	line := chunk
	end := bytes.IndexByte(chunk, '\n')
	if end >= 0 {
		line = chunk[:end]
	}
	f.straySeen += int64(len(line))
	if room := strayKeep - len(f.strayText); room > 0 {
		f.strayText = append(f.strayText, line[:min(room, len(line))]...)
	}
	if end < 0 {
		f.r = f.w
		return
	}
	f.r += end + 1
	f.endStray()
}

// endStray reports the line dropped.
func (f *frameReader) endStray() {
	f.stray = false
	var answered []byte
	if len(f.strayID) > 0 {
		answered = f.strayID
	}
	f.lim.notJSON(f.strayText, f.straySeen, answered)
}
