package assistant

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/planner"
)

// A model's proposal goes through the same checks as the built-in reading: known
// intents only, names from the catalogue, parameters the tool has, risk levels that
// exist. The model speaks the OpenAI chat-completions protocol through the planner's
// real client; the server here answers as a model would (there is no model offline).
func TestModelProposalIsChecked(t *testing.T) {
	t.Parallel()
	var answer string
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		asked = append(asked, req.Messages[len(req.Messages)-1].Content)
		if !strings.Contains(req.Messages[0].Content, "get_forecast on weather") {
			t.Errorf("the prompt lacks the catalogue: %s", req.Messages[0].Content)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"content": answer}}}})
	}))
	t.Cleanup(srv.Close)
	m := planner.NewLLM(srv.URL, &planner.LLMOptions{Model: "test"})
	cat := fixture()
	const msg = "the thing that predicts rain tomorrow, could it be usable again"

	if u := Understand(msg, cat); u.Intent != IntentUnknown {
		t.Fatalf("the built-in reading understood %q as %s; pick a harder sentence", msg, u.Intent)
	}
	for _, c := range []struct {
		name, answer string
		ok           bool
		check        func(Understanding) string
	}{
		{"a good proposal", "Sure! {\"intent\":\"enable_tool\",\"tool\":\"get_forecast\",\"risk\":\"extreme\",\"settings\":{\"units\":\"metric\",\"rm -rf\":\"1\"}}", true,
			func(u Understanding) string {
				if u.Intent != IntentEnableTool || len(u.Tools) != 1 || u.Tools[0] != "t-weather.get_forecast" {
					return "want enable get_forecast"
				}
				if u.Risk != "" || len(u.Settings) != 1 || u.Settings["units"] != "metric" {
					return "an unknown risk level or parameter was kept"
				}
				return ""
			}},
		{"an intent that does not exist", `{"intent":"drop_database"}`, false, nil},
		{"an answer the rules read", `{"intent":"yes"}`, false, nil},
		{"a tool that does not exist", `{"intent":"disable_tool","tool":"launch_missiles"}`, true,
			func(u Understanding) string {
				if len(u.Tools) != 0 || u.Ref != "launch_missiles" {
					return "an unknown tool must match nothing"
				}
				return ""
			}},
		{"prose", "I think you want the weather.", false, nil},
		// Fields are echoed in the stored reply: one past its bound drops the proposal.
		{"a huge name", `{"intent":"add_server","url":"http://x.example/mcp","name":"` + strings.Repeat("n", 201) + `"}`, false, nil},
		{"too many tags", `{"intent":"enable_tool","tool":"get_forecast","tags":[` + strings.Repeat(`"t",`, 20) + `"t"]}`, false, nil},
		{"a huge setting", `{"intent":"configure_tool","tool":"get_forecast","settings":{"units":"` + strings.Repeat("m", 8193) + `"}}`, false, nil},
	} {
		answer = c.answer
		u, ok, _ := fromModel(t.Context(), m, msg, cat)
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v (%+v)", c.name, ok, c.ok, u)
			continue
		}
		if c.check != nil {
			if why := c.check(u); why != "" {
				t.Errorf("%s: %s: %+v", c.name, why, u)
			}
		}
	}
	if len(asked) != 8 || asked[0] != msg {
		t.Fatalf("the model was asked %q", asked)
	}
}
