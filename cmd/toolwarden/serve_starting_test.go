package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// holdMigrationLock takes, on a session of its own, the migration lock of the database
// at url (golang-migrate's advisory lock, as another replica migrating holds it); the
// returned function lets go of it.
func holdMigrationLock(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var dbName, schema string
	if err := conn.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&dbName, &schema); err != nil {
		t.Fatal(err)
	}
	id, _ := database.GenerateAdvisoryLockId(dbName, schema, "schema_migrations")
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, id); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, id); err != nil {
			t.Fatal(err)
		}
	}
}

var listeningAddr = regexp.MustCompile(`msg="listening;[^"]*" addr=(\S+)`)

// waitListening waits until a launched serve logs the address it listens on (before it
// opens the database) and returns it.
func (p *serveProc) waitListening(tb testing.TB) string {
	tb.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := listeningAddr.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		select {
		case <-p.done:
			tb.Fatalf("serve exited early: %v\n%s", p.err, p.stderr.String())
		default:
		}
	}
	tb.Fatalf("serve logged no listening address:\n%s", p.stderr.String())
	return ""
}

type probeAnswer struct {
	status int
	header http.Header
	body   string
	reused bool // on a connection made before
}

func probe(t *testing.T, c *http.Client, url string) probeAnswer {
	t.Helper()
	var a probeAnswer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // a probe's timeout
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { a.reused = i.Reused }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a.status, a.header, a.body = res.StatusCode, res.Header, string(b)
	return a
}

func jsonField(t *testing.T, body, field string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%q is not a JSON object: %v", body, err)
	}
	return m[field]
}

// While serve starts (here: waiting for another process's migration, as it would wait
// for a long migration of its own), its port answers: /healthz 200 "starting" with the
// phase, /readyz 503, the rest 503 with Retry-After. Once ready, the same connection is
// served by the App: nothing to reconnect, nothing lost at the switch.
func TestServeHealthzAnswersWhileStarting(t *testing.T) {
	url := dbtest.NewURL(t)
	release := holdMigrationLock(t, url)
	p := launch(t, dbtest.TempDir(t), "--database-url", dbtest.AppURL(t, url), "--migrate-database-url", url, "--confine", "off")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", p.stderr.String())
		}
	})
	base := "http://" + p.waitListening(t)
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}

	var h probeAnswer
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h = probe(t, c, base+"/healthz")
		if h.status != http.StatusOK || jsonField(t, h.body, "status") != "starting" {
			t.Fatalf("/healthz while starting: %d %s, want 200 starting", h.status, h.body)
		}
		if jsonField(t, h.body, "phase") == "waiting for another process's migration" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz while serve waits for the migration lock: %s, want that phase", h.body)
		}
	}
	if _, ok := jsonField(t, h.body, "components").(map[string]any); !ok {
		t.Errorf("/healthz while starting: %s, want components (empty) as the App's answer has", h.body)
	}
	if r := probe(t, c, base+"/readyz"); r.status != http.StatusServiceUnavailable || jsonField(t, r.body, "status") != "starting" ||
		jsonField(t, r.body, "phase") != "waiting for another process's migration" {
		t.Errorf("/readyz while starting: %d %s, want 503 starting with the phase", r.status, r.body)
	}
	api := probe(t, c, base+"/api/v1/tools")
	if api.status != http.StatusServiceUnavailable || api.header.Get("Retry-After") == "" ||
		!strings.Contains(api.body, `"code":"unavailable"`) {
		t.Errorf("the API while starting: %d %v %s, want 503, Retry-After and the API's error shape", api.status, api.header, api.body)
	}
	page := probe(t, c, base+"/login")
	if page.status != http.StatusServiceUnavailable || page.header.Get("Retry-After") == "" || !strings.Contains(page.body, "starting") {
		t.Errorf("a page while starting: %d %v %s, want 503 with Retry-After saying it is starting", page.status, page.header, page.body)
	}
	select {
	case <-p.done:
		t.Fatalf("serve exited while waiting for the lock: %v", p.err)
	default:
	}

	release()
	p.waitReady(t)
	h = probe(t, c, base+"/healthz")
	if h.status != http.StatusOK || jsonField(t, h.body, "status") == "starting" || !h.reused {
		t.Fatalf("/healthz once ready: %d %s (on the connection made while starting: %v), want the App's answer on it", h.status, h.body, h.reused)
	}
	if comps, _ := jsonField(t, h.body, "components").(map[string]any); comps["database"] == nil {
		t.Errorf("/healthz once ready: %s, want the App's components", h.body)
	}
	if r := probe(t, c, base+"/readyz"); r.status != http.StatusOK || jsonField(t, r.body, "status") != "ok" {
		t.Errorf("/readyz once ready: %d %s, want 200 ok", r.status, r.body)
	}
}

// SIGTERM while serve waits to migrate stops it promptly and cleanly (having migrated
// nothing), the port answering meanwhile.
func TestServeStopsWhileStarting(t *testing.T) {
	url := dbtest.NewURL(t)
	holdMigrationLock(t, url)
	p := launch(t, dbtest.TempDir(t), "--database-url", dbtest.AppURL(t, url), "--migrate-database-url", url, "--confine", "off")
	base := "http://" + p.waitListening(t)
	c := &http.Client{}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h := probe(t, c, base+"/healthz")
		if jsonField(t, h.body, "phase") == "waiting for another process's migration" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz: %s, want serve waiting for the migration lock", h.body)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not stop within 15 s of SIGTERM while starting:\n%s", p.stderr.String())
	}
	if log := p.stderr.String(); !strings.Contains(log, "stopped while waiting for another process's migration") {
		t.Errorf("serve's log after SIGTERM while waiting to migrate:\n%s\nwant it to say it stopped waiting", log)
	}
}
