package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/httphead"
	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsflate"
	"github.com/gobwas/ws/wsutil"
)

// wsClientsEnv, set to a wsClientsConfig in JSON, makes this test binary the websocket
// clients of BenchmarkTransitionReachesDOM instead of running tests. They run in a
// process of their own, as browsers would: clients sharing the server's process queued
// behind its goroutines in Go's run queue and read their frames only once most of the
// server's writes were done, which no browser does.
const wsClientsEnv = "TOOLWARDEN_BENCH_WS_CLIENTS_PROCESS"

// wsClientsConfig is what the clients' process is told.
type wsClientsConfig struct {
	URL     string      // the server's /ws, ws://…
	Header  http.Header // the signed-in person's cookie and the page's origin
	Topic   string      // what they follow, as the /tools page does
	Last    int64       // the event cursor they subscribe from
	Clients int
	Card    string // what the tool's card holds: `id="tool-card-…"`
}

// wsClientsMain runs the clients and exits when this binary was started for them.
//
// Protocol, one line each way: the clients' process writes "connected" once every
// client subscribed. The benchmark writes "expect K T0 STATUS" before transition K
// (T0 its start, Unix ns; STATUS the card's data-status it ends in) and waits for "ok";
// once every client holds that card, the process writes "got K" and each client's
// delay from T0 in µs. "error …" ends it.
func wsClientsMain() {
	raw := os.Getenv(wsClientsEnv)
	if raw == "" {
		return
	}
	var cfg wsClientsConfig
	err := json.Unmarshal([]byte(raw), &cfg)
	if err == nil {
		err = runWSClients(cfg, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// wsSeen is one client holding transition k's card, delay after its start.
type wsSeen struct {
	k     int64
	delay time.Duration
}

func runWSClients(cfg wsClientsConfig, in io.Reader, out io.Writer) error {
	var (
		iter atomic.Int64 // the transition clients wait for
		t0   atomic.Int64 // its start, Unix ns
		want atomic.Value // the card's data-status it ends in, as bytes
		// What a client found to hold the card in its awaited state, as it arrived
		// (compressed): a client whose frame is the same bytes holds the same card, so
		// only the first clients of a transition decompress.
		checked atomic.Pointer[checkedFrame]
		seen    = make(chan wsSeen, cfg.Clients)
	)
	want.Store([]byte(`data-status="none"`))
	card := []byte(cfg.Card)
	holdsCard := func(k int64, payload []byte, compressed bool) bool {
		if c := checked.Load(); c != nil && c.iter == k && bytes.Equal(c.payload, payload) {
			return true
		}
		msg := payload
		if compressed {
			var err error
			if msg, err = wsflate.DefaultHelper.Decompress(payload); err != nil {
				return false
			}
		}
		if !bytes.Contains(msg, card) || !bytes.Contains(msg, want.Load().([]byte)) {
			return false
		}
		checked.Store(&checkedFrame{iter: k, payload: slices.Clone(payload)})
		return true
	}
	d := ws.Dialer{Timeout: 30 * time.Second, Header: ws.HandshakeHeaderHTTP(cfg.Header),
		Extensions: []httphead.Option{wsflate.DefaultParameters.Option()}}
	subscribe, _ := json.Marshal(map[string]any{"subscribe": []string{cfg.Topic}, "last_id": cfg.Last})
	for range cfg.Clients {
		conn, br, shake, err := d.Dial(context.Background(), cfg.URL)
		if err != nil {
			return fmt.Errorf("websocket client: %w", err)
		}
		defer conn.Close()
		if len(shake.Extensions) != 1 || !bytes.Equal(shake.Extensions[0].Name, []byte("permessage-deflate")) {
			return fmt.Errorf("websocket client: the server did not agree to compression as it does with a browser: %v", shake.Extensions)
		}
		if err := wsutil.WriteClientText(conn, subscribe); err != nil {
			return err
		}
		r := bufio.NewReaderSize(conn, 4096)
		if br != nil {
			r = bufio.NewReaderSize(io.MultiReader(br, conn), 4096)
		}
		go func() {
			var done int64 // the last transition this client saw
			var msg []byte
			compressed := false
			hdr := make([]byte, 2, ws.MaxHeaderSize-2)
			for {
				h, err := ws.ReadHeaderBuffer(r, hdr)
				if err != nil {
					return
				}
				if h.OpCode.IsControl() {
					ctl := make([]byte, h.Length)
					if _, err := io.ReadFull(r, ctl); err != nil || h.OpCode == ws.OpClose {
						return
					}
					if h.OpCode == ws.OpPing {
						_ = wsutil.WriteClientMessage(conn, ws.OpPong, ctl)
					}
					continue
				}
				if h.OpCode != ws.OpContinuation {
					msg, compressed = msg[:0], h.Rsv1()
				}
				n := len(msg)
				msg = slices.Grow(msg, int(h.Length))[:n+int(h.Length)]
				if _, err := io.ReadFull(r, msg[n:]); err != nil {
					return
				}
				if !h.Fin {
					continue
				}
				at := time.Now()
				k := iter.Load()
				if k == done || !holdsCard(k, msg, compressed) {
					continue
				}
				done = k
				seen <- wsSeen{k: k, delay: at.Sub(time.Unix(0, t0.Load()))}
			}
		}()
	}
	w := bufio.NewWriter(out)
	var sayMu sync.Mutex // the collector and the command loop both answer
	say := func(line string) error {
		sayMu.Lock()
		defer sayMu.Unlock()
		if _, err := w.WriteString(line + "\n"); err != nil {
			return err
		}
		return w.Flush()
	}
	if err := say("connected"); err != nil {
		return err
	}
	// Each transition's delays, reported once every client has one.
	reported := make(chan error, 1)
	var delaysMu sync.Mutex
	delays := map[int64][]time.Duration{}
	go func() {
		for s := range seen {
			delaysMu.Lock()
			delays[s.k] = append(delays[s.k], s.delay)
			got := delays[s.k]
			if len(got) == cfg.Clients {
				delete(delays, s.k)
			}
			delaysMu.Unlock()
			if len(got) < cfg.Clients {
				continue
			}
			line := []byte("got " + strconv.FormatInt(s.k, 10))
			for _, d := range got {
				line = strconv.AppendInt(append(line, ' '), d.Microseconds(), 10)
			}
			if err := say(string(line)); err != nil {
				reported <- err
				return
			}
		}
	}()
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		var k, start int64
		var status string
		if _, err := fmt.Sscanf(lines.Text(), "count %d", &k); err == nil {
			// How many clients hold transition k's card (the benchmark gave up waiting).
			delaysMu.Lock()
			n := len(delays[k])
			delaysMu.Unlock()
			if err := say(fmt.Sprintf("have %d %d", k, n)); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Sscanf(lines.Text(), "expect %d %d %s", &k, &start, &status); err != nil {
			return fmt.Errorf("clients: %q: %w", lines.Text(), err)
		}
		want.Store([]byte(`data-status="` + status + `"`))
		t0.Store(start)
		iter.Store(k)
		if err := say("ok"); err != nil {
			return err
		}
		select {
		case err := <-reported:
			return err
		default:
		}
	}
	return lines.Err()
}

// wsClients is the benchmark's end of the clients' process.
type wsClients struct {
	in    io.WriteCloser
	lines chan string
}

// startWSClients starts the clients' process and returns once every client subscribed.
func startWSClients(b *testing.B, cfg wsClientsConfig) *wsClients {
	b.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), wsClientsEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := &wsClients{in: in, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		s := bufio.NewScanner(out)
		s.Buffer(nil, 16<<20) // a "got" line carries every client's delay
		for s.Scan() {
			c.lines <- s.Text()
		}
	}()
	if line := c.next(b, 5*time.Minute); line != "connected" {
		b.Fatalf("websocket clients: %s", line)
	}
	return c
}

// next is the clients' next line.
func (c *wsClients) next(b *testing.B, within time.Duration) string {
	b.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			b.Fatal("websocket clients: the process ended")
		}
		if strings.HasPrefix(line, "error ") {
			b.Fatalf("websocket clients: %s", line)
		}
		return line
	case <-time.After(within):
		b.Fatalf("websocket clients: no answer within %s", within)
	}
	return ""
}

// expect tells the clients transition k starts at t0 and ends with the card in status.
func (c *wsClients) expect(b *testing.B, k int64, t0 time.Time, status string) {
	b.Helper()
	if _, err := fmt.Fprintf(c.in, "expect %d %d %s\n", k, t0.UnixNano(), status); err != nil {
		b.Fatal(err)
	}
	if line := c.next(b, 10*time.Second); line != "ok" {
		b.Fatalf("websocket clients: %s, want ok", line)
	}
}

// wait returns each client's delay of transition k, once all hold its card; after
// within it fails, saying how many do.
func (c *wsClients) wait(b *testing.B, k int64, clients int, within time.Duration) []time.Duration {
	b.Helper()
	var line string
	select {
	case l, ok := <-c.lines:
		if !ok {
			b.Fatal("websocket clients: the process ended")
		}
		line = l
	case <-time.After(within):
		if _, err := fmt.Fprintf(c.in, "count %d\n", k); err != nil {
			b.Fatal(err)
		}
		var n int
		for !strings.HasPrefix(line, "have ") {
			line = c.next(b, 10*time.Second)
		}
		_, _ = fmt.Sscanf(line, "have %d %d", &k, &n)
		b.Fatalf("transition %d: %d of %d websocket clients got the card within %s", k, n, clients, within)
	}
	if strings.HasPrefix(line, "error ") {
		b.Fatalf("websocket clients: %s", line)
	}
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "got" || f[1] != strconv.FormatInt(k, 10) {
		b.Fatalf("websocket clients: %q, want got %d", strings.Join(f[:min(len(f), 3)], " "), k)
	}
	out := make([]time.Duration, 0, len(f)-2)
	for _, s := range f[2:] {
		us, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out
}

// checkedFrame is a frame of transition iter a client decompressed and found to hold
// the card in its awaited state.
type checkedFrame struct {
	iter    int64
	payload []byte
}
