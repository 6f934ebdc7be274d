package configcode_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// Stored tags read back in a linguistic collation ("readme" before "read-only", the
// dash ignored) are still compared in byte order: re-importing an export changes nothing.
func TestReimportTagsInLinguisticCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "ev", false)
	echo := a.Settled(t, "ev__echo")
	// The embedded cluster is --no-locale (C); a libc en_US column sorts as this does.
	for _, q := range []string{
		`CREATE COLLATION tw_shifted (provider = icu, locale = 'und-u-ka-shifted')`,
		`ALTER TABLE tool_tags ALTER COLUMN tag TYPE text COLLATE tw_shifted`,
	} {
		if _, err := a.Owner.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	must[tools.Item](t)(a.Tools.Update(ctx, admin, echo.ID, tools.Patch{Tags: []string{"readme", "read-only"}, SetTags: true}))
	file := export(t, a)
	if !strings.Contains(file, "tags: [read-only, readme]") {
		t.Fatalf("the export:\n%s", file)
	}
	if p := plan(t, a, "config.yaml", file); !p.Empty() || p.HasErrors() {
		t.Fatalf("re-importing the export plans changes:\n%s", p)
	}
}

// Secret parameters whose plain references would be the same (get-user and get_user
// both read GET_USER; tool b__c's d and tool b's c__d both B__C__D) get distinct
// references, and an import stores each variable's value into its own parameter only.
func TestSecretRefsDistinct(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "s"})
	schema := json.RawMessage(`{"type":"object","properties":{"api_key":{"type":"string"}}}`)
	for _, n := range []string{"get-user", "get_user"} {
		hs.Server().SetTool(mcptest.ToolSpec{Name: n, Description: "Reads a user.", InputSchema: schema})
	}
	hs.Server().SetTool(mcptest.ToolSpec{Name: "b__c", Description: "Reads b.", InputSchema: json.RawMessage(`{"type":"object","properties":{"d":{"type":"string"}}}`)})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "b", Description: "Reads b.", InputSchema: json.RawMessage(`{"type":"object","properties":{"c__d":{"type":"string"}}}`)})
	src := apptest.Start(t, nil)
	src.RegisterServer(t, registry.Spec{Name: "s", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	for n, param := range map[string]string{"s__get-user": "api_key", "s__get_user": "api_key", "s__b__c": "d", "s__b": "c__d"} {
		must[tools.Item](t)(src.Tools.Update(ctx, admin, src.Settled(t, n).ID, tools.Patch{Params: map[string]tools.ParamInput{
			param: {Mode: tools.ModeFixed, Value: json.RawMessage(`"value of ` + n + `"`), Secret: true}}}))
	}
	file := export(t, src)
	refs := regexp.MustCompile(`(?m)^  - tool: (s__\S+)\n(?:    .*\n)*?        secret: \$\{env:([A-Z0-9_]+)\}`).FindAllStringSubmatch(file, -1)
	env := map[string]string{}
	for _, r := range refs {
		env[r[2]] = "value of " + r[1]
	}
	if len(refs) != 4 || len(env) != 4 {
		t.Fatalf("the secret references are not four distinct ones:\n%s", file)
	}
	parseEnv := func(env map[string]string) *configcode.File {
		f, err := configcode.Parse("config.yaml", []byte(file), registry.ParseOptions{ExpandEnv: true,
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	dst := apptest.Start(t, nil)
	p, err := dst.ConfigCode.Plan(ctx, parseEnv(env), configcode.ImportOptions{CompareSecrets: true})
	if err != nil || p.HasErrors() || len(p.Unapplied) > 0 {
		t.Fatalf("plan: %v\n%s", err, p)
	}
	if _, err := dst.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatal(err)
	}
	// Each stored secret is its own variable's value: the same file plans nothing, and
	// with the values rotated every parameter changes.
	if p, err := dst.ConfigCode.Plan(ctx, parseEnv(env), configcode.ImportOptions{CompareSecrets: true}); err != nil || !p.Empty() {
		t.Fatalf("plan again: %v\n%s", err, p)
	}
	swapped := map[string]string{}
	for i, r := range refs {
		swapped[r[2]] = env[refs[(i+1)%len(refs)][2]]
	}
	if p, err := dst.ConfigCode.Plan(ctx, parseEnv(swapped), configcode.ImportOptions{CompareSecrets: true}); err != nil ||
		p.Count(configcode.KindTool, registry.PlanUpdate) != 4 {
		t.Fatalf("plan with the values swapped: %v\n%s", err, p)
	}
}

// Two imports planned against one configuration, each changing what the other's plan
// saw as unchanged: the second is refused, not applied into a mix matching neither file.
func TestApplyRefusesPlanOfListedUnchangedTool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "ev", false)
	high, low := "high", "low"
	must[tools.Item](t)(a.Tools.Update(ctx, admin, a.Settled(t, "ev__echo").ID, tools.Patch{Risk: &high}))
	must[tools.Item](t)(a.Tools.Update(ctx, admin, a.Settled(t, "ev__add").ID, tools.Patch{Risk: &low, MayLowerRisk: true}))
	pa := plan(t, a, "a.yaml", "version: 1\nservers: []\ntools:\n  - tool: ev__echo\n    risk: high\n  - tool: ev__add\n    risk: high\n")
	pb := plan(t, a, "b.yaml", "version: 1\nservers: []\ntools:\n  - tool: ev__echo\n    risk: low\n  - tool: ev__add\n    risk: low\n")
	if pa.Count(configcode.KindTool, registry.PlanUpdate) != 1 || pb.Count(configcode.KindTool, registry.PlanUpdate) != 1 {
		t.Fatalf("plans:\n%s\n---\n%s", pa, pb)
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, pa); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, pb); !errors.Is(err, configcode.ErrChangedSincePlan) {
		t.Fatalf("the second import: %v, want ErrChangedSincePlan", err)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE name IN ('echo', 'add') AND risk_override = 'high'`); n != 2 {
		t.Fatalf("%d of the two tools are high, want both (file a)", n)
	}
}
