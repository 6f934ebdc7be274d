package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/textcheck"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// A registration's free text that PostgreSQL cannot store as text (a NUL, bytes that
// are not UTF-8) is refused naming its field. Before, a description or working_dir with
// a NUL passed validation and the INSERT failed (SQLSTATE 22021: a 500), from an API
// body or an imported YAML file ("\0" is a NUL there).
func TestServerTextFieldsRefuseNonText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name, field string
		mod         func(*registry.Spec)
	}{
		{"description NUL", "description", func(s *registry.Spec) { s.Description = "a\x00b" }},
		{"description not UTF-8", "description", func(s *registry.Spec) { s.Description = "a\xffb" }},
		{"working_dir NUL", "working_dir", func(s *registry.Spec) { s.WorkingDir = "/srv/a\x00b" }},
		{"working_dir not UTF-8", "working_dir", func(s *registry.Spec) { s.WorkingDir = "/srv/\xff" }},
		{"command not UTF-8", "command", func(s *registry.Spec) { s.Command = "np\xffx" }},
		{"url not UTF-8", "url", func(s *registry.Spec) {
			*s = httpSpec(s.Name)
			s.URL = "http://127.0.0.1:3001/m\xffcp"
		}},
	}
	for i, tc := range cases {
		sp := stdioSpec("text-" + string(rune('a'+i)))
		tc.mod(&sp)
		_, err := f.reg.CreateServer(f.ctx, audit.System, sp)
		var ve *verr.Error
		if !errors.As(err, &ve) || ve.For(tc.field) == "" {
			t.Errorf("%s: got %v, want an invalid input naming %s", tc.name, err, tc.field)
		}
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("got %d servers stored, want none", n)
	}

	// The same from an imported file: a problem naming the field, nothing stored.
	file := "version: 1\nservers:\n  - name: nul-desc\n    type: stdio\n    command: npx\n    description: \"a\\0b\"\n    working_dir: \"/srv/\\0\"\n"
	cfg, err := registry.ParseConfig("servers.yaml", []byte(file), registry.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, p := range plan.Errors {
		text = append(text, p.String())
	}
	all := strings.Join(text, "\n")
	if !strings.Contains(all, "description: "+textcheck.WhyNUL) || !strings.Contains(all, "working_dir: "+textcheck.WhyNUL) {
		t.Errorf("plan of a NUL description and working_dir: got errors %q, want both named", all)
	}
	if _, err := f.reg.ApplyImport(f.ctx, audit.System, plan); !errors.Is(err, registry.ErrInvalidPlan) {
		t.Errorf("applying that plan: got %v, want ErrInvalidPlan", err)
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("got %d servers stored by a refused import, want none", n)
	}
}

// ServerToolsPage refuses a cursor whose name PostgreSQL cannot compare as text (a
// NUL) as any other cursor it did not give out. Before, {"n":"\u0000"} was a 500.
func TestServerToolsPageRefusesNonTextCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("cursor-nul"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	for _, cursor := range []string{"eyJuIjoiXHUwMDAwIn0", "eyJ1Ijp0cnVlLCJuIjoiYVx1MDAwMGIifQ"} {
		_, err := f.reg.ServerToolsPage(f.ctx, sv.ID, 2, cursor)
		var ve *verr.Error
		if !errors.As(err, &ve) || !strings.Contains(ve.For("cursor"), "is not a cursor") {
			t.Errorf("cursor %s: got %v, want an invalid input: cursor is not a cursor", cursor, err)
		}
	}
}
