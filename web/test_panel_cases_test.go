package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// The test cases table scrolls inside .table-wrap on a narrow screen; Delete asks
// first, naming the case; Run all says it is running (data-busy, app.js).
func TestTestPanelCasesMarkup(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	id := srv.App.Enable(t, "builtin__file_operations").ID
	if _, err := srv.Tools.SaveTestCase(context.Background(), audit.System, id, tools.TestCase{Name: "read a.txt",
		Arguments: json.RawMessage(`{"operation":"read_file","filePath":"a.txt"}`), Expect: "success"}); err != nil {
		t.Fatal(err)
	}
	c := srv.Login(t, "admin", webtest.AdminPassword)
	doc := page(t, srv.Get(t, c, "/tools/"+id+"/test"))
	if doc.Find(`[data-testid="test-cases"] .table-wrap > table`).Length() != 1 {
		t.Error("the test cases table is not inside .table-wrap: it runs off a narrow screen")
	}
	del := doc.Find(`[data-testid="case-delete"]`).Closest("form")
	if got := del.AttrOr("data-confirm", ""); !strings.Contains(got, "read a.txt") {
		t.Errorf("Delete case asks %q, want a confirmation naming the case", got)
	}
	all := doc.Find(`[data-testid="run-all-form"]`)
	if all.Length() != 1 || !strings.Contains(all.AttrOr("data-busy", ""), "Running") {
		t.Errorf("Run all (%d forms) has data-busy=%q, want it to say it is running", all.Length(), all.AttrOr("data-busy", ""))
	}
}
