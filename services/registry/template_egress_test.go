package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/internal/egress"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// tplAt is a template of a command tool and two HTTP tools, the second sending its
// request to url.
func tplAt(url string) string {
	return "tools:\n  - name: words\n    command: {argv: [wc, -w]}\n" +
		"  - name: fine\n    http: {url: \"https://api.example.com/ok\"}\n" +
		"  - name: far\n    input_schema: {type: object, properties: {id: {type: string}}}\n" +
		"    http: {method: DELETE, url: \"" + url + "/items/{id}\"}\n"
}

// wantTemplateRefused fails unless err refuses the template's tool "far" (line 8) for
// the egress policy, under the field "template".
func wantTemplateRefused(t *testing.T, what string, err error, why string) {
	t.Helper()
	var ve *verr.Error
	if !errors.As(err, &ve) {
		t.Fatalf("%s: got %v, want the template refused", what, err)
	}
	msg := ve.For("template")
	if !strings.Contains(msg, "line 8: tool far: url ") || !strings.Contains(msg, "the egress policy refuses") || !strings.Contains(msg, why) ||
		strings.Contains(msg, "tool fine") {
		t.Fatalf("%s: template %q, want tool far refused (%s)", what, msg, why)
	}
}

// The egress policy judges each HTTP tool's URL of a template when it is saved, as it
// judges an HTTP server's URL: create, update and import refuse it under "template",
// naming the tool; a template refused only since it was saved can stay, unchanged, on a
// server that stays disabled.
func TestTemplateURLsUnderEgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	// Without any policy the cloud metadata endpoints are refused.
	for _, u := range []string{"http://169.254.169.254", "http://[fd00:ec2::254]:8080", "http://metadata.google.internal"} {
		_, err := f.reg.CreateServer(f.ctx, audit.System, templateSpec("meta", tplAt(u)))
		wantTemplateRefused(t, "create "+u, err, "metadata")
	}
	sv := f.create(templateSpec("tpl", tplAt("http://192.0.2.10:8080")))
	_, err := f.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Template: ptr(tplAt("http://169.254.169.254"))})
	wantTemplateRefused(t, "update", err, "metadata")

	// Under a policy allowing only api.example.com, the stored template's other host is
	// refused: the server can be disabled and edited while disabled, not enabled, and
	// its template cannot be changed to another refused one.
	strict, err := egress.Parse("api.example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	sf := *f
	sf.reg = registry.New(f.pool, f.keys, &registry.Options{Egress: strict})
	if _, err := sf.reg.SetEnabled(f.ctx, audit.System, sv.ID, false); err != nil {
		t.Fatalf("disable under the stricter policy: %v", err)
	}
	if _, err := sf.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Description: ptr("kept off")}); err != nil {
		t.Fatalf("edit the disabled server: %v", err)
	}
	_, err = sf.reg.SetEnabled(f.ctx, audit.System, sv.ID, true)
	wantTemplateRefused(t, "enable", err, "not on the allow list")
	_, err = sf.reg.UpdateServer(f.ctx, audit.System, sv.ID, registry.Patch{Template: ptr(tplAt("https://other.example"))})
	wantTemplateRefused(t, "change the disabled server's template", err, "other.example")
	_, err = sf.reg.CreateServer(f.ctx, audit.System, templateSpec("other", tplAt("https://other.example")))
	wantTemplateRefused(t, "create under the stricter policy", err, "other.example")
	sf.create(templateSpec("allowed", tplAt("https://api.example.com")))

	// Import: the plan reports the refused tool under the field template.
	plan := sf.plan("servers.yaml", "version: 1\nservers:\n  - name: imported\n    type: template\n    template: |\n"+
		indent(tplAt("https://other.example"), "      "), false)
	if !plan.HasErrors() || plan.Errors[0].Field != "template" || !strings.Contains(plan.Errors[0].Message, "tool far: url https://other.example") {
		t.Fatalf("import:\n%s", plan)
	}
}
