package tools_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A category's description is shown to everyone: a control character (ESC, a line
// break: its field is one line) or an invisible format character (U+202E) is refused
// naming it, and nothing is stored; a tab and zero-width joiners are not.
func TestCategoryDescriptionText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, desc := range []string{"a\tb", "نامه\u200cها", "👩\u200d💻 tools"} {
		if _, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "fine-" + uuid.NewString()[:8], Description: desc}); err != nil {
			t.Errorf("description %q: %v", desc, err)
		}
	}
	bad := []struct{ desc, want string }{
		{"hi\u202e\u001b[31mred", "contains the invisible format character U+202E"},
		{"hi\u001b[31mred", "contains the control character U+001B"},
		{"two\nlines", "contains the control character U+000A"},
		{"a\u0085b", "contains the control character U+0085"},
		{"a\u200bb", "contains the invisible format character U+200B"},
		{"a\u2029b", "contains the invisible format character U+2029"},
	}
	for _, tc := range bad {
		_, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "bad", Description: tc.desc})
		if ve := wantFields(t, err, "description"); !strings.HasPrefix(ve.For("description"), tc.want) {
			t.Errorf("%q: got %q, want %q", tc.desc, ve.For("description"), tc.want)
		}
		in := tools.CategoryInput{Name: "bad", Description: tc.desc}
		wantFields(t, tools.CheckCategory(&in), "description") // what an import checks
	}
	if n := f.count(`SELECT count(*) FROM tool_categories WHERE name = 'bad'`); n != 0 {
		t.Fatalf("%d categories with a bad description stored", n)
	}

	// An edit or a patch to such a description is refused, and nothing changes.
	c, err := f.svc.SaveCategory(f.ctx, alice, "", tools.CategoryInput{Name: "ops", Description: "operations"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.SaveCategory(f.ctx, alice, c.ID, tools.CategoryInput{Name: "ops", Description: "op\u202esnoit", AutoEnable: true})
	wantFields(t, err, "description")
	_, err = f.svc.PatchCategory(f.ctx, alice, c.ID, tools.CategoryPatch{Description: ptr("op\u001bs"), AutoEnable: ptr(true)})
	wantFields(t, err, "description")
	if got := f.strings(`SELECT description || '/' || auto_enable FROM tool_categories WHERE id = $1`, c.ID); got[0] != "operations/false" {
		t.Fatalf("after refused changes: %q", got)
	}

	// One stored before the rule stays while a patch leaves it alone.
	f.exec(`UPDATE tool_categories SET description = $2 WHERE id = $1`, c.ID, "old\u202eone")
	if _, err := f.svc.PatchCategory(f.ctx, alice, c.ID, tools.CategoryPatch{AutoEnable: ptr(true)}); err != nil {
		t.Fatalf("patching auto-enable of a category with an old description: %v", err)
	}
}

// A category or test case not found is its own fault (its subject names it), and still
// matches ErrNotFound; a test case of a tool that is gone is the tool's.
func TestCategoryAndCaseNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	subject := func(err error) string {
		if fl, ok := fault.As(err); ok && fl.Kind == fault.KindNotFound {
			return fl.Subject
		}
		return fmt.Sprintf("not a not-found fault: %v", err)
	}
	for _, id := range []string{"xyz", uuid.NewString()} {
		_, err := f.svc.SaveCategory(f.ctx, alice, id, tools.CategoryInput{Name: "ghost"})
		if subject(err) != "category" || !errors.Is(err, tools.ErrCategoryNotFound) || !errors.Is(err, tools.ErrNotFound) {
			t.Errorf("save category %s: %v", id, err)
		}
		if err := f.svc.DeleteCategory(f.ctx, alice, id); subject(err) != "category" {
			t.Errorf("delete category %s: %v", id, err)
		}
		if _, err := f.svc.PatchCategory(f.ctx, alice, id, tools.CategoryPatch{}); subject(err) != "category" {
			t.Errorf("patch category %s: %v", id, err)
		}
	}

	tool := f.tool(toolSpec{server: f.server("s", true), name: "echo"})
	for _, caseID := range []string{"xyz", uuid.NewString()} {
		err := f.svc.DeleteTestCase(f.ctx, alice, tool, caseID)
		if subject(err) != "test case" || !errors.Is(err, tools.ErrTestCaseNotFound) || !errors.Is(err, tools.ErrNotFound) {
			t.Errorf("delete case %s: %v", caseID, err)
		}
		if _, err := f.svc.TestCase(f.ctx, tool, caseID); subject(err) != "test case" {
			t.Errorf("case %s: %v", caseID, err)
		}
	}
	tc, err := f.svc.SaveTestCase(f.ctx, alice, tool, tools.TestCase{Name: "hello", Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"xyz", uuid.NewString()} {
		if err := f.svc.DeleteTestCase(f.ctx, alice, gone, tc.ID); subject(err) != "tool" {
			t.Errorf("delete a case of tool %s: %v", gone, err)
		}
	}
	if err := f.svc.DeleteTestCase(f.ctx, alice, tool, tc.ID); err != nil {
		t.Fatalf("delete the case: %v", err)
	}
}
