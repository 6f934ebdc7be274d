package configcode_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// readServer serves one tool, s__t, that nothing marks risky: validated once discovered.
func readServer(t *testing.T) *mcptest.HTTPServer {
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "s"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "t", Description: "Reads a file.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)})
	return hs
}

func toolStatus(t *testing.T, a *apptest.App, qualified string) string {
	t.Helper()
	tg, err := a.Tools.Target(context.Background(), qualified)
	if err != nil {
		t.Fatal(err)
	}
	return tg.Status
}

// A file putting a validated tool in a category with auto_enable does not enable it:
// the plan shows only the category, and a listed tool gets exactly the file's settings
// (its state is the file's state:, here left out).
func TestImportCategoryDoesNotAutoEnable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, nil)
	a.RegisterServer(t, registry.Spec{Name: "s", Type: registry.TypeStreamableHTTP, URL: readServer(t).URL(), Enabled: true})
	must[tools.Category](t)(a.Tools.SaveCategory(ctx, admin, "", tools.CategoryInput{Name: "auto", AutoEnable: true}))
	if st := a.Settled(t, "s__t").Status; st != "validated" {
		t.Fatalf("the tool is %s, not validated", st)
	}
	p := plan(t, a, "c.yaml", "version: 1\nservers: []\ntools:\n  - tool: s__t\n    category: auto\n")
	if p.HasErrors() || len(p.Unapplied) > 0 || strings.Contains(p.String(), "state") {
		t.Fatalf("plan:\n%s", p)
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatal(err)
	}
	if st := toolStatus(t, a, "s__t"); st != "validated" {
		t.Fatalf("the import left the tool %s; its plan showed only its category:\n%s", st, p)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools t JOIN tool_categories c ON c.id = t.category_id WHERE c.name = 'auto'`); n != 1 {
		t.Fatalf("the tool is not in the category")
	}
}

// An export of a validated tool in an auto-enable category (no state:) imported into an
// empty database leaves it validated there: exporting that database gives the same file.
func TestRoundTripAutoEnableCategory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := apptest.Start(t, nil)
	src.RegisterServer(t, registry.Spec{Name: "s", Type: registry.TypeStreamableHTTP, URL: readServer(t).URL(), Enabled: true})
	c := must[tools.Category](t)(src.Tools.SaveCategory(ctx, admin, "", tools.CategoryInput{Name: "auto"}))
	id := src.Settled(t, "s__t").ID
	cat := "auto"
	must[tools.Item](t)(src.Tools.Update(ctx, admin, id, tools.Patch{Category: &cat}))
	// Auto-enable turned on afterwards: the tool stays validated here.
	must[tools.Category](t)(src.Tools.SaveCategory(ctx, admin, c.ID, tools.CategoryInput{Name: "auto", AutoEnable: true}))
	if st := toolStatus(t, src, "s__t"); st != "validated" {
		t.Fatalf("the source tool is %s", st)
	}
	out := export(t, src)
	if strings.Contains(out, "state:") || !strings.Contains(out, "category: auto") {
		t.Fatalf("the export:\n%s", out)
	}

	dst := apptest.Start(t, nil)
	p := plan(t, dst, "c.yaml", out)
	if p.HasErrors() {
		t.Fatalf("plan:\n%s", p)
	}
	if _, err := dst.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatal(err)
	}
	if st := toolStatus(t, dst, "s__t"); st != "validated" {
		t.Errorf("the imported tool is %s, not validated as in the file's database", st)
	}
	if again := export(t, dst); again != out {
		t.Errorf("the round trip differs:\n--- exported\n%s\n--- after import\n%s", out, again)
	}
}

// A stored test case argument, or a stored compensation's fixed value, that the current
// schema marks secret (saved before it did) is masked on the "from" side of the plan, as
// the export masks it: neither the plan's text nor the plan the API returns holds it.
func TestPlanMasksStoredSecretArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "s"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "t", Description: "Leaves a memo.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"memo":{"type":"string"},"note":{"type":"string"},"x":{"type":"string"}}}`)})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "t2", Description: "Leaves another memo.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)})
	for _, undo := range []string{"undo", "other"} {
		hs.Server().SetTool(mcptest.ToolSpec{Name: undo, Description: "Takes a memo back.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"memo":{"type":"string"},"x":{"type":"string"}}}`)})
	}
	a := apptest.Start(t, nil)
	a.RegisterServer(t, registry.Spec{Name: "s", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	id, id2 := a.Settled(t, "s__t").ID, a.Settled(t, "s__t2").ID
	undoID, otherID := a.Settled(t, "s__undo").ID, a.Settled(t, "s__other").ID
	must[tools.TestCase](t)(a.Tools.SaveTestCase(ctx, admin, id, tools.TestCase{Name: "c", Arguments: json.RawMessage(`{"memo":"red-9","note":"x"}`)}))
	// s__t keeps its undo tool in the file; s__t2's is replaced by one the file names, so
	// only the stored one's schema (which no compensation of the file names) masks it.
	for tool, undo := range map[string][2]string{id: {"s__undo", "red-8"}, id2: {"s__other", "red-7"}} {
		if err := a.Executions.SetCompensation(ctx, admin, tool, undo[0], map[string]executions.MappedArgument{
			"memo": {Value: json.RawMessage(`"` + undo[1] + `"`)}, "x": {From: "/x"}}); err != nil {
			t.Fatal(err)
		}
	}
	undoSchema := `{"type":"object","properties":{"memo":{"type":"string","writeOnly":true},"x":{"type":"string"}}}`
	for tool, schema := range map[string]string{
		id:     `{"type":"object","properties":{"memo":{"type":"string","writeOnly":true},"note":{"type":"string"},"x":{"type":"string"}}}`,
		undoID: undoSchema, otherID: undoSchema,
	} {
		if _, err := a.Pool.Exec(ctx, `UPDATE mcp_tools SET input_schema = $2 WHERE id = $1`, tool, schema); err != nil {
			t.Fatal(err)
		}
	}
	file := "version: 1\nservers: []\ntools:\n" +
		"  - tool: s__t\n    compensation:\n      undo: s__undo\n      arguments:\n        x: {from: /x}\n" +
		"    test_cases:\n      - name: c\n        arguments: {note: y}\n        expect: success\n" +
		"  - tool: s__t2\n    compensation:\n      undo: s__undo\n      arguments:\n        x: {from: /x}\n"
	p := plan(t, a, "c.yaml", file)
	if p.HasErrors() {
		t.Fatalf("plan:\n%s", p)
	}
	api, err := json.Marshal(map[string]any{"plan": p, "diff": p.String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"red-9", "red-8", "red-7"} {
		if strings.Contains(p.String(), secret) || strings.Contains(string(api), secret) {
			t.Errorf("the plan shows the stored secret %q:\n%s\n%s", secret, p, api)
		}
	}
	// The changes are still shown, with the value masked.
	for _, want := range []string{`test_cases.c: {"memo":"********","note":"x"} success → {"note":"y"} success`,
		`compensation: s__undo {"memo":{"value":"********"},"x":{"from":"/x"}} → s__undo {"x":{"from":"/x"}}`,
		`compensation: s__other {"memo":{"value":"********"},"x":{"from":"/x"}} → s__undo {"x":{"from":"/x"}}`} {
		if !strings.Contains(p.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, p)
		}
	}
}

// A permission given as null is refused, naming it: the API's null removes the rule, and
// read as false it would refuse the user instead. A null flag elsewhere is refused too.
func TestParseRefusesNullBooleans(t *testing.T) {
	for file, field := range map[string]string{
		"version: 1\nservers: []\ntools:\n  - tool: s__t\n    permissions:\n      bob: null\n": "tools.s__t.permissions.bob",
		"version: 1\nservers: []\ncategories:\n  - name: c\n    auto_enable: null\n":           "categories[0].auto_enable",
	} {
		_, err := configcode.Parse("c.yaml", []byte(file), registry.ParseOptions{})
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "not null") {
			t.Errorf("%s: err = %v, want one naming %s", file, err, field)
		}
	}
	f := parse(t, "c.yaml", "version: 1\nservers: []\ntools:\n  - tool: s__t\n    permissions:\n      bob: false\n      carol: true\n", false)
	if got := f.Tools[0].Permissions; len(got) != 2 || got["bob"] || !got["carol"] {
		t.Errorf("permissions: %v", got)
	}
}

// A malformed secret reference, perhaps the secret itself pasted in, is not echoed.
func TestParseSecretNotEchoed(t *testing.T) {
	const pasted = "sk-live-SUPERSECRET123"
	_, err := configcode.Parse("c.yaml", []byte("version: 1\nservers: []\ntools:\n  - tool: s__t\n    config:\n      api_key:\n        mode: fixed\n        secret: "+pasted+"\n"), registry.ParseOptions{})
	if err == nil || strings.Contains(err.Error(), "SUPERSECRET") || !strings.Contains(err.Error(), "tools.s__t.config.api_key.secret") ||
		!strings.Contains(err.Error(), "the value is not shown") {
		t.Fatalf("err = %v", err)
	}
}

// A tool's category is trimmed as a category's name is: " ops" is the category ops.
func TestParseToolCategoryTrimmed(t *testing.T) {
	f := parse(t, "c.yaml", "version: 1\nservers: []\ncategories:\n  - name: \" Ops \"\ntools:\n  - tool: s__t\n    category: \" Ops\"\n", false)
	if len(f.Categories) != 1 || f.Categories[0].Name != "ops" || len(f.Tools) != 1 || f.Tools[0].Category != "ops" {
		t.Fatalf("categories %+v, tools %+v", f.Categories, f.Tools)
	}
}

// When checking the parameters fails with an error that names no field (the tool is gone,
// the database failed), the plan drops their changes, as applying leaves them, and says so.
func TestPlanDropsParamsItCannotCheck(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	stored := map[string]tools.Setting{"units": {Mode: tools.ModeDefault, Value: json.RawMessage(`"metric"`)}}
	// A secret from the environment and a removal: neither reads the tool's schema first.
	file := map[string]configcode.Param{"api_key": {Mode: tools.ModeFixed, SecretEnv: "K", Value: json.RawMessage(`"v"`)}}
	// A tool id no row has: as a tool deleted after the plan read it.
	changes, not, applies := a.ConfigCode.PlanParamsForTest(context.Background(), uuid.NewString(), stored, file)
	if applies {
		t.Errorf("applying would set the parameters")
	}
	for _, c := range changes {
		if strings.HasPrefix(c.Field, "config.") {
			t.Errorf("the plan shows %s though applying leaves the parameters", c)
		}
	}
	if len(not) == 0 || !strings.Contains(strings.Join(not, "\n"), "the tool's parameters were not applied") {
		t.Errorf("not applied: %q", not)
	}
}
