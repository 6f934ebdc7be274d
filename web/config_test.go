package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// GET /api/v1/export and POST /api/v1/import: the whole configuration. Reading it is
// reading configurations; importing it is an administrator's. A plan names what cannot
// be applied, a bad file names the field, and the import page shows categories and
// tools beside the servers.
func TestConfigAPI(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv, admin, tm := f.srv, f.admin, f.tm
	ctx := context.Background()
	if _, err := srv.Tools.SaveCategory(ctx, audit.System, "", tools.CategoryInput{Name: "utilities"}); err != nil {
		t.Fatal(err)
	}

	status, raw := tm.do(http.MethodGet, "/api/v1/export", nil)
	if status != http.StatusOK || !strings.Contains(string(raw), "- name: utilities") || !strings.Contains(string(raw), "settings:\n  approval_ttl_seconds: 86400") {
		t.Fatalf("export as tool manager: %d\n%s", status, raw)
	}
	file := string(raw) + "tools:\n  - tool: nosuch__echo\n    risk: high\n"
	file = strings.Replace(file, "- name: utilities", "- name: utilities\n    description: Small helpers", 1)

	status, raw = tm.do(http.MethodPost, "/api/v1/import?filename=config.yaml", file)
	if status != http.StatusForbidden {
		t.Fatalf("import as tool manager: %d %s, want 403", status, raw)
	}

	var out struct {
		DryRun bool   `json:"dry_run"`
		Diff   string `json:"diff"`
		Plan   struct {
			Items []struct {
				Kind, Name, Action string
			} `json:"items"`
			NotApplied []registry.Problem `json:"not_applied"`
		} `json:"plan"`
		Result *struct {
			Changed    []string           `json:"changed"`
			NotApplied []registry.Problem `json:"not_applied"`
		} `json:"result"`
	}
	admin.json(http.MethodPost, "/api/v1/import?filename=config.yaml&dry_run=true", file, http.StatusOK, &out)
	if !out.DryRun || out.Result != nil || len(out.Plan.Items) != 1 || out.Plan.Items[0].Kind != "category" ||
		len(out.Plan.NotApplied) != 1 || out.Plan.NotApplied[0].Field != "tools.nosuch__echo" ||
		!strings.Contains(out.Diff, `description: "" → "Small helpers"`) {
		t.Fatalf("dry run: %+v", out)
	}
	if cs, _ := srv.Tools.Categories(ctx); cs[0].Description != "" {
		t.Fatal("the dry run changed the category")
	}
	out.Result = nil
	admin.json(http.MethodPost, "/api/v1/import?filename=config.yaml", file, http.StatusOK, &out)
	if out.DryRun || out.Result == nil || len(out.Result.Changed) != 1 || len(out.Result.NotApplied) != 1 {
		t.Fatalf("import: %+v", out)
	}
	if cs, _ := srv.Tools.Categories(ctx); cs[0].Description != "Small helpers" {
		t.Fatal("the import did not change the category")
	}

	status, raw = admin.do(http.MethodPost, "/api/v1/import?filename=config.yaml", "version: 1\ntools:\n  - tool: a__b\n    timeout_ms: 5\n")
	var e apiErr
	_ = json.Unmarshal(raw, &e)
	if status != http.StatusBadRequest || !strings.Contains(strings.Join(e.paths(), " "), "tools.a__b.timeout_ms") {
		t.Fatalf("bad file: %d %s", status, raw)
	}

	// The page: the category change is shown beside the servers; a tool manager may not apply it.
	file = strings.Replace(file, "Small helpers", "Helpers", 1)
	res := srv.PostForm(t, f.adminWb, "/servers/import", url.Values{"content": {file}, "filename": {"config.yaml"}})
	doc := page(t, res)
	if res.StatusCode != http.StatusOK || doc.Find("[data-testid=plan-other][data-kind=category][data-name=utilities]").Length() != 1 ||
		!strings.Contains(doc.Find("[data-testid=import-not-applied]").Text(), "nosuch__echo") || doc.Find("[data-testid=apply-import]").Length() != 1 {
		t.Fatalf("import page as admin: %d\n%s", res.StatusCode, doc.Find("main").Text())
	}
	p := readImportPage(t, srv.PostForm(t, f.tmWeb, "/servers/import", url.Values{"content": {file}, "filename": {"config.yaml"}}))
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.errors, "only administrators") || p.apply {
		t.Fatalf("import page as tool manager: %+v", p)
	}
	// What they may not import is not planned at all (each listed tool would be
	// planned against the stored ones for a plan that cannot be applied).
	if strings.Contains(p.notApplied, "nosuch__echo") {
		t.Fatalf("the refused tools were planned for a tool manager:\n%s", p.notApplied)
	}
}
