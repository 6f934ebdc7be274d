package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

const (
	// tplCommand defines a tool that runs a program.
	tplCommand = "tools:\n  - name: word_count\n    input_schema: {type: object, properties: {text: {type: string}}}\n    command: {argv: [wc, -w], stdin: \"{text}\"}\n"
	// tplHTTP defines only a tool that sends a request.
	tplHTTP = "tools:\n  - name: weather\n    input_schema: {type: object, properties: {city: {type: string}}}\n    http: {url: \"https://api.example.com/w/{city}\"}\n"
)

func templateSpec(name, yaml string) registry.Spec {
	return registry.Spec{Name: name, Type: registry.TypeTemplate, Template: yaml, Enabled: true}
}

// A template server stores its YAML as written (line breaks normalized), hands it to the
// session manager, and records it in the audit log; its identity follows the YAML.
func TestTemplateServerStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(templateSpec("tpl", strings.ReplaceAll(tplCommand, "\n", "\r\n")))
	if sv.Type != registry.TypeTemplate || sv.Template != tplCommand || sv.URL != "" || sv.Command != "" || sv.AuthType != registry.AuthNone {
		t.Fatalf("stored: %+v", sv)
	}
	c := f.connection(sv.ID)
	if c.Template != tplCommand || c.Type != registry.TypeTemplate {
		t.Fatalf("connection: type %q template %q", c.Type, c.Template)
	}
	if p := f.auditPayloads("server.create"); len(p) != 1 || p[0]["template"] != tplCommand || p[0]["url"] != nil {
		t.Fatalf("audit: %v", p)
	}
	edited := strings.Replace(tplCommand, "wc, -w", "wc, -l", 1)
	f.update(sv.ID, registry.Patch{Template: &edited})
	c2 := f.connection(sv.ID)
	if c2.Identity == c.Identity || c2.Fingerprint == c.Fingerprint {
		t.Fatal("a changed template kept the connection identity: approvals would not notice")
	}
	if p := f.auditPayloads("server.update"); len(p) != 1 || p[0]["changes"].(map[string]any)["template"] == nil {
		t.Fatalf("update audit: %v", p)
	}
	f.update(sv.ID, registry.Patch{Description: ptr("words")})
	if c3 := f.connection(sv.ID); c3.Identity != c2.Identity {
		t.Fatal("a description change moved the identity")
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers WHERE server_type = 'template' AND template <> ''`); n != 1 {
		t.Fatalf("rows: %d", n)
	}
}

// A template that does not parse is refused with each problem, at its line, under the
// field "template"; the fields of other types do not apply.
func TestTemplateServerValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bad := "tools:\n  - name: weather\n    input_schema: {type: object, properties: {city: {type: string}}}\n" +
		"    http: {url: \"https://api.example.com/w?c={cty}\"}\n  - name: x\n    command: {argv: [\"{p}\"]}\n"
	_, err := f.reg.CreateServer(f.ctx, audit.System, templateSpec("bad", bad))
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	var msgs []string
	for _, fe := range ve.Fields {
		if fe.Field != "template" {
			t.Errorf("field %q: %s", fe.Field, fe.Message)
		}
		msgs = append(msgs, fe.Message)
	}
	want := []string{
		"line 4: unknown placeholder {cty}; input_schema has city",
		"line 6: argv[0] is the program to run and cannot have placeholders: a call must never choose which program runs",
		"line 6: unknown placeholder {p}; input_schema has no properties (add p under input_schema properties, or write {{p} for a literal brace)",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}

	_, err = f.reg.CreateServer(f.ctx, audit.System, templateSpec("empty", "  \n"))
	wantFields(t, err, "template")
	sp := templateSpec("mixed", tplHTTP)
	sp.URL, sp.Command, sp.Env, sp.Headers = "http://127.0.0.1/mcp", "npx", map[string]string{"A": "1"}, map[string]string{"X": "1"}
	_, err = f.reg.CreateServer(f.ctx, audit.System, sp)
	wantFields(t, err, "url", "command", "env", "headers")
	st := stdioSpec("stdio-with-template")
	st.Template = tplHTTP
	_, err = f.reg.CreateServer(f.ctx, audit.System, st)
	wantFields(t, err, "template")

	// A credential written into the template is refused where it is (the template is
	// stored, shown and audited in plain text); placeholders and scheme names are not.
	leaky := "tools:\n  - name: w\n    input_schema: {type: object, properties: {k: {type: string}}}\n" +
		"    http:\n      url: \"https://api.example.com/w?api_key=abc123&c={k}\"\n      headers: {Authorization: \"Bearer sk-live-0123456789abcdef0123\", X-Key: \"{k}\", X-Tok: \"Bearer {k}\"}\n" +
		"  - name: c\n    command: {argv: [curl, --token, s3cr3tValue99]}\n" +
		"  - name: b\n    input_schema: {type: object, properties: {k: {type: string}}}\n" +
		"    http:\n      method: POST\n      url: \"https://api.example.com/b\"\n      headers: {Authorization: \"SSWS {k}\", Cookie: \"session={k}\"}\n      body: {api_key: \"abc123\", city: \"{k}\", token_type: bearer}\n" +
		"  - name: s\n    command: {argv: [cat], stdin: \"password=hunter2hunter2\"}\n" +
		"  - name: s2\n    input_schema: {type: object, properties: {u: {type: string}}}\n    command: {argv: [cat], stdin: \"user={u}\\npassword=hunter2hunter2\"}\n" +
		"  - name: j\n    input_schema: {type: object, properties: {k: {type: string}}}\n" +
		"    http:\n      method: POST\n      url: \"https://jira.example.com/rest/api/2/issue\"\n      headers: {Cookie: \"session={k}; api_key=abc123\"}\n      body: {fields: {project: {key: OPS}, summary: \"{k}\"}}\n"
	_, err = f.reg.CreateServer(f.ctx, audit.System, templateSpec("leaky", leaky))
	msgs = nil
	if !errors.As(err, &ve) {
		t.Fatalf("a template with credentials: got %v", err)
	}
	for _, fe := range ve.Fields {
		msgs = append(msgs, fe.Field+": "+fe.Message)
	}
	got := strings.Join(msgs, "\n")
	for _, w := range []string{"template: tool w: header Authorization looks like a secret", "template: tool w: the URL's api_key looks like a secret",
		"template: tool c: argv[2] looks like a secret", "template: tool b: the body's api_key looks like a secret", "template: tool s: stdin looks like a secret",
		"template: tool s2: stdin looks like a secret", "template: tool j: header Cookie looks like a secret"} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
	if strings.Contains(got, "X-Key") || strings.Contains(got, "X-Tok") || strings.Contains(got, "tool b: header") || strings.Contains(got, "body's key") || len(msgs) != 7 {
		t.Errorf("placeholders refused too:\n%s", got)
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("%d servers stored", n)
	}
}

// A template whose tools run commands puts programs on the host: setting or changing
// one needs server.command, as a stdio server's command does. HTTP-only templates do
// not; and no edit of a trusted template gets past KeepTrust.
func TestTemplateServerCommandPermission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if !registry.ChangesCommand(nil, registry.PatchFromSpec(templateSpec("a", tplCommand))) {
		t.Fatal("a new template with a command: ChangesCommand false")
	}
	if registry.ChangesCommand(nil, registry.PatchFromSpec(templateSpec("a", tplHTTP))) {
		t.Fatal("a new HTTP-only template: ChangesCommand true")
	}
	httpOnly := f.create(templateSpec("http-only", tplHTTP))
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, httpOnly.ID, registry.Patch{Template: ptr(tplCommand), KeepCommand: true}); !errors.Is(err, registry.ErrCommandChange) {
		t.Fatalf("adding a command without server.command: got %v", err)
	}
	edited := strings.Replace(tplHTTP, "/w/", "/weather/", 1)
	f.update(httpOnly.ID, registry.Patch{Template: &edited, KeepCommand: true})

	withCmd := f.create(templateSpec("with-cmd", tplCommand))
	if registry.ChangesCommand(ptr(f.server(withCmd.ID)), registry.Patch{Description: ptr("d")}) {
		t.Fatal("a description change: ChangesCommand true")
	}
	f.update(withCmd.ID, registry.Patch{Description: ptr("d"), KeepCommand: true})
	other := strings.Replace(tplCommand, "-w", "-c", 1)
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, withCmd.ID, registry.Patch{Template: &other, KeepCommand: true}); !errors.Is(err, registry.ErrCommandChange) {
		t.Fatalf("changing commands without server.command: got %v", err)
	}

	sp := templateSpec("trusted", tplHTTP)
	sp.Trusted = true
	trusted := f.create(sp)
	if !registry.ChangesTrustedTarget(f.server(trusted.ID), registry.Patch{Template: &edited}) {
		t.Fatal("ChangesTrustedTarget: false for a changed template")
	}
	if _, err := f.reg.UpdateServer(f.ctx, audit.System, trusted.ID, registry.Patch{Template: &edited, KeepTrust: true}); !errors.Is(err, registry.ErrTrustedTargetChange) {
		t.Fatalf("editing a trusted template without server.trust: got %v", err)
	}
}

func (f *fixture) server(id string) registry.Server {
	f.t.Helper()
	sv, err := f.reg.GetServer(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return sv
}

// A template server is exported with its YAML, as a block a person can read and diff,
// and imported back: unchanged into the same database, created in another, and a
// changed YAML shows in the plan by its tools and digest.
func TestTemplateServerExportImport(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	src.create(templateSpec("tpl", tplCommand))
	out := src.export()
	want := "  - name: tpl\n    type: template\n    template: |\n      tools:\n        - name: word_count\n"
	if !strings.Contains(out, want) {
		t.Fatalf("export:\n%s\nwant it to contain\n%s", out, want)
	}
	plan := src.plan("servers.yaml", out, true)
	if plan.HasErrors() || plan.Count(registry.PlanUnchanged) != 1 {
		t.Fatalf("round trip:\n%s", plan)
	}

	dst := newFixture(t)
	plan = dst.plan("servers.yaml", out, false)
	if plan.HasErrors() || plan.Count(registry.PlanCreate) != 1 {
		t.Fatalf("fresh database:\n%s", plan)
	}
	if names := plan.CommandChanges(); len(names) != 1 || names[0] != "tpl" {
		t.Fatalf("CommandChanges: %v", names)
	}
	if _, err := dst.reg.ApplyImport(dst.ctx, audit.System, plan); err != nil {
		t.Fatal(err)
	}
	if got := dst.server(dst.serverID("tpl")); got.Template != tplCommand || got.Type != registry.TypeTemplate {
		t.Fatalf("imported: %+v", got)
	}

	changed := strings.Replace(out, "name: word_count", "name: words", 1)
	plan = dst.plan("servers.yaml", changed, false)
	if plan.HasErrors() || plan.Count(registry.PlanUpdate) != 1 {
		t.Fatalf("changed:\n%s", plan)
	}
	text := plan.String()
	if !strings.Contains(text, "template: tools word_count (4 lines, sha256 ") || !strings.Contains(text, "→ tools words (4 lines, sha256 ") {
		t.Fatalf("plan:\n%s", text)
	}

	broken := strings.Replace(out, "{text}", "{txt}", 1)
	plan = dst.plan("servers.yaml", broken, false)
	if !plan.HasErrors() || plan.Errors[0].Field != "template" || !strings.Contains(plan.Errors[0].Message, "unknown placeholder {txt}; input_schema has text") {
		t.Fatalf("broken:\n%s", plan)
	}
}
