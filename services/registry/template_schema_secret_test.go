package registry_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// schemaGHToken has the shape of a GitHub personal access token.
const schemaGHToken = "ghp_0123456789abcdefghijABCDEFGHIJ012345"

// A credential written as a value of a tool's input_schema (a default the tool sends
// when the argument is left out, a const, an enum or examples value, nested too) is as
// plain as one written in a header: the schema is stored, audited, exported and listed
// to every client and the planner. It is refused when the template is saved, naming the
// tool, the property and the keyword, on create and on update alike.
func TestTemplateSchemaSecretRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	leaky := "tools:\n  - name: gh\n" +
		"    input_schema: {type: object, properties: {token: {type: string, default: \"" + schemaGHToken + "\"}}}\n" +
		"    http: {url: \"https://api.github.com/user\", headers: {Authorization: \"Bearer {token}\"}}\n" +
		"  - name: deep\n" +
		"    input_schema:\n      type: object\n      properties:\n" +
		"        auth: {type: object, properties: {password: {type: string, default: hunter2hunter2}, scheme: {type: string, default: basic}}}\n" +
		"        keys: {type: array, items: {type: string, enum: [\"sk-proj-0123456789abcdefghij0123\", other]}}\n" +
		"        q: {anyOf: [{type: string, examples: [\"xoxb-0123456789-abcdefghij\"]}, {type: integer}]}\n" +
		"        opts: {type: object, default: {api_key: abc123}}\n" +
		"        mode: {const: \"Bearer 0123456789abcdefABCDEF\"}\n" +
		"    http: {url: \"https://api.example.com/d?q={q}&m={mode}\", headers: {X-Auth: \"{auth}\", X-Keys: \"{keys}\", X-Opts: \"{opts}\"}}\n"
	want := []string{
		"tool gh: input_schema property token: default",
		"tool deep: input_schema property auth.password: default",
		"tool deep: input_schema property keys[]: enum",
		"tool deep: input_schema property q: examples",
		"tool deep: input_schema property opts: default",
		"tool deep: input_schema property mode: const",
	}
	check := func(err error) {
		t.Helper()
		var ve *verr.Error
		if !errors.As(err, &ve) {
			t.Fatalf("a template with credentials in its input_schema: got %v", err)
		}
		var got []string
		for _, fe := range ve.Fields {
			if fe.Field != "template" {
				t.Errorf("field %q: %s", fe.Field, fe.Message)
			}
			where, _, ok := strings.Cut(fe.Message, " looks like a secret, and a template is stored, shown and audited in plain text")
			if !ok {
				t.Errorf("message %q does not say why", fe.Message)
			}
			got = append(got, where)
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	_, err := f.reg.CreateServer(f.ctx, audit.System, templateSpec("leaky", leaky))
	check(err)
	if n := f.count(`SELECT count(*) FROM mcp_servers`); n != 0 {
		t.Fatalf("%d servers stored", n)
	}

	sv := f.create(templateSpec("gh", tplHTTP))
	_, err = f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Template: ptr(leaky)})
	check(err)
	if got := f.server(sv.ID).Template; got != tplHTTP {
		t.Fatalf("the refused template was stored: %q", got)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE payload::text LIKE '%' || $1 || '%'`, schemaGHToken); n != 0 {
		t.Fatalf("the token reached %d audit entries", n)
	}
}

// Values that are no credential stay: plain defaults, enums and examples, an empty
// default for a token, a pagination token's or a Jira project's key, a placeholder
// filled by the tool's configuration.
func TestTemplateSchemaHarmlessValuesAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ok := "tools:\n  - name: gh\n" +
		"    input_schema:\n      type: object\n      properties:\n" +
		"        token: {type: string, default: \"\"}\n" +
		"        format: {type: string, default: json, enum: [json, yaml], examples: [json]}\n" +
		"        page_token: {type: string, default: first}\n" +
		"        key: {type: string, default: OPS}\n" +
		"        token_type: {type: string, const: bearer}\n" +
		"        limit: {type: integer, default: 30}\n" +
		"        city: {type: string, examples: [London, \"New York\"]}\n" +
		"        opts: {type: object, default: {sort_key: name, verbose: true}}\n" +
		"    http: {url: \"https://api.github.com/search?f={format}&p={page_token}&k={key}&t={token_type}&l={limit}&c={city}\", headers: {Authorization: \"Bearer {token}\", X-Opts: \"{opts}\"}}\n"
	sv := f.create(templateSpec("gh", ok))
	if got := f.server(sv.ID).Template; got != ok {
		t.Fatalf("stored %q", got)
	}
}
