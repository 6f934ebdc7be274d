package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// Large results are cut before they are masked (a page shows 64 KiB of each, 1 MiB in
// all): what is shown of them to others than the requester is masked still, in the page,
// the results panel and the live fragment, and a result past the total is left out and
// says so.
func TestExecutionLargeResultsMaskedWhereShown(t *testing.T) {
	t.Parallel()
	const token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "carol", auth.RoleAuditor, "carol-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	carol := svClient{t: t, srv: srv, c: srv.Login(t, "carol", "carol-password-1")}
	var steps []map[string]any
	for range 20 {
		steps = append(steps, step("mt__echo", map[string]any{"message": "hi"}))
	}
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", plan(steps...), 201, &ex)
	waitExec(t, alice, ex.ID, "success")
	// Results of 200 KiB, stored as a run would: the first with the token near its start
	// and where its shown part ends, in prose and named by a key in JSON as text.
	filler := strings.Repeat("ordinary words of a long log line\n", 6000)
	first, _ := json.Marshal(map[string]any{"content": []map[string]any{
		{"type": "text", "text": "auth failed for " + token + " " + strings.Repeat("x", 64<<10-40) + " " + token + " " + filler},
		{"type": "text", "text": `{"password":"hunter2hunter2","rows":"` + filler[:100<<10] + `"}`}}, "is_error": false})
	rest := benchTextResult(200 << 10)
	ctx := context.Background()
	if _, err := srv.Pool.Exec(ctx, `UPDATE tool_calls SET result = CASE WHEN position = 0 THEN $2::jsonb ELSE $3::jsonb END
		WHERE execution_id = $1`, ex.ID, string(first), rest); err != nil {
		t.Fatal(err)
	}

	check := func(what, html string, sees bool) {
		t.Helper()
		if strings.Contains(html, token[:12]) != sees || strings.Contains(html, "hunter2hunter2") {
			t.Errorf("%s: the token shown %v, want %v (or the password shown)", what, !sees, sees)
		}
		if !strings.Contains(html, "This result is shortened:") || !strings.Contains(html, "too large to show here") {
			t.Errorf("%s: no result says it is shortened, or none that it is left out", what)
		}
	}
	check("carol's results", pageHTML(t, carol, "/executions/"+ex.ID+"/results"), false)
	check("carol's page", pageHTML(t, carol, "/executions/"+ex.ID), false)
	check("alice's results", pageHTML(t, alice, "/executions/"+ex.ID+"/results"), true)

	var evID int64
	if err := srv.Pool.QueryRow(ctx, `SELECT max(id) FROM events WHERE topic = $1 AND kind = 'execution.success'`,
		"execution:"+ex.ID).Scan(&evID); err != nil {
		t.Fatal(err)
	}
	evs, err := srv.Bus.Since(ctx, evID-1, []string{"execution:" + ex.ID}, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("the success event: %v (%d)", err, len(evs))
	}
	raw, err := srv.Web.RenderLive(ctx, evs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Rendered once for every viewer, it has each page ask for the results masked.
	if strings.Contains(string(raw), token[:12]) || !strings.Contains(string(raw), `data-testid="results-loader"`) {
		t.Errorf("the live fragment shows the token, or does not have the page ask for the results: %.300s", raw)
	}
}

// An execution's results are read one at a time, the page's only as far as they are
// shown: forty results of 1 MiB (a message's cap is 16 MiB, a plan's steps up to 50)
// were all held at once by each GET of the execution, its page or the API, and by every
// event that renders it again.
func TestExecutionResultsReadOneAtATime(t *testing.T) {
	// Not parallel: the heap is the process's.
	const steps, size = 40, 1 << 20
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	var list []map[string]any
	for range steps {
		list = append(list, step("mt__echo", map[string]any{"message": "hi"}))
	}
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", plan(list...), 201, &ex)
	waitExec(t, alice, ex.ID, "success")
	if _, err := srv.Pool.Exec(context.Background(), `UPDATE tool_calls SET result = $2::jsonb WHERE execution_id = $1`,
		ex.ID, benchTextResult(size)); err != nil {
		t.Fatal(err)
	}

	// The heap's growth while it answers, garbage collected early (GOGC 10) so that
	// what is counted is what is held.
	peak := func(get func()) (grew uint64) {
		defer debug.SetGCPercent(debug.SetGCPercent(10))
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base, top := ms.HeapAlloc, ms.HeapAlloc
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				top = max(top, ms.HeapAlloc)
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		// Stopped however get ends (a t.Fatal in it too): it stops the world each time.
		defer func() {
			close(stop)
			<-done
			grew = top - base
		}()
		get()
		return 0
	}
	// Read as it comes: the client is in this process too. Its last bytes are kept.
	fetch := func(path string) (n int64, tail string) {
		res := srv.Get(t, alice.c, path)
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		buf := make([]byte, 32<<10)
		for {
			k, err := res.Body.Read(buf)
			n += int64(k)
			if tail += string(buf[max(0, k-16):k]); len(tail) > 16 {
				tail = tail[len(tail)-16:]
			}
			if err == io.EOF {
				return n, tail
			}
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
	}
	var n int64
	var tail string
	if grew := peak(func() { n, tail = fetch("/api/v1/executions/" + ex.ID) }); grew > steps*size/2 {
		t.Errorf("the API's answer grew the heap by %d MiB, for results of %d MiB in all", grew>>20, steps*size>>20)
	} else {
		t.Logf("the API's answer grew the heap by %d MiB", grew>>20)
	}
	// Every result whole, to the end of the answer (the shape's own tests are apart:
	// decoding this much takes a minute with the race detector).
	if n < steps*size || !strings.HasSuffix(tail, "}]}\n") {
		t.Errorf("the API's answer has %d bytes ending %q, want every result whole (%d steps of %d) and the answer's end", n, tail, steps, size)
	}
	for _, page := range []string{"/executions/" + ex.ID, "/executions/" + ex.ID + "/results"} {
		if grew := peak(func() { fetch(page) }); grew > steps*size/2 {
			t.Errorf("%s grew the heap by %d MiB, for results of %d MiB in all", page, grew>>20, steps*size>>20)
		} else {
			t.Logf("%s grew the heap by %d MiB", page, grew>>20)
		}
	}

}

// An execution's answer whose client goes after its first bytes is broken off, and its
// request is still in the access log (as aborted) and the request metrics: the abort
// skipped both.
func TestExecutionAnswerCutOffIsLogged(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	var list []map[string]any
	for range 20 {
		list = append(list, step("mt__echo", map[string]any{"message": "hi"}))
	}
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", plan(list...), 201, &ex)
	waitExec(t, alice, ex.ID, "success")
	// 20 MiB of results: far more than the sockets' buffers hold.
	if _, err := srv.Pool.Exec(context.Background(), `UPDATE tool_calls SET result = $2::jsonb WHERE execution_id = $1`,
		ex.ID, benchTextResult(1<<20)); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /api/v1/executions/%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", ex.ID, u.Host, srv.Token(t, "alice"))
	if status, err := bufio.NewReaderSize(conn, 256).ReadString('\n'); err != nil || !strings.Contains(status, "200") {
		t.Fatalf("the execution's status: %q, %v", status, err)
	}
	conn.Close()
	path := "/api/v1/executions/" + ex.ID
	webtest.WaitFor(t, 60*time.Second, func() bool {
		for _, line := range strings.Split(srv.Logs.String(), "\n") {
			if strings.Contains(line, "msg=http ") && strings.Contains(line, " path="+path+" ") && strings.Contains(line, " aborted=true") {
				return true
			}
		}
		return false
	}, "the cut-off answer has no access line saying it was aborted")
}
