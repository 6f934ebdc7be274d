package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// partialFile registers a template server named server (the import discovers it) and a
// category, and tags the server's tool "refused", which the test database refuses: the
// second transaction (the discovered tools' settings) fails after the first committed.
func partialFile(server string) string {
	return "version: 1\nservers:\n  - name: " + server + "\n    type: template\n    template: |\n      tools:\n" +
		"        - name: word_count\n          input_schema: {type: object, properties: {text: {type: string}}}\n" +
		"          command: {argv: [wc, -w], stdin: \"{text}\"}\n    enabled: true\n    trusted: false\n" +
		"categories:\n  - name: " + server + "-cat\ntools:\n  - tool: " + server + "__word_count\n    tags: [refused]\n"
}

// An import whose first transaction committed and whose second failed says so, on the
// API (the result, partial: true and why) and on the page (a flash naming what was
// applied and what was not), instead of an error as if nothing had changed.
func TestConfigImportPartial(t *testing.T) {
	t.Parallel()
	f := newPermFixture(t)
	srv := f.srv
	ctx := context.Background()
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE tool_tags ADD CONSTRAINT test_refused CHECK (tag <> 'refused')`); err != nil {
		t.Fatal(err)
	}

	p := readImportPage(t, srv.PostForm(t, f.adminWb, "/servers/import", url.Values{"content": {partialFile("tpla")}, "filename": {"config.yaml"}}))
	if p.status != http.StatusOK || !p.apply {
		t.Fatalf("preview: %+v", p)
	}
	res := srv.PostForm(t, f.adminWb, "/servers/import/apply", url.Values{"sealed": {p.sealed}, "digest": {p.digest}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/servers" {
		t.Fatalf("apply: %d to %q, want 303 to /servers", res.StatusCode, res.Header.Get("Location"))
	}
	flash := page(t, srv.Get(t, f.adminWb, "/servers")).Find("[data-testid=flash]").Text()
	for _, want := range []string{"1 created", "category tpla-cat", "not applied", "tpla__word_count", "import the file again"} {
		if !strings.Contains(flash, want) {
			t.Errorf("the flash lacks %q: %q", want, flash)
		}
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_categories WHERE name = 'tpla-cat'`); n != 1 {
		t.Fatal("the first transaction of the page's import was not applied")
	}

	// An error, so that a script checking the status does not take it for success, whose
	// details say what was applied.
	var out struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details struct {
				Partial bool `json:"partial"`
				Result  *struct {
					Servers    registry.ImportResult `json:"servers"`
					Changed    []string              `json:"changed"`
					NotApplied []registry.Problem    `json:"not_applied"`
				} `json:"result"`
			} `json:"details"`
		} `json:"error"`
	}
	f.admin.json(http.MethodPost, "/api/v1/import?filename=config.yaml", partialFile("tplb"), http.StatusInternalServerError, &out)
	e, got := out.Error, out.Error.Details.Result
	if e.Code != "import_partial" || !e.Details.Partial || !strings.Contains(e.Message, "import the file again") || got == nil ||
		len(got.Servers.Created) != 1 || strings.Join(got.Changed, ",") != "category tplb-cat" ||
		len(got.NotApplied) != 1 || got.NotApplied[0].Field != "tools.tplb__word_count" {
		t.Fatalf("API import: %+v %+v", out, got)
	}
}
