package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/internal/replicahop"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db"
)

// termCall calls builtin__terminal_operations through replica p's JSON API in
// conversation conv and returns its answer.
func termCall(t *testing.T, p *serveProc, token, conv string, args map[string]any) (text string, structured map[string]any, isError bool) {
	t.Helper()
	code, body := p.request(t, token, http.MethodPost, "/api/v1/tools/call",
		map[string]any{"tool": "builtin__terminal_operations", "arguments": args, "conversation_id": conv})
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structured_content"`
		IsError           bool           `json:"is_error"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("terminal_operations %v on %s: %d %s", args["operation"], p.addr, code, body)
	}
	for _, c := range out.Content {
		text += c.Text
	}
	return text, out.StructuredContent, out.IsError
}

// termSocket opens terminal id's websocket on replica p with the person's session.
func (h *person) termSocket(t *testing.T, p *serveProc, id string) *websocket.Conn {
	t.Helper()
	conn := h.dial(t, p, "/terminals/"+id+"/ws?from=0")
	var hello map[string]any
	if err := conn.ReadJSON(&hello); err != nil || hello["type"] != "hello" || hello["readOnly"] != false {
		t.Fatalf("terminal %s on %s: hello %v, err %v", id, p.addr, hello, err)
	}
	return conn
}

// termUntil reads a terminal socket's output until it contains want.
func termUntil(t *testing.T, conn *websocket.Conn, want string) string {
	t.Helper()
	var out strings.Builder
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !strings.Contains(out.String(), want) {
		kind, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("no %q on the terminal: %v\n%s", want, err, out.String())
		}
		if kind == websocket.BinaryMessage {
			out.Write(b)
		}
	}
	return out.String()
}

// TestTerminalsOnThreeReplicas: a terminal is a process of the replica that started it
// (issue #23; docs/architecture.md, Terminals on several replicas). A PTY session
// created through replica A is listed on B's /terminals with A's name; its page and
// websocket opened on B are A's (typed keys run in A's shell, in A's workspace); a
// terminal_operations send_input and get_output through C reach it; a request that
// claims to come from a replica without the key is refused. After A is SIGKILLed, its
// shell is gone, B lists the terminal as ended with its replica within seconds, its
// page says the replica stopped, and C's operations on it say so too.
func TestTerminalsOnThreeReplicas(t *testing.T) {
	rs := startReplicas(t, 3)
	a, b, c := rs.procs[0], rs.procs[1], rs.procs[2]
	token := rs.token(t)
	enableTool(t, a, token, "builtin__terminal_operations")
	// Low: the calls below run without asking (the argument rules still raise rm -rf and the like).
	if code, body := a.request(t, token, http.MethodPatch, "/api/v1/tools/"+toolID(t, a, token, "builtin__terminal_operations"),
		map[string]any{"risk": "low", "reason": "the test's own terminal"}); code != http.StatusOK {
		t.Fatalf("make terminal_operations low: %d %s", code, body)
	}
	const conv = "replica-terms"
	_, st, isErr := termCall(t, a, token, conv, map[string]any{"operation": "create_session"})
	id, _ := st["sessionId"].(string)
	if isErr || id == "" {
		t.Fatalf("create_session on A: %v", st)
	}
	admin := signIn(t, b, "admin", testAdminPassword)

	// B's list has it, with the replica that runs it.
	code, page := admin.do(t, b, http.MethodGet, "/terminals", nil)
	row := regexp.MustCompile(`(?s)<tr id="terminal-` + regexp.QuoteMeta(id) + `".*?</tr>`).Find(page)
	if code != http.StatusOK || row == nil || !strings.Contains(string(row), ">r0<") || !strings.Contains(string(row), "running") {
		t.Fatalf("/terminals on B: %d, row of %s: %s", code, id, row)
	}
	// Its page on B is A's, with A's security headers only: one CSP, naming the nonce
	// of the page's scripts (B's own beside it would block them).
	code, hdr, page := admin.get(t, b, "/terminals/"+id)
	if code != http.StatusOK || !strings.Contains(string(page), `data-ws="/terminals/`+id+`/ws"`) {
		t.Fatalf("/terminals/%s on B: %d\n%s", id, code, page)
	}
	nonce := regexp.MustCompile(`<script[^>]* nonce="([^"]+)"`).FindSubmatch(page)
	if csp := hdr.Values("Content-Security-Policy"); nonce == nil || len(csp) != 1 || !strings.Contains(csp[0], "'nonce-"+string(nonce[1])+"'") {
		t.Fatalf("/terminals/%s on B: the CSP headers %q do not allow the page's scripts (nonce %q)", id, csp, nonce)
	}

	// Typed on B's websocket, run by A's shell, echoed back through B.
	conn := admin.termSocket(t, b, id)
	if err := conn.WriteJSON(map[string]any{"type": "input", "data": "echo pid=$$ at=$PWD sum=$((6*7))\n"}); err != nil {
		t.Fatal(err)
	}
	out := termUntil(t, conn, "sum=42")
	m := regexp.MustCompile(`pid=(\d+) at=(\S+) sum=42`).FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(m[2], rs.dirs[0]) {
		t.Fatalf("the shell behind B's websocket is not A's (A's data dir %s):\n%s", rs.dirs[0], out)
	}
	shell, _ := strconv.Atoi(m[1])

	// send_input and get_output through C reach A's session.
	if text, _, isErr := termCall(t, c, token, conv, map[string]any{"operation": "send_input", "sessionId": id,
		"input": "echo via-c-$((2+3))\n"}); isErr {
		t.Fatalf("send_input through C: %s", text)
	}
	testkit.WaitFor(t, 20*time.Second, func() bool {
		_, st, isErr := termCall(t, c, token, conv, map[string]any{"operation": "get_output", "sessionId": id})
		o, _ := st["output"].(string)
		return !isErr && strings.Contains(o, "via-c-5")
	}, "get_output through C never showed what send_input through C typed")
	termUntil(t, conn, "via-c-5") // and B's viewer saw it too
	// Another conversation cannot reach it from any replica.
	if text, _, isErr := termCall(t, c, token, "someone-else", map[string]any{"operation": "get_output", "sessionId": id}); !isErr ||
		!strings.Contains(text, "no session") {
		t.Fatalf("get_output from another conversation through C: error %v, %q", isErr, text)
	}

	// A session A no longer knows (ended and forgotten there, its row kept) is no session
	// through C either, not a replica that "did not answer; try again".
	pool, err := db.NewPool(context.Background(), rs.url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
		SELECT 'forgotten-term', replica_id, replica, kind, conversation_id, dir, started_at FROM terminals WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if text, _, isErr := termCall(t, c, token, conv, map[string]any{"operation": "get_output", "sessionId": "forgotten-term"}); !isErr ||
		!strings.Contains(text, "no session") {
		t.Fatalf("get_output through C of a session A forgot: error %v, %q", isErr, text)
	}

	// Only replicas use the internal route: nobody's token, and no forged or stale hop.
	op := "/internal/v1/terminals/" + id + "/op"
	body := map[string]any{"operation": "send_input", "arguments": map[string]any{"sessionId": id, "input": "echo forged\n"},
		"call": map[string]any{"conversation_id": conv}}
	if code, raw := a.request(t, token, http.MethodPost, op, body); code != http.StatusForbidden {
		t.Fatalf("the internal route with an administrator's token: %d %s", code, raw)
	}
	for _, hop := range []string{"v1 " + strconv.FormatInt(time.Now().UnixMilli(), 10) + " r1 AAAA", "junk"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+a.addr+op, strings.NewReader(`{}`))
		req.Header.Set(replicahop.Header, hop)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("the internal route with a forged hop %q: %d", hop, res.StatusCode)
		}
	}

	// A dies.
	a.kill(t, syscall.SIGKILL)
	start := time.Now()
	testkit.WaitFor(t, 10*time.Second, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(shell))
		return os.IsNotExist(err)
	}, "A's shell outlived A")
	// B's websocket, forwarded to A, ends with A, though its browser says nothing.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("B's forwarded websocket was still open 20 s after A died")
			}
			break
		}
	}
	var row2 []byte
	testkit.WaitFor(t, 30*time.Second, func() bool {
		_, page := admin.do(t, b, http.MethodGet, "/terminals", nil)
		row2 = regexp.MustCompile(`(?s)<tr id="terminal-` + regexp.QuoteMeta(id) + `".*?</tr>`).Find(page)
		return strings.Contains(string(row2), "replica r0 stopped")
	}, "B never listed the terminal as ended with its replica")
	t.Logf("the terminal showed ended on B %v after the kill", time.Since(start).Round(time.Millisecond))
	if code, page := admin.do(t, b, http.MethodGet, "/terminals/"+id, nil); code != http.StatusGone || !strings.Contains(string(page), "replica r0, which stopped") {
		t.Fatalf("/terminals/%s on B after A died: %d\n%s", id, code, page)
	}
	if text, _, isErr := termCall(t, c, token, conv, map[string]any{"operation": "get_output", "sessionId": id}); !isErr ||
		!strings.Contains(text, "replica r0, which stopped") {
		t.Fatalf("get_output through C after A died: error %v, %q", isErr, text)
	}
}

// A terminal's whole history, read through another replica, arrives whole however
// large its JSON grows: a megabyte of bytes that are not UTF-8 (each sent as \ufffd,
// six bytes, twice: as text and as structuredContent.output) is some 12 MiB.
func TestTerminalHistoryOfBinaryThroughAnotherReplica(t *testing.T) {
	rs := startReplicas(t, 2)
	a, b := rs.procs[0], rs.procs[1]
	token := rs.token(t)
	enableTool(t, a, token, "builtin__terminal_operations")
	if code, body := a.request(t, token, http.MethodPatch, "/api/v1/tools/"+toolID(t, a, token, "builtin__terminal_operations"),
		map[string]any{"risk": "low", "reason": "the test's own terminal"}); code != http.StatusOK {
		t.Fatalf("make terminal_operations low: %d %s", code, body)
	}
	const conv = "replica-binary"
	_, st, isErr := termCall(t, a, token, conv, map[string]any{"operation": "create_session"})
	id, _ := st["sessionId"].(string)
	if isErr || id == "" {
		t.Fatalf("create_session on A: %v", st)
	}
	if text, _, isErr := termCall(t, a, token, conv, map[string]any{"operation": "send_input", "sessionId": id,
		"input": "head -c 1048576 /dev/zero | tr '\\0' '\\377'; echo; echo binary-$((6*7))-done\n"}); isErr {
		t.Fatalf("send_input on A: %s", text)
	}
	testkit.WaitFor(t, 60*time.Second, func() bool {
		_, st, isErr := termCall(t, a, token, conv, map[string]any{"operation": "get_output", "sessionId": id})
		o, _ := st["output"].(string)
		return !isErr && strings.Contains(o, "binary-42-done")
	}, "the megabyte never reached the terminal")

	text, st, isErr := termCall(t, b, token, conv, map[string]any{"operation": "get_history", "sessionId": id})
	o, _ := st["output"].(string)
	if isErr || !strings.Contains(o, "binary-42-done") || strings.Count(o, "\ufffd") < 1<<20-64<<10 {
		if len(text) > 300 {
			text = text[:300]
		}
		t.Fatalf("get_history through B: error %v, %d replacement characters, %q", isErr, strings.Count(o, "\ufffd"), text)
	}
}
