package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/risk"
)

// An argument a tool's schema marked writeOnly when the plan was made stays masked on
// the execution's page and in the API after the server's definition drops writeOnly,
// or the server and its tools are deleted: a plain word typed into a secret field is
// still a secret, whatever the tool says now.
func TestExecutionPlannedSecretArgsOutliveDefinition(t *testing.T) {
	t.Parallel()
	for _, change := range []string{"redefined", "deleted"} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := webtest.Start(t, nil)
			hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "kv"})
			const secretSchema = `{"type":"object","properties":{"answer":{"type":"string","writeOnly":true},"note":{"type":"string"}}}`
			hs.Server().SetTool(mcptest.ToolSpec{Name: "login", Description: "Logs in to the test service.",
				InputSchema: json.RawMessage(secretSchema)})
			sv := srv.App.RegisterServer(t, registry.Spec{Name: "kv", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true},
				"login", "fail")
			srv.App.SetRisk(t, "kv__login", risk.Low)
			srv.App.SetRisk(t, "kv__fail", risk.Low)
			admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
			var ex apiExec
			admin.json(http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{
				"steps": []any{step("kv__login", map[string]any{"answer": secretTyped, "note": "hi"}),
					step("kv__fail", map[string]any{"message": "no"})},
				"rollback": []any{step("kv__login", map[string]any{"answer": secretUndoTyped, "note": "undo"})}}}, 201, &ex)
			waitExec(t, admin, ex.ID, "failed")

			switch change {
			case "redefined":
				hs.Server().SetTool(mcptest.ToolSpec{Name: "login", Description: "Logs in to the test service.",
					InputSchema: json.RawMessage(strings.Replace(secretSchema, `,"writeOnly":true`, "", 1))})
				admin.json(http.MethodPost, "/api/v1/servers/"+sv.ID+"/discover", nil, 200, nil)
				webtest.WaitFor(t, 30*time.Second, func() bool {
					tg, err := srv.App.Tools.Target(ctx, "kv__login")
					return err == nil && !strings.Contains(string(tg.InputSchema), "writeOnly")
				}, "the definition without writeOnly")
				srv.App.Enable(t, "kv__login") // a changed definition is validated again
			case "deleted":
				if err := srv.Registry.DeleteServer(ctx, audit.System, sv.ID); err != nil {
					t.Fatal(err)
				}
			}

			srv.CreateUser(t, "audra", auth.RoleAuditor, "auditor-password-1")
			audra := svClient{t: t, srv: srv, c: srv.Login(t, "audra", "auditor-password-1")}
			// The API's steps.
			noSecret(t, audra, "/api/v1/executions/"+ex.ID)
			var got apiExec
			audra.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &got)
			if len(got.Steps) != 2 {
				t.Fatalf("the API's steps: %+v", got.Steps)
			}
			if a := string(got.Steps[0].Arguments); !strings.Contains(a, `"answer":"********"`) || !strings.Contains(a, `"note":"hi"`) {
				t.Errorf("the API's first step's arguments: %s, want the answer masked and the note shown", a)
			}
			// The page: the preview's arguments and its undo's, and the rollback panel.
			d := noSecret(t, audra, "/executions/"+ex.ID)
			st := d.Find(`[data-testid=action-preview] [data-testid=preview-step]`).First()
			if got := st.Find(`[data-testid=step-arguments]`).Text(); !strings.Contains(got, `"answer": "********"`) {
				t.Errorf("the preview's arguments: %s", got)
			}
			if got := st.Find(`[data-testid=step-undo]`).Text(); !strings.Contains(got, "********") {
				t.Errorf("the preview's undo: %s", got)
			}
			results := noSecret(t, audra, "/executions/"+ex.ID+"/results")
			if change == "deleted" {
				return
			}
			// The plan's own undo step, prepared again from the definition as it is now.
			if got := results.Find(panelArgs).Text(); !strings.Contains(got, `"answer": "********"`) {
				t.Errorf("the rollback panel's arguments: %q", got)
			}
			// The rollback plan itself keeps the sealed undo step's secret names.
			if _, rp, err := srv.Executions.PlanRollback(ctx, ex.ID); err != nil || len(rp.Steps) != 1 || !slices.Contains(rp.Steps[0].SecretArgs, "answer") {
				t.Errorf("the rollback plan: %v; want its one step's secret_arguments to hold answer", err)
				for _, st := range rp.Steps {
					t.Errorf("a step's secret_arguments: %v", st.SecretArgs)
				}
			}
			noSecret(t, audra, "/api/v1/executions/"+ex.ID+"/rollback")
			// Rolled back, the stored undo step too.
			admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/rollback", map[string]any{"confirm": true}, 200, nil)
			waitExec(t, admin, ex.ID, "rolled_back")
			noSecret(t, audra, "/api/v1/executions/"+ex.ID)
			var rolled struct {
				Rollback []struct {
					Arguments map[string]string `json:"arguments"`
				} `json:"rollback"`
			}
			audra.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &rolled)
			if len(rolled.Rollback) != 1 || rolled.Rollback[0].Arguments["answer"] != "********" {
				t.Errorf("the API's rollback steps: %+v, want the answer masked", rolled.Rollback)
			}
		})
	}
}
