package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A count the dashboard cannot read is shown as unknown ("—"), not as 0: "Audit
// entries 0" would say the log was emptied. The tables are renamed away for one visit.
func TestDashboardUnreadableCountsAreUnknown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "dash-manager", auth.RoleToolManager, "dash-manager-password-1")
	c := srv.Login(t, "dash-manager", "dash-manager-password-1")
	counts := func() map[string]string {
		t.Helper()
		res := srv.Get(t, c, "/")
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("dashboard: %d", res.StatusCode)
		}
		doc, err := goquery.NewDocumentFromReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, id := range []string{"count-audit", "count-tokens", "count-servers"} {
			got[id] = doc.Find(`[data-testid="` + id + `"]`).Text()
		}
		return got
	}
	for id, v := range counts() {
		if v == "" || v[0] < '0' || v[0] > '9' {
			t.Fatalf("%s before: %q, want a number", id, v)
		}
	}
	owner, err := pgx.Connect(ctx, srv.App.DBURL) // the audit log's owner may rename it
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	tables := []string{"audit_log", "api_tokens", "mcp_servers"}
	for _, tb := range tables {
		if _, err := owner.Exec(ctx, `ALTER TABLE `+tb+` RENAME TO `+tb+`_away`); err != nil {
			t.Fatal(err)
		}
	}
	got := counts()
	for _, tb := range tables {
		if _, err := owner.Exec(ctx, `ALTER TABLE `+tb+`_away RENAME TO `+tb); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"count-audit", "count-tokens"} {
		if got[id] != "—" {
			t.Errorf("%s unreadable: %q, want —", id, got[id])
		}
	}
	if got["count-servers"] != "— / —" {
		t.Errorf("count-servers unreadable: %q, want — / —", got["count-servers"])
	}
}
