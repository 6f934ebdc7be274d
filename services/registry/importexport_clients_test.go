package registry_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// problems parses data and returns its problems as "server field: message".
func problems(t *testing.T, file, data string) []string {
	t.Helper()
	cfg, err := registry.ParseConfig(file, []byte(data), registry.ParseOptions{Sections: []string{"categories", "tools", "settings"}})
	ps, ok := registry.ProblemsOf(err)
	if !ok {
		t.Fatalf("%s: got %v %+v, want problems", file, err, cfg)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Server+" "+p.Field+": "+p.Message)
	}
	return out
}

// A VS Code argument that is an input prompt fails the file, naming the argument: left
// out, it shifted the later ones (--verbose became the token).
func TestParseVSCodeInputArgIsError(t *testing.T) {
	t.Parallel()
	data := `{"inputs": [{"type": "promptString", "id": "tok", "description": "API token"}],
  "servers": {"api": {"command": "api-server", "args": ["--token", "${input:tok}", "--verbose"]}}}`
	got := problems(t, "mcp.json", data)
	if !slices.ContainsFunc(got, func(p string) bool {
		return strings.HasPrefix(p, "api args[1]: ${input:tok}") && strings.Contains(p, `"API token"`)
	}) {
		t.Fatalf("problems %q: want one naming api args[1] and its input", got)
	}
}

// A client's file (mcpServers, or servers as a mapping) holding sections of Toolwarden's
// own format fails, naming each: they were dropped without a word.
func TestParseClientFormatRefusesNativeSections(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, data string
		want       []string
	}{
		{"claude_desktop_config.json", `{"mcpServers": {"a": {"command": "a"}}, "tools": [{"tool": "a__b", "state": "enabled"}], "settings": {}}`,
			[]string{" tools: ", " settings: "}},
		{"config.yaml", "version: 1\nservers:\n  a: {command: a}\ncategories: [{name: c}]\n", []string{" version: ", " categories: "}},
	} {
		got := problems(t, tc.file, tc.data)
		for _, w := range tc.want {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) && strings.Contains(p, "Toolwarden's own format") }) {
				t.Errorf("%s: problems %q, want one for%s", tc.file, got, w)
			}
		}
	}
	// Another client's keys of those names, not shaped as Toolwarden's sections (a tools
	// object of its own), stay ignored.
	if cfg, err := registry.ParseConfig("settings.json", []byte(`{"mcpServers": {"a": {"command": "a"}}, "tools": {"core": ["x"]}, "version": "2"}`),
		registry.ParseOptions{Sections: []string{"categories", "tools", "settings"}}); err != nil || len(cfg.Servers) != 1 {
		t.Errorf("another client's tools object: %v %+v, want its server read and the keys ignored", err, cfg)
	}
}
