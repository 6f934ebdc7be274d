package configcode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A category description stored before the rules on hidden characters (a line break,
// ESC) comes back in an export: importing that export again is not refused for it, nor
// is the page's save of another field; a file that changes a description to one with
// such a character is refused by the plan, naming the field.
func TestCategoryDescriptionStoredBeforeTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, nil)
	c := must[tools.Category](t)(a.Tools.SaveCategory(ctx, admin, "", tools.CategoryInput{Name: "ops", Description: "plain"}))
	testkit.Exec(t, a.Owner, `UPDATE tool_categories SET description = E'line one\nline two \x1b[1m' WHERE id = $1`, c.ID)

	out := export(t, a)
	p := plan(t, a, "again.yaml", out)
	if _, err := a.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatalf("import of the export again: %v", err)
	}
	cur := must[[]tools.Category](t)(a.Tools.Categories(ctx))
	if len(cur) != 1 || cur[0].Description != "line one\nline two \x1b[1m" {
		t.Fatalf("categories after the import: %+v, want the stored description kept", cur)
	}
	// The page's form saves every field: the auto-enable toggle keeps the description.
	if _, err := a.Tools.SaveCategory(ctx, admin, c.ID, tools.CategoryInput{Name: "ops", Description: cur[0].Description, AutoEnable: true}); err != nil {
		t.Fatalf("the page's save of auto-enable: %v", err)
	}

	changed := strings.Replace(out, `line two`, `line 2`, 1)
	if changed == out {
		t.Fatalf("the export does not hold the description:\n%s", out)
	}
	// A problem of the plan, listed with the others, not an error that ends the planning.
	p2 := plan(t, a, "changed.yaml", changed)
	if !p2.HasErrors() || len(p2.Errors) != 1 || p2.Errors[0].Field != "categories.ops.description" || !strings.Contains(p2.Errors[0].Message, "U+000A") {
		t.Fatalf("a file changing the description to one with a line break: problems %+v, want one naming the field", p2.Errors)
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, p2); err == nil {
		t.Fatal("a plan with a problem was applied")
	}
}
