package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit/audittest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A person runs one export at a time: a second, by their session or another of their
// tokens, is answered 429 with Retry-After and is not recorded as an export, while
// another person's runs; once the first has ended they may export again.
func TestAuditExportOnePerPerson(t *testing.T) {
	t.Parallel()
	// Long enough that the stalled export below is not cut off during the test.
	srv := webtest.Start(t, &webtest.Options{DownloadStall: 10 * time.Minute})
	ctx := context.Background()
	if err := audittest.LoadLarge(ctx, srv.Pool); err != nil {
		t.Fatal(err)
	}
	const password = "correct horse battery staple"
	srv.CreateUser(t, "audra", auth.RoleAuditor, password)
	srv.CreateUser(t, "aubrey", auth.RoleAuditor, password)

	// audra's first export, whose client reads the status line and then nothing more.
	conn := stalledExport(t, srv, srv.Token(t, "audra"))

	export := func(c *http.Client, token string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/audit/export?format=jsonl", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(body)
	}
	refusedAsBusy := func(who string, res *http.Response, body string) {
		t.Helper()
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" ||
			!strings.Contains(body, "an export of yours is already running") || res.Header.Get("Content-Disposition") != "" {
			t.Fatalf("%s: HTTP %d, Retry-After %q, Content-Disposition %q, body %.200s; want 429 with Retry-After saying an export of theirs runs",
				who, res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Content-Disposition"), body)
		}
	}
	res, body := export(srv.Client(t), srv.Token(t, "audra"))
	refusedAsBusy("audra's second export, by another token", res, body)
	res, body = export(srv.Login(t, "audra", password), "")
	refusedAsBusy("audra's second export, signed in", res, body)

	res, body = export(srv.Client(t), srv.Token(t, "aubrey"))
	if res.StatusCode != http.StatusOK || strings.Count(body, "\n") < 48 {
		t.Fatalf("aubrey's export: HTTP %d, %d lines; want 200 with every entry", res.StatusCode, strings.Count(body, "\n"))
	}
	var started int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'audit.export' AND actor_name = 'audra'`).Scan(&started); err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Fatalf("%d audit.export entries by audra; want 1: a refused export is not recorded as one", started)
	}

	// The first export ends with its client; then she may export again.
	conn.Close()
	token := srv.Token(t, "audra")
	webtest.WaitFor(t, 60*time.Second, func() bool {
		res, _ := export(srv.Client(t), token)
		return res.StatusCode == http.StatusOK
	}, "audra could not export again after her first export's client went away")
}
