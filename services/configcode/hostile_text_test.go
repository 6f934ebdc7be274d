package configcode_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// A name in a file holding a terminal's control sequence (ESC), or an invisible format
// character, is refused at its place; and text PostgreSQL cannot store (a NUL) is
// refused naming its field, not left to fail the INSERT. No problem carries the ESC
// raw: `toolwarden import --dry-run` printed it, and the terminal erased plan lines.
func TestHostileTextInFile(t *testing.T) {
	t.Parallel()
	const tool = "version: 1\ntools:\n  - tool: ev__echo\n"
	for _, tc := range []struct{ body, field, msg string }{
		{"version: 1\ntools:\n  - tool: \"newsrv__x\\e[3A\\e[J\"\n", "tools[0].tool", "control character"},
		{"version: 1\ntools:\n  - tool: \"ev__a\\u202Eb\"\n", "tools[0].tool", "format character"},
		{"version: 1\ncategories:\n  - name: \"ok\\e[2K\"\n", "categories[0].name", "control character"},
		{"version: 1\ncategories:\n  - name: ok\n    description: \"a\\0b\"\n", "categories.ok.description", "NUL byte"},
		{tool + "    state: enabled\n    override: \"a\\0b\"\n", "tools.ev__echo.override", "NUL byte"},
		{tool + "    category: \"ok\\e[J\"\n", "tools.ev__echo.category", "control character"},
		{tool + "    permissions: {\"bob\\e[1A\": true}\n", "tools.ev__echo.permissions", "control character"},
		{tool + "    config:\n      \"a\\e[J\": {mode: fixed, value: 1}\n", "tools.ev__echo.config", "control character"},
		{tool + "    config:\n      city: {mode: fixed, value: \"a\\0b\"}\n", "tools.ev__echo.config.city.value", "NUL byte"},
		{tool + "    compensation:\n      undo: \"ev__a\\e[J\"\n", "tools.ev__echo.compensation.undo", "control character"},
		{tool + "    compensation:\n      undo: ev__add\n      arguments:\n        \"a\\e[J\": {from: /x}\n", "tools.ev__echo.compensation.arguments", "control character"},
		{tool + "    compensation:\n      undo: ev__add\n      arguments:\n        a: {from: \"/x\\0\"}\n", "tools.ev__echo.compensation.arguments.a.from", "NUL byte"},
		{tool + "    compensation:\n      undo: ev__add\n      arguments:\n        a: {value: \"x\\0\"}\n", "tools.ev__echo.compensation.arguments.a.value", "NUL byte"},
		{tool + "    test_cases:\n      - name: \"x\\e[2J\"\n", "tools.ev__echo.test_cases[0].name", "control character"},
	} {
		_, err := configcode.Parse("bad.yaml", []byte(tc.body), registry.ParseOptions{})
		ps, ok := registry.ProblemsOf(err)
		if !ok || len(ps) == 0 {
			t.Errorf("%q: not refused: %v", tc.body, err)
			continue
		}
		if ps[0].Field != tc.field || !strings.Contains(ps[0].Message, tc.msg) {
			t.Errorf("%q: got %v, want %s: …%s", tc.body, ps, tc.field, tc.msg)
		}
		if s := fmt.Sprint(err); strings.ContainsRune(s, '\x1b') || strings.ContainsRune(s, '\u202e') {
			t.Errorf("%q: the error holds the character raw: %q", tc.body, s)
		}
	}
}

// The plan's text quotes what a terminal would act on, in names and values, even from
// what is stored already; a problem's field (an unknown key is named as written) too.
func TestPlanTextQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	p := &configcode.Plan{File: "f.yaml", Servers: &registry.Plan{File: "f.yaml"}, Items: []configcode.Item{{
		Kind: configcode.KindTool, Name: "ev__x\x1b[3A", Action: registry.PlanUpdate,
		Changes: []registry.FieldChange{{Field: "test_cases.y\x1b[J", From: "a\x1b[2K", To: "removed\u202e"}},
	}}, Unapplied: []registry.Problem{{File: "f\x1b.yaml", Field: "tools.ev__x\x1b[3A", Message: "m\x1b[1A"}}}
	out := p.String()
	if strings.ContainsRune(out, '\x1b') || strings.ContainsRune(out, '\u202e') {
		t.Fatalf("the plan holds a control or format character raw:\n%q", out)
	}
	for _, want := range []string{`ev__x\x1b[3A`, `test_cases.y\x1b[J`, `a\x1b[2K`, `\u202e`, `m\x1b[1A`} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not name %s:\n%s", want, out)
		}
	}

	_, err := configcode.Parse("bad.yaml", []byte("version: 1\ntools:\n  - tool: ev__echo\n    \"colour\\e[2J\": red\n"), registry.ParseOptions{})
	if s := fmt.Sprint(err); err == nil || strings.ContainsRune(s, '\x1b') || !strings.Contains(s, `colour\x1b[2J`) {
		t.Fatalf("an unknown key with ESC: %q", s)
	}
}

// A test case stored with ESC in its name (the tool page lets it through) is printed
// quoted when an import removes it.
func TestPlanQuotesStoredNames(t *testing.T) {
	t.Parallel()
	hs := liveServer(t)
	a := source(t, hs)
	echo := a.ToolID(t, "ev__echo")
	must[tools.TestCase](t)(a.Tools.SaveTestCase(t.Context(), admin, echo, tools.TestCase{Name: "gone\x1b[2J", Arguments: json.RawMessage(`{}`)}))
	p := plan(t, a, "config.yaml", "version: 1\nservers: []\ntools:\n  - tool: ev__echo\n    permissions: {bob: false, carol: true}\n    test_cases: []\n")
	out := p.String()
	if strings.ContainsRune(out, '\x1b') || !strings.Contains(out, `test_cases.gone\x1b[2J`) {
		t.Fatalf("the stored name is not quoted:\n%q", out)
	}
}
