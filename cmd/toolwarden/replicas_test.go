package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// replicaSet is several `serve` processes on one database, as docs/deploy.md sets them up.
type replicaSet struct {
	url, appURL, keyFile string
	procs                []*serveProc
	dirs                 []string
}

// startReplicas starts n replicas at once on an empty database (they migrate it
// together): each its own data dir, all the same database and secret key file, which
// the first start writes.
func startReplicas(t *testing.T, n int) *replicaSet {
	t.Helper()
	url := dbtest.NewEmpty(t)
	rs := &replicaSet{url: url, appURL: dbtest.AppURL(t, url), keyFile: filepath.Join(dbtest.TempDir(t), "secret.key")}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := os.WriteFile(rs.keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rs.launch(t, i)
	}
	for _, p := range rs.procs {
		p.waitReady(t)
	}
	return rs
}

// start starts replica i again (after it was killed) and waits until it is ready.
func (rs *replicaSet) start(t *testing.T, i int) *serveProc {
	t.Helper()
	p := rs.launch(t, i)
	p.waitReady(t)
	return p
}

// launch starts replica i without waiting.
func (rs *replicaSet) launch(t *testing.T, i int) *serveProc {
	t.Helper()
	for len(rs.dirs) <= i {
		rs.dirs = append(rs.dirs, dbtest.TempDir(t))
		rs.procs = append(rs.procs, nil)
	}
	// Its terminals' login shells read a home of their own, not the host's login files
	// (a pyenv rehash there waits a minute on the lock a shell killed in it leaves).
	env := append(os.Environ(), asToolwardenEnv+"=1", "HOME="+filepath.Join(rs.dirs[i], "home"))
	p := launchEnv(t, env, rs.dirs[i], "--database-url", rs.appURL, "--migrate-database-url", rs.url,
		"--secret-key-file", rs.keyFile, "--confine", "off", "--replica-name", "r"+strconv.Itoa(i))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica r%d's log:\n%s", i, p.stderr.String())
		}
	})
	rs.procs[i] = p
	return p
}

// token creates an API token for admin.
func (rs *replicaSet) token(t *testing.T) string {
	t.Helper()
	stdout, stderr, err := runCmd(t, "", "token", "create", "--database-url", rs.url, "--data-dir", rs.dirs[0],
		"--user", "admin", "--name", "replicas")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	return lines[len(lines)-1]
}

// person is a signed-in browser session: one cookie, valid on every replica.
type person struct {
	c *http.Client
}

func signIn(t *testing.T, p *serveProc, username, password string) *person {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"username": {username}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+p.addr)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in on %s: got %d", p.addr, res.StatusCode)
	}
	return &person{c: c}
}

// do makes a same-origin request on replica p with the person's session.
func (h *person) do(t *testing.T, p *serveProc, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+p.addr+path, rd)
	req.Header.Set("Origin", "http://"+p.addr)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := h.c.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// hx is a same-origin request of the page's script (htmx) on replica p with the
// person's session: a form posted, or (form nil) a GET.
func (h *person) hx(t *testing.T, p *serveProc, method, path string, form url.Values) (int, string) {
	t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, "http://"+p.addr+path, rd)
	req.Header.Set("Origin", "http://"+p.addr)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("HX-Request", "true")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// get is a same-origin GET on replica p with the person's session, with the answer's headers.
func (h *person) get(t *testing.T, p *serveProc, path string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

type execView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
	Runner string `json:"runner"`
	Steps  []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"steps"`
}

// hxURL is the first address in an attribute attr of an htmx fragment that contains has.
func hxURL(frag, attr, has string) string {
	for _, m := range regexp.MustCompile(attr+`="([^"]+)"`).FindAllStringSubmatch(frag, -1) {
		if u := html.UnescapeString(m[1]); strings.Contains(u, has) {
			return u
		}
	}
	return ""
}

// byName is the replica called name.
func (rs *replicaSet) byName(t *testing.T, name string) *serveProc {
	t.Helper()
	i, err := strconv.Atoi(strings.TrimPrefix(name, "r"))
	if err != nil || i < 0 || i >= len(rs.procs) {
		t.Fatalf("no replica %q", name)
	}
	return rs.procs[i]
}

// restart starts a killed replica again on its data dir.
func (rs *replicaSet) restart(t *testing.T, p *serveProc) {
	t.Helper()
	for i, q := range rs.procs {
		if q == p {
			rs.start(t, i)
			return
		}
	}
	t.Fatal("not a replica of this set")
}

// dial opens the websocket at path on replica p with the person's session, as a page
// of that replica would; it is closed when the test ends.
func (h *person) dial(t *testing.T, p *serveProc, path string) *websocket.Conn {
	t.Helper()
	u, _ := url.Parse("http://" + p.addr)
	var parts []string
	for _, ck := range h.c.Jar.Cookies(u) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	hd := http.Header{}
	hd.Set("Cookie", strings.Join(parts, "; "))
	hd.Set("Origin", "http://"+p.addr)
	conn, res, err := websocket.DefaultDialer.Dial("ws://"+p.addr+path, hd)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial %s on %s: %v (HTTP %d)", path, p.addr, err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// ws opens /ws on replica p with the person's session, following topics from now on.
func (h *person) ws(t *testing.T, p *serveProc, topics []string) *websocket.Conn {
	t.Helper()
	conn := h.dial(t, p, "/ws")
	// From the newest event a page of that replica shows: only what happens next counts.
	_, page := h.do(t, p, http.MethodGet, "/executions", nil)
	m := regexp.MustCompile(`id="ws-cursor" data-last-event-id="(\d+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no websocket cursor on /executions of %s", p.addr)
	}
	last, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if err := conn.WriteJSON(map[string]any{"subscribe": topics, "last_id": last}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// wsUntil reads the socket until a message contains want.
func wsUntil(t *testing.T, conn *websocket.Conn, what, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if strings.Contains(string(msg), want) {
			return
		}
	}
}

// toolID is the id of the tool called qualified.
func toolID(t *testing.T, p *serveProc, token, qualified string) string {
	t.Helper()
	server, _, _ := strings.Cut(qualified, "__")
	code, body := p.request(t, token, http.MethodGet, "/api/v1/tools?limit=100&server="+server, nil)
	var out struct {
		Tools []struct {
			ID            string `json:"id"`
			QualifiedName string `json:"qualified_name"`
		} `json:"tools"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("list tools: %d %s", code, body)
	}
	for _, tl := range out.Tools {
		if tl.QualifiedName == qualified {
			return tl.ID
		}
	}
	t.Fatalf("no tool %s", qualified)
	return ""
}

// createPlan asks replica p (with the token) for a plan of one step.
func createPlan(t *testing.T, p *serveProc, token, tool string, args map[string]any) execView {
	t.Helper()
	code, body := p.request(t, token, http.MethodPost, "/api/v1/executions",
		map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": tool, "arguments": args}}}})
	var ex execView
	if code != http.StatusCreated || json.Unmarshal(body, &ex) != nil {
		t.Fatalf("create a plan of %s: %d %s", tool, code, body)
	}
	return ex
}

func getExecution(t *testing.T, p *serveProc, token, id string) execView {
	t.Helper()
	code, body := p.request(t, token, http.MethodGet, "/api/v1/executions/"+id, nil)
	var ex execView
	if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
		t.Fatalf("get execution %s: %d %s", id, code, body)
	}
	return ex
}

// waitExecution waits until execution id has status on replica p.
func waitExecution(t *testing.T, p *serveProc, token, id, status string) execView {
	t.Helper()
	var ex execView
	testkit.WaitFor(t, 60*time.Second, func() bool {
		ex = getExecution(t, p, token, id)
		return ex.Status == status
	}, "execution never reached "+status)
	return ex
}

// waitPending returns the id of the execution awaiting approval whose step's arguments
// contain marker.
func waitPending(t *testing.T, p *serveProc, token, marker string) string {
	t.Helper()
	var id string
	testkit.WaitFor(t, 30*time.Second, func() bool {
		code, body := p.request(t, token, http.MethodGet, "/api/v1/approvals", nil)
		var out struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &out) != nil {
			return false
		}
		for _, it := range out.Items {
			if _, raw := p.request(t, token, http.MethodGet, "/api/v1/executions/"+it.ID, nil); strings.Contains(string(raw), marker) {
				id = it.ID
			}
		}
		return id != ""
	}, "the held call never showed among the approvals")
	return id
}

// mcpConnect connects the go-sdk client to endpoint with the token, on protocol era.
func mcpConnect(t *testing.T, endpoint, token, era string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "replicas-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: bearerTransport(token)}}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect to %s on %s: %v", endpoint, era, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// balancer is a load balancer with no affinity: each request goes to the next replica.
type balancer struct {
	*httptest.Server
	mu   sync.Mutex
	used map[string]bool
}

func roundRobin(t *testing.T, procs []*serveProc) *balancer {
	t.Helper()
	lb := &balancer{used: map[string]bool{}}
	var n atomic.Int64
	proxy := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		p := procs[int(n.Add(1))%len(procs)]
		lb.mu.Lock()
		lb.used[p.addr] = true
		lb.mu.Unlock()
		r.SetURL(&url.URL{Scheme: "http", Host: p.addr})
	}}
	lb.Server = httptest.NewServer(proxy)
	t.Cleanup(lb.Close)
	return lb
}

func (lb *balancer) backends() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return len(lb.used)
}

// TestThreeReplicas runs three replicas on one database (issue #23): a page and a
// websocket on one show what another did; an approval on one releases a plan another
// was asked for and another than the approver runs; a replica SIGKILLed in the middle
// of a step (held until it dies) leaves the
// step interrupted and the plan failed, settled by a survivor within seconds; a call
// held on /mcp of one replica is released by an approval on another; a tool disabled
// through one replica sends list_changed to MCP clients of all three; and a stateless
// MCP client whose requests go round-robin over all three works with no affinity. The
// three start together on an empty database and migrate it together.
func TestThreeReplicas(t *testing.T) {
	up := mcptest.StartHTTP(t, &mcptest.Options{Name: "up"})
	held := addHoldTool(t, up)
	rs := startReplicas(t, 3)
	a, b, c := rs.procs[0], rs.procs[1], rs.procs[2]
	token := rs.token(t)

	// The longest call timeout: a held step ends by the kill, not by the timeout.
	code, body := a.request(t, token, http.MethodPost, "/api/v1/servers", map[string]any{"name": "up", "type": "streamable_http",
		"url": up.URL(), "enabled": true, "timeout_ms": 600_000})
	if code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	enableTool(t, a, token, "builtin__think")
	for _, tool := range []string{"up__echo", "up__sleep", "up__hold"} {
		enableTool(t, b, token, tool)
		// MEDIUM: every plan and /mcp call of it waits for a person.
		if code, body := c.request(t, token, http.MethodPatch, "/api/v1/tools/"+toolID(t, c, token, tool),
			map[string]any{"risk": "medium", "reason": "needs a person"}); code != http.StatusOK {
			t.Fatalf("make %s medium: %d %s", tool, code, body)
		}
	}
	admin := signIn(t, a, "admin", testAdminPassword)
	top := t

	t.Run("pages and websocket events cross replicas", func(t *testing.T) {
		// A page of one replica shows a server another registered.
		if code, page := admin.do(t, c, http.MethodGet, "/servers", nil); code != http.StatusOK || !strings.Contains(string(page), up.URL()) {
			t.Fatalf("/servers on the third replica: %d, the server registered on the first is missing", code)
		}
		// The dashboard lists the replicas on the database.
		testkit.WaitFor(t, 15*time.Second, func() bool {
			_, page := admin.do(t, b, http.MethodGet, "/", nil)
			return strings.Count(string(page), `data-testid="replica-row"`) == 3 &&
				strings.Contains(string(page), `data-testid="replica-self">r1<`)
		}, "the dashboard of the second replica does not list the three replicas")
		conn := admin.ws(t, c, []string{"executions"})
		ex := createPlan(t, a, token, "up__echo", map[string]any{"message": "seen elsewhere"})
		wsUntil(t, conn, "the plan asked on the first replica, on the third's websocket", ex.ID)
	})

	t.Run("an approval on another replica", func(t *testing.T) {
		// River gives a released plan to whichever replica fetches it first, its approver
		// included, so plans are asked and approved on the replicas in turn until one runs
		// on another replica than its approver's. An approval that released plans only on
		// its own replica never gets there.
		var ex, got execView
		var asked, approver *serveProc
		for i := range 12 {
			asked, approver = rs.procs[(i+2)%3], rs.procs[(i+1)%3]
			ex = createPlan(t, asked, token, "up__echo", map[string]any{"message": "approved elsewhere " + strconv.Itoa(i)})
			if code, body := admin.do(t, approver, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}); code != http.StatusOK {
				t.Fatalf("confirm on %s: %d %s", rs.name(t, approver), code, body)
			}
			got = waitExecution(t, asked, token, ex.ID, "success")
			if got.Runner == "" {
				_, raw := asked.request(t, token, http.MethodGet, "/api/v1/executions/"+ex.ID, nil)
				t.Fatalf("the execution does not say which replica ran it: %s", raw)
			}
			if got.Runner != rs.name(t, approver) {
				break
			}
			t.Logf("plan %d, approved on %s, ran there too", i, got.Runner)
		}
		if got.Runner == rs.name(t, approver) {
			t.Fatalf("12 plans each ran on the replica that approved it (the last on %s): no approval released a plan on another replica", got.Runner)
		}
		t.Logf("asked on %s, approved on %s, ran on %s", rs.name(t, asked), rs.name(t, approver), got.Runner)
		// The page of the replica that neither approved nor ran it says where it ran.
		var third *serveProc
		for _, p := range rs.procs {
			if p != approver && rs.name(t, p) != got.Runner {
				third = p
			}
		}
		if _, page := admin.do(t, third, http.MethodGet, "/executions/"+ex.ID, nil); !strings.Contains(string(page), `data-testid="execution-runner">on `+got.Runner+`<`) {
			t.Fatalf("the execution's page on %s does not say it ran on %s", rs.name(t, third), got.Runner)
		}
	})

	t.Run("test runs followed on other replicas", func(t *testing.T) {
		// A test panel's run goes on on the replica its Run reached; its polls and its
		// Cancel, whichever replica they reach, are answered by that one.
		sleep := toolID(t, b, token, "up__sleep")
		code, frag := admin.hx(t, b, http.MethodPost, "/tools/"+sleep+"/test",
			url.Values{"mode": {"form"}, "_action": {"run"}, "arg/ms": {"30000"}, "confirm": {"1"}})
		poll, cancel := hxURL(frag, "hx-get", "/runs/"), hxURL(frag, "hx-post", "/cancel")
		if code != http.StatusOK || !strings.Contains(poll, "replica=") || cancel == "" {
			t.Fatalf("run on the second replica: %d, want a running panel whose poll and Cancel name the replica: %s", code, frag)
		}
		// A page's socket on another replica follows the run live, through the replica
		// that holds it.
		m := regexp.MustCompile(`data-live-topic="([^"]+)"`).FindStringSubmatch(frag)
		if m == nil || !strings.Contains(m[1], "@") {
			t.Fatalf("the running panel's topic does not name the replica: %s", frag)
		}
		conn := admin.ws(t, c, []string{html.UnescapeString(m[1])})
		defer conn.Close()
		for _, p := range []*serveProc{a, c, b} {
			if code, got := admin.hx(t, p, http.MethodGet, poll, nil); code != http.StatusOK || !strings.Contains(got, `data-testid="test-running"`) {
				t.Fatalf("the run's poll on %s: %d, want it running: %s", p.addr, code, got)
			}
		}
		// The workspace rendered again by another replica (a mode switch) keeps the
		// running panel, which asks the replica that runs it.
		pu, _ := url.Parse(poll)
		code, got := admin.hx(t, c, http.MethodPost, "/tools/"+sleep+"/test", url.Values{"mode": {"form"}, "_action": {"mode:json"},
			"arg/ms": {"30000"}, "_run": {path.Base(pu.Path)}, "_run_replica": {pu.Query().Get("replica")}})
		if code != http.StatusOK || hxURL(got, "hx-get", "/runs/") != poll {
			t.Fatalf("a mode switch on the third replica while the run goes on: %d, want its running panel asking %s: %s", code, poll, got)
		}
		code, got = admin.hx(t, c, http.MethodPost, cancel, url.Values{})
		if code != http.StatusOK || !strings.Contains(got, `data-status="cancelled"`) {
			t.Fatalf("Cancel on the third replica: %d, want the run cancelled: %s", code, got)
		}
		wsUntil(t, conn, "the run's result on a socket of the third replica", `data-status="cancelled"`)

		// A connection test's progress, asked of another replica, comes from the one
		// that runs it.
		code, frag = admin.hx(t, a, http.MethodPost, "/servers/test", url.Values{"name": {"probe"}, "type": {"streamable_http"},
			"url": {up.URL()}, "auth_type": {"none"}, "timeout_ms": {"5000"}, "retries": {"0"}, "health_interval_ms": {"30000"}})
		poll = hxURL(frag, "hx-get", "/servers/test/runs/")
		if code != http.StatusOK || !strings.Contains(poll, "replica=") {
			t.Fatalf("test a connection on the first replica: %d, want a running test whose poll names the replica: %s", code, frag)
		}
		testkit.WaitFor(t, 15*time.Second, func() bool {
			_, got = admin.hx(t, c, http.MethodGet, poll, nil)
			return !strings.Contains(got, `data-testid="test-running"`)
		}, "the connection test never ended")
		if !strings.Contains(got, `data-testid="test-ok"`) {
			t.Fatalf("the connection test asked of the third replica: want its result, got %s", got)
		}
	})

	t.Run("a replica killed mid-step", func(t *testing.T) {
		// A step of hold goes on until its replica dies: the kill always lands mid-step.
		ex := createPlan(t, a, token, "up__hold", map[string]any{})
		if code, body := admin.do(t, a, http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{}); code != http.StatusOK {
			t.Fatalf("confirm: %d %s", code, body)
		}
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("the step's call never reached the upstream")
		}
		var running execView
		testkit.WaitFor(t, 30*time.Second, func() bool {
			running = getExecution(t, a, token, ex.ID)
			return len(running.Steps) == 1 && running.Steps[0].Status == "running" && running.Runner != ""
		}, "the step never started")
		victim := rs.byName(t, running.Runner)
		var survivor *serveProc
		for _, p := range rs.procs {
			if p != victim {
				survivor = p
			}
		}
		// A test run the victim holds, followed by a socket of a survivor: once the
		// victim is gone, the socket says it no longer follows the run, so the page asks
		// (and is told the run is over).
		_, frag := admin.hx(t, victim, http.MethodPost, "/tools/"+toolID(t, victim, token, "up__sleep")+"/test",
			url.Values{"mode": {"form"}, "_action": {"run"}, "arg/ms": {"30000"}, "confirm": {"1"}})
		m := regexp.MustCompile(`data-live-topic="([^"]+)"`).FindStringSubmatch(frag)
		if m == nil {
			t.Fatalf("no running panel for a test run on %s: %s", victim.addr, frag)
		}
		conn := admin.ws(t, survivor, []string{html.UnescapeString(m[1]), "executions"})
		defer conn.Close()
		// The socket follows the run once it carries what came after its subscription.
		marker := createPlan(t, survivor, token, "up__echo", map[string]any{"message": "subscribed"})
		wsUntil(t, conn, "a plan asked after the survivor's socket subscribed", marker.ID)
		if now := getExecution(t, survivor, token, ex.ID); now.Status != "executing" || now.Steps[0].Status != "running" {
			t.Fatalf("before the kill: execution %s, step %s; want the step still running", now.Status, now.Steps[0].Status)
		}
		victim.kill(t, syscall.SIGKILL)
		wsUntil(t, conn, "the survivor's socket giving up a run its dead replica held", `id="ws-refused"`)
		// Within seconds, not after River's rescue (minutes): the survivors' sweep.
		start := time.Now()
		got := waitExecution(t, survivor, token, ex.ID, "failed")
		if got.Steps[0].Status != "interrupted" || !strings.Contains(got.Error, running.Runner) {
			t.Fatalf("after the kill: step %s, error %q; want interrupted, naming replica %s", got.Steps[0].Status, got.Error, running.Runner)
		}
		t.Logf("settled %v after the kill", time.Since(start).Round(time.Millisecond))
		// Started again by the whole test (a subtest's cleanup would stop it).
		rs.restart(top, victim)
		a, b, c = rs.procs[0], rs.procs[1], rs.procs[2]
	})

	t.Run("a held /mcp call released from another replica", func(t *testing.T) {
		for _, era := range []string{"2025-11-25", "2026-07-28"} {
			cs := mcpConnect(t, "http://"+a.addr+"/mcp", token, era)
			done := make(chan *mcp.CallToolResult, 1)
			errc := make(chan error, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up__echo",
					Arguments: map[string]any{"message": "held on " + era}})
				if err != nil {
					errc <- err
					return
				}
				done <- res
			}()
			id := waitPending(t, c, token, "held on "+era)
			if code, body := admin.do(t, c, http.MethodPost, "/api/v1/executions/"+id+"/confirm", map[string]any{}); code != http.StatusOK {
				t.Fatalf("%s: confirm on the third replica: %d %s", era, code, body)
			}
			select {
			case res := <-done:
				if res.IsError || !strings.Contains(textOf(res), "Echo: held on "+era) {
					t.Fatalf("%s: the held call answered %q (error %v)", era, textOf(res), res.IsError)
				}
			case err := <-errc:
				t.Fatalf("%s: the held call failed: %v", era, err)
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: the held call was not released by the approval on another replica", era)
			}
		}
	})

	t.Run("list_changed reaches MCP clients on every replica", func(t *testing.T) {
		changed := make([]chan struct{}, len(rs.procs))
		sessions := make([]*mcp.ClientSession, len(rs.procs))
		for i, p := range rs.procs {
			ch := make(chan struct{}, 8)
			changed[i] = ch
			c := mcp.NewClient(&mcp.Implementation{Name: "replicas-test", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} }})
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + p.addr + "/mcp",
				HTTPClient: &http.Client{Transport: bearerTransport(token)}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			sessions[i] = cs
		}
		// A tool disabled through one replica leaves every replica's clients' lists.
		if code, body := a.request(t, token, http.MethodPost, "/api/v1/tools/"+toolID(t, a, token, "builtin__think")+"/disable",
			map[string]any{}); code != http.StatusOK {
			t.Fatalf("disable: %d %s", code, body)
		}
		for i, ch := range changed {
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Fatalf("the client on replica r%d heard no list_changed", i)
			}
			// And what it lists then is without the tool.
			testkit.WaitFor(t, 10*time.Second, func() bool {
				res, err := sessions[i].ListTools(context.Background(), nil)
				if err != nil {
					return false
				}
				for _, tl := range res.Tools {
					if tl.Name == "builtin__think" {
						return false
					}
				}
				return true
			}, "the client on a replica still lists the disabled tool")
		}
		if code, body := b.request(t, token, http.MethodPost, "/api/v1/tools/"+toolID(t, b, token, "builtin__think")+"/enable",
			map[string]any{}); code != http.StatusOK {
			t.Fatalf("enable again: %d %s", code, body)
		}
	})

	t.Run("stateless MCP round-robin over the replicas", func(t *testing.T) {
		lb := roundRobin(t, rs.procs)
		cs := mcpConnect(t, lb.URL+"/mcp", token, "2026-07-28")
		for i := range 6 {
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil || len(res.Tools) == 0 {
				t.Fatalf("list %d through the balancer: %v", i, err)
			}
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "builtin__think",
				Arguments: map[string]any{"thought": "round " + strconv.Itoa(i)}}); err != nil {
				t.Fatalf("call %d through the balancer: %v", i, err)
			}
		}
		if n := lb.backends(); n != 3 {
			t.Fatalf("the balancer used %d replicas, want all 3", n)
		}
	})
}
