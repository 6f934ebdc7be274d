package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/router"
)

// A built-in tool's Logs tab shows other people's calls (their commands, output, notes,
// files) only to those who may read the audit log, as /terminals does: a tool manager
// sees their own calls there, an auditor and an administrator everyone's. An upstream
// tool's Logs tab shows a tool manager every call, as before.
func TestBuiltinToolLogsShowOthersCallsToAuditors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	const pw = "logs-password-123"
	admin := srv.CreateUser(t, "ada", auth.RoleAdmin, pw)
	mgr := srv.CreateUser(t, "mona", auth.RoleToolManager, pw)
	srv.CreateUser(t, "audrey", auth.RoleAuditor, pw)
	think := srv.App.Enable(t, "builtin__think")
	srv.LiveServer(t, "up", true, "echo")
	echo := srv.ToolID(t, "up__echo")

	call := func(u auth.User, role auth.Role, tool, args string) {
		t.Helper()
		res, err := srv.Router.Call(ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args),
			Actor: audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}, Role: role,
			Source: router.SourceAPI, ConversationID: "conv-" + u.Username})
		if err != nil || res.IsError {
			t.Fatalf("%s calls %s: %v %+v", u.Username, tool, err, res)
		}
	}
	call(admin, auth.RoleAdmin, "builtin__think", `{"thought":"admins-private-thought"}`)
	call(mgr, auth.RoleToolManager, "builtin__think", `{"thought":"managers-own-thought"}`)
	call(admin, auth.RoleAdmin, "up__echo", `{"message":"admins-echo"}`)
	call(mgr, auth.RoleToolManager, "up__echo", `{"message":"managers-echo"}`)
	webtest.WaitFor(t, 10*time.Second, func() bool {
		return testkit.Count(t, srv.Pool, `SELECT count(*) FROM tool_usage_logs`) == 4
	}, "the four calls recorded")

	logs := func(c *http.Client, id string) []string {
		t.Helper()
		res := srv.Get(t, c, "/tools/"+id+"?tab=logs")
		html := bodyString(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("logs of %s: %d %.300s", id, res.StatusCode, html)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if doc.Find("[data-testid=logs-only-own]").Length() > 0 {
			got = append(got, "(only own)")
		}
		doc.Find("[data-testid=log-request]").Each(func(_ int, s *goquery.Selection) {
			for _, w := range []string{"admins-private-thought", "managers-own-thought", "admins-echo", "managers-echo"} {
				if strings.Contains(s.Text(), w) {
					got = append(got, w)
				}
			}
		})
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		who  string
		id   string
		want []string
	}{
		{"mona", think.ID, []string{"(only own)", "managers-own-thought"}},
		{"audrey", think.ID, []string{"admins-private-thought", "managers-own-thought"}},
		{"ada", think.ID, []string{"admins-private-thought", "managers-own-thought"}},
		{"mona", echo, []string{"admins-echo", "managers-echo"}},
	} {
		if got := logs(srv.Login(t, tc.who, pw), tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("%s on the Logs tab of %s sees %v, want %v", tc.who, tc.id, got, tc.want)
		}
	}
}
