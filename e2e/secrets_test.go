package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// secretCanary starts every secret value in these tests, so one search finds any of them.
const secretCanary = "canary-7f3a9-secret"

// headerRecorder wraps an MCP handler and remembers the values of the headers it was
// asked to watch, so a test can prove the secrets really reach the upstream server.
type headerRecorder struct {
	names []string
	mu    sync.Mutex
	seen  map[string]map[string]bool // header name → values seen
}

func (h *headerRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		for _, n := range h.names {
			if v := r.Header.Get(n); v != "" {
				if h.seen[n] == nil {
					h.seen[n] = map[string]bool{}
				}
				h.seen[n][v] = true
			}
		}
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headerRecorder) saw(name, value string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[name][value]
}

// frameLog collects every websocket message a connection receives.
type frameLog struct {
	mu     sync.Mutex
	frames []string
	err    error
}

func collectFrames(conn *websocket.Conn) *frameLog {
	fl := &frameLog{}
	go func() {
		for {
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
			_, msg, err := conn.ReadMessage()
			fl.mu.Lock()
			if err != nil {
				fl.err = err
				fl.mu.Unlock()
				return
			}
			fl.frames = append(fl.frames, string(msg))
			fl.mu.Unlock()
		}
	}()
	return fl
}

// waitCursor waits until a frame carrying event id (or a later one) has arrived, and
// returns every frame so far. Events arrive in order, so all earlier ones are in too.
func (fl *frameLog) waitCursor(t *testing.T, id int64) []string {
	t.Helper()
	deadline := time.Now().Add(wsRead)
	for {
		fl.mu.Lock()
		frames, err := append([]string(nil), fl.frames...), fl.err
		fl.mu.Unlock()
		for _, f := range frames {
			for _, m := range cursorRE.FindAllStringSubmatch(f, -1) {
				if got, perr := strconv.ParseInt(m[1], 10, 64); perr == nil && got >= id {
					return frames
				}
			}
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("websocket: no frame with cursor %d after %d frames (read error: %v)", id, len(frames), err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// secAPI sends JSON API requests with a signed-in client.
type secAPI struct {
	t   *testing.T
	srv *webtest.Server
	c   *http.Client
}

func (a secAPI) do(method, path string, body any, want int) []byte {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if res.StatusCode != want {
		a.t.Fatalf("%s %s: got %d %s, want %d", method, path, res.StatusCode, out, want)
	}
	return out
}

// leakCheck collects every place checked, so a failure says where the secret showed up.
type leakCheck struct {
	t       *testing.T
	checked int
}

func (l *leakCheck) clean(where, text string) {
	l.t.Helper()
	l.checked++
	if i := strings.Index(text, secretCanary); i >= 0 {
		lo, hi := max(0, i-120), min(len(text), i+80)
		l.t.Errorf("%s: got the secret canary in %q, want no secret value", where, text[lo:hi])
	}
}

// TestSecretsNeverLeave registers servers whose header, bearer token and environment
// values are secrets, drives them through every path (test, create, connect, update,
// discover, pages, API, websocket) and checks that no secret value appears anywhere a
// person or a log reader could see it, while the sessions do use them.
func TestSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	var (
		headerVal = secretCanary + "-header"
		bearerVal = secretCanary + "-bearer"
		envVal    = secretCanary + "-env"
		extraVal  = secretCanary + "-patched-header"
		env2Val   = secretCanary + "-patched-env"
		typedVal  = secretCanary + "-typed-in-a-form"
	)
	// Started before the Toolwarden server, so it is stopped after it (cleanups run in
	// reverse): by then no session holds a stream open.
	rec := &headerRecorder{names: []string{"X-Canary", "X-Extra", "X-Typed", "Authorization"}, seen: map[string]map[string]bool{}}
	up := httptest.NewServer(rec.wrap(mcptest.New(&mcptest.Options{Name: "secret-http"}).Handler()))
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := secAPI{t: t, srv: srv, c: admin}
	lc := &leakCheck{t: t}

	ws := collectFrames(subscribe(t, srv, sessionHeader(t, srv, "admin", webtest.AdminPassword, srv.URL),
		[]string{"servers", "audit"}, maxEventID(t, srv)))

	httpBody := map[string]any{"name": "secret-http", "type": "streamable_http", "url": up.URL + "/mcp",
		"headers": map[string]string{"X-Canary": headerVal}, "auth_type": "bearer", "auth_token": bearerVal}
	cmd, args, env := mcptest.StdioCommand(&mcptest.Options{Name: "secret-stdio"}, "")
	env["API_TOKEN"] = envVal
	stdioBody := map[string]any{"name": "secret-stdio", "type": "stdio", "command": cmd, "args": args, "env": env}

	// Test before saving: it works (so the secrets were used) and says nothing secret.
	var probe struct {
		OK        bool `json:"ok"`
		ToolCount int  `json:"tool_count"`
	}
	for name, body := range map[string]map[string]any{"http": httpBody, "stdio": stdioBody} {
		raw := api.do(http.MethodPost, "/api/v1/servers/test", body, http.StatusOK)
		lc.clean("POST /api/v1/servers/test ("+name+")", string(raw))
		if err := json.Unmarshal(raw, &probe); err != nil || !probe.OK || probe.ToolCount != 5 {
			t.Fatalf("test %s: got %s, want ok with 5 tools", name, raw)
		}
	}

	var httpSrv, stdioSrv struct {
		ID string `json:"id"`
	}
	raw := api.do(http.MethodPost, "/api/v1/servers", httpBody, http.StatusCreated)
	lc.clean("POST /api/v1/servers (http)", string(raw))
	_ = json.Unmarshal(raw, &httpSrv)
	raw = api.do(http.MethodPost, "/api/v1/servers", stdioBody, http.StatusCreated)
	lc.clean("POST /api/v1/servers (stdio)", string(raw))
	_ = json.Unmarshal(raw, &stdioSrv)
	ids := map[string]string{"http": httpSrv.ID, "stdio": stdioSrv.ID}

	// waitConnected waits for each server to record, after event id since, that a session
	// is connected, and for its 5 tools; GETs it meanwhile, which must not leak either.
	// (The row's status alone is not enough after an update: it still says connected
	// until the restarted session records connecting.)
	waitConnected := func(what string, since int64) {
		t.Helper()
		for name, id := range ids {
			deadline := time.Now().Add(wsRead)
			for {
				raw := api.do(http.MethodGet, "/api/v1/servers/"+id, nil, http.StatusOK)
				lc.clean("GET /api/v1/servers/"+name, string(raw))
				var s struct {
					Status    string `json:"status"`
					ToolCount int    `json:"tool_count"`
				}
				_ = json.Unmarshal(raw, &s)
				var connects int
				if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE id > $1 AND topic = 'servers'
					AND kind = 'server.status' AND payload->>'id' = $2 AND payload->>'status' = 'connected'`, since, id).Scan(&connects); err != nil {
					t.Fatal(err)
				}
				if s.Status == registry.StatusConnected && s.ToolCount == 5 && connects > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: server %s not connected with 5 tools: %s", what, name, raw)
				}
				time.Sleep(20 * time.Millisecond) // poll interval
			}
		}
	}
	waitConnected("after create", 0)
	if !rec.saw("X-Canary", headerVal) || !rec.saw("Authorization", "Bearer "+bearerVal) {
		t.Fatal("the upstream server did not receive the secret header and bearer token")
	}

	// Update secrets of both, which reconnects them with the new values.
	beforeUpdate := maxEventID(t, srv)
	raw = api.do(http.MethodPatch, "/api/v1/servers/"+ids["http"], map[string]any{"description": "patched",
		"headers": map[string]string{"X-Extra": extraVal}}, http.StatusOK)
	lc.clean("PATCH /api/v1/servers (http)", string(raw))
	raw = api.do(http.MethodPatch, "/api/v1/servers/"+ids["stdio"], map[string]any{"env": map[string]string{"SECOND_TOKEN": env2Val}}, http.StatusOK)
	lc.clean("PATCH /api/v1/servers (stdio)", string(raw))
	waitConnected("after update", beforeUpdate)
	deadline := time.Now().Add(wsRead)
	for !rec.saw("X-Extra", extraVal) {
		if time.Now().After(deadline) {
			t.Fatal("the upstream server never received the header added by PATCH")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}

	for name, id := range ids {
		raw = api.do(http.MethodPost, "/api/v1/servers/"+id+"/discover", nil, http.StatusOK)
		lc.clean("POST discover ("+name+")", string(raw))
		raw = api.do(http.MethodPost, "/api/v1/servers/"+id+"/test", map[string]any{}, http.StatusOK)
		lc.clean("POST /api/v1/servers/:id/test ("+name+")", string(raw))
		if !strings.Contains(string(raw), `"ok":true`) {
			t.Errorf("test of the stored %s server: got %s, want ok", name, raw)
		}
		for _, p := range []string{"", "/tools", "/health"} {
			lc.clean("GET /api/v1/servers/:id"+p+" ("+name+")", string(api.do(http.MethodGet, "/api/v1/servers/"+id+p, nil, http.StatusOK)))
		}
	}
	lc.clean("GET /api/v1/servers", string(api.do(http.MethodGet, "/api/v1/servers", nil, http.StatusOK)))

	// Pages.
	pages := []string{"/", "/servers", "/servers?q=secret"}
	for _, id := range ids {
		pages = append(pages, "/servers/"+id, "/servers/"+id+"/edit")
	}
	for _, p := range pages {
		res := srv.Get(t, admin, p)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: got %d, want 200", p, res.StatusCode)
		}
		lc.clean("page "+p, string(b))
	}
	edit := srv.Get(t, admin, "/servers/"+ids["http"]+"/edit")
	b, _ := io.ReadAll(edit.Body)
	edit.Body.Close()
	if !strings.Contains(string(b), `value="X-Canary"`) || !strings.Contains(string(b), `data-testid="auth-configured"`) {
		t.Error("the edit form does not list the stored header name and the configured token")
	}

	// Forms that come back with what was typed never echo a typed secret value: a failed
	// save, a test (full page and htmx fragment).
	form := url.Values{"name": {"Bad Name"}, "type": {"streamable_http"}, "url": {up.URL + "/mcp"}, "enabled": {"true"},
		"headers_name": {"X-Typed"}, "headers_value": {typedVal}, "auth_type": {"bearer"}, "auth_token": {typedVal}}
	res := srv.PostForm(t, admin, "/servers", form)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("invalid form: got %d, want 422", res.StatusCode)
	}
	lc.clean("the invalid add form", string(b))
	form.Set("name", "typed")
	for _, hx := range []bool{false, true} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/servers/test", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if hx {
			req.Header.Set("HX-Request", "true")
		}
		res, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		// htmx: the test runs in the background; its fragment polls for the result.
		for deadline := time.Now().Add(30 * time.Second); hx && strings.Contains(string(b), `data-testid="test-running"`) && time.Now().Before(deadline); {
			lc.clean("the form test's progress", string(b))
			m := regexp.MustCompile(`hx-get="(/servers/test/runs/[A-Za-z0-9]+(?:\?replica=[0-9a-f-]+)?)"`).FindSubmatch(b)
			if m == nil {
				t.Fatalf("a running test without its progress URL: %s", b)
			}
			time.Sleep(100 * time.Millisecond)
			pr, err := admin.Get(srv.URL + string(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(pr.Body)
			pr.Body.Close()
		}
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `data-testid="test-ok"`) {
			t.Errorf("form test (htmx %v): got %d, want 200 with a successful test", hx, res.StatusCode)
		}
		lc.clean("the form test result", string(b))
	}
	if !rec.saw("X-Typed", typedVal) || !rec.saw("Authorization", "Bearer "+typedVal) {
		t.Error("the form test did not send the typed header and token upstream")
	}

	// Every websocket frame up to now, closed off by an audit event of our own.
	srv.CreateUser(t, "marker", auth.RoleGuest, "marker-password-1234")
	frames := ws.waitCursor(t, maxEventID(t, srv))
	seenCard := map[string]bool{}
	for i, f := range frames {
		lc.clean("websocket frame "+itoa(i), f)
		for name, id := range ids {
			if strings.Contains(f, "server-card-"+id) {
				seenCard[name] = true
			}
		}
	}
	if !seenCard["http"] || !seenCard["stdio"] {
		t.Errorf("websocket: got server cards for %v in %d frames, want both servers", seenCard, len(frames))
	}

	// Logs and the database.
	logs := srv.Logs.String()
	if !strings.Contains(logs, "mcpclient: connected") {
		t.Error("the log has no connection lines; is the log captured at all?")
	}
	lc.clean("the server log", logs)
	queries := map[string]string{
		"audit_log":   `SELECT a::text FROM audit_log a`,
		"events":      `SELECT e::text FROM events e`,
		"mcp_servers": `SELECT s::text FROM mcp_servers s`,
	}
	for place, q := range queries {
		rows := queryStrings(t, srv, q)
		if len(rows) == 0 {
			t.Errorf("%s: no rows; the check would pass vacuously", place)
		}
		for _, r := range rows {
			lc.clean(place, r)
		}
	}
	var stored string
	if err := srv.Pool.QueryRow(ctx, `SELECT headers::text FROM mcp_servers WHERE id = $1`, ids["http"]).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, "X-Canary") || !strings.Contains(stored, `"v1:`) {
		t.Errorf("stored headers %s: want X-Canary with a ciphertext", stored)
	}
	// Every other table too: whatever a later feature stores must not hold them either.
	for _, table := range queryStrings(t, srv, `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name)
		FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`) {
		for _, r := range queryStrings(t, srv, `SELECT t::text FROM `+table+` t`) {
			lc.clean("table "+table, r)
		}
	}

	// Meanwhile the registry does hand them to the sessions.
	hc, err := srv.Registry.Connection(ctx, ids["http"])
	if err != nil {
		t.Fatal(err)
	}
	if hc.Headers["X-Canary"] != headerVal || hc.Headers["X-Extra"] != extraVal || hc.Headers["Authorization"] != "Bearer "+bearerVal {
		t.Errorf("Connection(http): got %d headers without the stored values", len(hc.Headers))
	}
	sc, err := srv.Registry.Connection(ctx, ids["stdio"])
	if err != nil {
		t.Fatal(err)
	}
	if sc.Env["API_TOKEN"] != envVal || sc.Env["SECOND_TOKEN"] != env2Val {
		t.Errorf("Connection(stdio): got %d env values without the stored ones", len(sc.Env))
	}
	lc.clean("a Connection formatted with %v, %+v, %#v", fmt.Sprintf("%v %+v %#v %v %+v %#v", hc, hc, hc, sc, sc, sc))
	if lc.checked < 40 {
		t.Errorf("checked %d places, expected many more; the test lost its coverage", lc.checked)
	}
}

func queryStrings(t *testing.T, srv *webtest.Server, q string) []string {
	t.Helper()
	rows, err := srv.Pool.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// TestSecretsSurviveKeyRotation: a value written under one key still opens after a new
// primary key is added in front of it, new values use the new key, and a keyring without
// the key a value was written with fails without printing the value.
func TestSecretsSurviveKeyRotation(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	oldKey, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyring := func(keys ...secrets.Key) *registry.Service {
		kr, err := secrets.NewKeyring(keys...)
		if err != nil {
			t.Fatal(err)
		}
		return registry.New(pool, kr, nil)
	}
	oldHeader, token, newHeader := secretCanary+"-old-header", secretCanary+"-token", secretCanary+"-new-header"

	before := keyring(oldKey)
	sv, err := before.CreateServer(ctx, audit.System, registry.Spec{Name: "rotated", Type: registry.TypeSSE,
		URL: "http://127.0.0.1:9/sse", Headers: map[string]string{"X-Old": oldHeader}, AuthType: registry.AuthBearer,
		AuthToken: token})
	if err != nil {
		t.Fatal(err)
	}

	after := keyring(newKey, oldKey)
	conn, err := after.Connection(ctx, sv.ID)
	if err != nil {
		t.Fatalf("Connection with the rotated keyring: %v", err)
	}
	if conn.Headers["X-Old"] != oldHeader || conn.Headers["Authorization"] != "Bearer "+token {
		t.Fatalf("Connection with the rotated keyring: got %d headers without the stored values", len(conn.Headers))
	}

	// A value written now uses the new primary key; the old ones keep theirs.
	if _, err := after.UpdateServer(ctx, audit.System, sv.ID, registry.Patch{Headers: map[string]*string{"X-New": &newHeader}}); err != nil {
		t.Fatal(err)
	}
	var headers map[string]string
	if err := pool.QueryRow(ctx, `SELECT headers FROM mcp_servers WHERE id = $1`, sv.ID).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	for name, kid := range map[string]string{"X-Old": oldKey.ID, "X-New": newKey.ID} {
		if !strings.HasPrefix(headers[name], "v1:"+kid+":") {
			t.Errorf("stored %s: got %q, want a ciphertext under key %s", name, headers[name], kid)
		}
	}
	conn, err = after.Connection(ctx, sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if conn.Headers["X-Old"] != oldHeader || conn.Headers["X-New"] != newHeader || conn.Headers["Authorization"] != "Bearer "+token {
		t.Errorf("after writing under the new key: got %d headers without the stored values", len(conn.Headers))
	}

	// A keyring missing either key cannot open everything, and says so without the value.
	for name, reg := range map[string]*registry.Service{"old key only": before, "new key only": keyring(newKey)} {
		_, err := reg.Connection(ctx, sv.ID)
		if err == nil {
			t.Errorf("%s: Connection succeeded, want a decryption error", name)
			continue
		}
		if !errors.Is(err, secrets.ErrUnknownKey) && !errors.Is(err, secrets.ErrDecrypt) {
			t.Errorf("%s: got %v, want an unknown-key or decrypt error", name, err)
		}
		if strings.Contains(err.Error(), secretCanary) {
			t.Errorf("%s: the error %q contains a secret value", name, err)
		}
	}
}
