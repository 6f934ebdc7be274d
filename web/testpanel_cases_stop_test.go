package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A case saved before its parameter became secret (writeOnly) still holds the value:
// the test panel never shows it, not in a case's tooltip, not in the form or the JSON
// editor when the case is loaded (the field is left empty and the case says to save it
// again), to a guest or an administrator.
func TestTestPanelCaseSecretNotShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "kv"})
	const plain = `{"type":"object","properties":{"answer":{"type":"string"},"note":{"type":"string"}}}`
	hs.Server().SetTool(mcptest.ToolSpec{Name: "login", Description: "Logs in to the test service.", InputSchema: json.RawMessage(plain)})
	sv := srv.App.RegisterServer(t, registry.Spec{Name: "kv", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true}, "login")
	srv.App.SetRisk(t, "kv__login", risk.Low)
	id := srv.ToolID(t, "kv__login")
	tc, err := srv.Tools.SaveTestCase(ctx, audit.System, id, tools.TestCase{Name: "c1",
		Arguments: json.RawMessage(`{"answer":"zebra-4821","note":"visible-note-77"}`)})
	if err != nil {
		t.Fatal(err)
	}
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	hs.Server().SetTool(mcptest.ToolSpec{Name: "login", Description: "Logs in to the test service.",
		InputSchema: json.RawMessage(strings.Replace(plain, `"answer":{"type":"string"}`, `"answer":{"type":"string","writeOnly":true}`, 1))})
	admin.json(http.MethodPost, "/api/v1/servers/"+sv.ID+"/discover", nil, 200, nil)
	webtest.WaitFor(t, 30*time.Second, func() bool {
		tg, err := srv.App.Tools.Target(ctx, "kv__login")
		return err == nil && strings.Contains(string(tg.InputSchema), "writeOnly")
	}, "the definition with writeOnly")
	srv.CreateUser(t, "gus", auth.RoleGuest, "guest-password-123")
	guest := srv.Login(t, "gus", "guest-password-123")
	for _, who := range []struct {
		name string
		c    *http.Client
	}{{"guest", guest}, {"admin", admin.c}} {
		for _, p := range []string{"/tools/" + id + "/test", "/tools/" + id + "/test?case=" + tc.ID} {
			res := srv.Get(t, who.c, p)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			html := string(b)
			if res.StatusCode != http.StatusOK || strings.Contains(html, "zebra-4821") {
				t.Errorf("%s %s: status %d, holds the now-secret value: %v", who.name, p, res.StatusCode, strings.Contains(html, "zebra-4821"))
			}
			if !strings.Contains(html, "now-secret parameter") {
				t.Errorf("%s %s: the case is not marked as holding a value for a now-secret parameter", who.name, p)
			}
			if strings.Contains(p, "?case=") && (!strings.Contains(html, "visible-note-77") || !strings.Contains(html, "Save the case again")) {
				t.Errorf("%s %s: want the case's other values loaded and the note to save it again", who.name, p)
			}
		}
	}
	// The case's own Run still sends the stored value (the server gets it).
	res := srv.PostForm(t, admin.c, "/tools/"+id+"/test/cases/"+tc.ID+"/run", url.Values{})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("run the case: got %d", res.StatusCode)
	}
	got, err := srv.Tools.TestCase(ctx, id, tc.ID)
	if err != nil || got.LastPassed == nil || !*got.LastPassed {
		t.Fatalf("the case's run: %+v %v, want passed", got, err)
	}
}

// Run all against a server that does not answer stops after two cases time out: the
// page says how far it went, the two outcomes are recorded with the time they took,
// and the tool, which a finished run would have marked failed, keeps its state.
func TestTestPanelCasesStopOnSilentServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "hs", true)
	id := toolID(t, srv, "hs__sleep")
	half := 500
	if _, err := srv.Tools.Update(ctx, audit.System, id, tools.Patch{TimeoutMS: &half}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := srv.Tools.SaveTestCase(ctx, audit.System, id, tools.TestCase{Name: "case " + strconv.Itoa(i),
			Arguments: json.RawMessage(`{"ms":60000}`)}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := srv.Tools.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.PostForm(t, admin, "/tools/"+id+"/test/cases/run", url.Values{"confirm": {"1"}, "phrase": {"hs__sleep"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("run all: got %d", res.StatusCode)
	}
	text := page(t, srv.Get(t, admin, "/tools/"+id+"/test")).Text()
	if !strings.Contains(text, "The server is not answering: 2 of 5 cases ran") || strings.Contains(text, "router: timeout") {
		t.Errorf("the page after the run: want it to say the server is not answering, 2 of 5 ran; got %s", text)
	}
	after, err := srv.Tools.Get(ctx, id)
	if err != nil || after.Status != before.Status {
		t.Errorf("the tool's status after a run that stopped: %s (was %s), %v", after.Status, before.Status, err)
	}
	cs, err := srv.Tools.TestCases(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, tc := range cs {
		if tc.LastRunAt != nil {
			ran++
			if tc.LastPassed == nil || *tc.LastPassed || tc.LastDurationMS == nil || *tc.LastDurationMS < 400 {
				t.Errorf("case %s: passed %v, %s ms; want failed with the time it took", tc.Name, fmt.Sprint(deref(tc.LastPassed)), fmt.Sprint(deref(tc.LastDurationMS)))
			}
		}
	}
	if ran != 2 {
		t.Errorf("cases with an outcome recorded: %d, want the 2 that ran", ran)
	}
}

// deref is *p, or nil.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
